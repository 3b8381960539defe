//! netem-compatible random variates.
//!
//! * `CRandom` is netem's `get_crandom()` correlated generator:
//!   `next = (rnd * (2^32 - rho) + last * rho) >> 32`, rho = corr% scaled to u32.
//! * `tabledist()` is netem's `tabledist()` (kernel sch_netem.c), bit-exact
//!   integer arithmetic, with the jitter `sigma` in nanoseconds.
//! * The `normal`, `pareto` and `paretonormal` tables are regenerated at start-up
//!   with the same formulas as iproute2's `netem/normal.c`, `pareto.c` and
//!   `paretonormal.c` (4096 entries of inverse CDF values scaled by
//!   NETEM_DIST_SCALE = 8192, clamped to i16).

use crate::rng::Rng;
use std::sync::OnceLock;

pub const NETEM_DIST_SCALE: i64 = 8192;
const TABLESIZE: usize = 16384;

unsafe extern "C" {
    fn erf(x: f64) -> f64;
    fn pow(x: f64, y: f64) -> f64;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JitterDist {
    Uniform,
    Normal,
    Pareto,
    ParetoNormal,
}

impl JitterDist {
    pub fn parse(s: &str) -> Option<JitterDist> {
        match s {
            "uniform" => Some(JitterDist::Uniform),
            "normal" => Some(JitterDist::Normal),
            "pareto" => Some(JitterDist::Pareto),
            "paretonormal" => Some(JitterDist::ParetoNormal),
            _ => None,
        }
    }
    #[allow(dead_code)]
    pub fn name(&self) -> &'static str {
        match self {
            JitterDist::Uniform => "uniform",
            JitterDist::Normal => "normal",
            JitterDist::Pareto => "pareto",
            JitterDist::ParetoNormal => "paretonormal",
        }
    }
    pub fn table(&self) -> Option<&'static [i16]> {
        match self {
            JitterDist::Uniform => None,
            JitterDist::Normal => Some(normal_table()),
            JitterDist::Pareto => Some(pareto_table()),
            JitterDist::ParetoNormal => Some(paretonormal_table()),
        }
    }
    /// Smallest value `tabledist` can return relative to mu, in units of sigma
    /// (used to know the earliest possible departure of a packet).
    pub fn min_factor(&self) -> f64 {
        match self.table() {
            None => -1.0,
            Some(t) => *t.iter().min().unwrap() as f64 / NETEM_DIST_SCALE as f64,
        }
    }
}

fn rint(x: f64) -> f64 {
    x.round_ties_even()
}

fn normal_cdf(x: f64) -> f64 {
    0.5 + 0.5 * unsafe { erf(x / (2.0f64).sqrt()) }
}

/// iproute2 normal.c: invert the CDF by scanning x in steps of 5e-5.
fn normal_inverse_raw() -> Vec<f64> {
    let mut table = vec![0.0f64; TABLESIZE + 1];
    let mut x = -10.0f64;
    while x < 10.05 {
        let i = rint(TABLESIZE as f64 * normal_cdf(x)) as usize;
        table[i] = x;
        x += 0.00005;
    }
    table
}

fn clamp16(v: i64) -> i16 {
    v.clamp(i16::MIN as i64, i16::MAX as i64) as i16
}

pub fn normal_table() -> &'static [i16] {
    static T: OnceLock<Vec<i16>> = OnceLock::new();
    T.get_or_init(|| {
        let raw = normal_inverse_raw();
        (0..TABLESIZE)
            .step_by(4)
            .map(|i| clamp16(rint(raw[i] * NETEM_DIST_SCALE as f64) as i64))
            .collect()
    })
}

fn pareto_value(i: i64) -> i64 {
    // i runs 65536, 65520, ..., 16 (pareto.c) — a = 3, x_m = 1, mean 1.5 removed,
    // scaled by 4/3 (so the table has sigma ~1.15 and a long right tail).
    let a = 3.0f64;
    let mut d = i as f64 / 65536.0;
    d = 1.0 / unsafe { pow(d, 1.0 / a) };
    d -= 1.5;
    d *= (4.0 / 3.0) * NETEM_DIST_SCALE as f64;
    if d > 32767.0 {
        d = 32767.0;
    }
    rint(d) as i64
}

pub fn pareto_table() -> &'static [i16] {
    static T: OnceLock<Vec<i16>> = OnceLock::new();
    T.get_or_init(|| {
        let mut v = Vec::with_capacity(4096);
        let mut i = 65536i64;
        while i > 0 {
            v.push(pareto_value(i) as i16);
            i -= 16;
        }
        v
    })
}

pub fn paretonormal_table() -> &'static [i16] {
    static T: OnceLock<Vec<i16>> = OnceLock::new();
    T.get_or_init(|| {
        let raw = normal_inverse_raw();
        (0..TABLESIZE)
            .step_by(4)
            .map(|i| {
                let normvalue = rint(raw[i] * NETEM_DIST_SCALE as f64) as i64;
                let parvalue = pareto_value(65536 - 4 * i as i64);
                // C integer division truncates toward zero, as does Rust's.
                clamp16((normvalue + 3 * parvalue) / 4)
            })
            .collect()
    })
}

/// netem's correlated uniform generator (`struct crndstate` + `get_crandom`).
#[derive(Clone, Debug)]
pub struct CRandom {
    rho: u32,
    last: u32,
}

impl CRandom {
    pub fn new(rho: u32, rng: &mut Rng) -> CRandom {
        CRandom { rho, last: rng.next_u32() }
    }
    #[inline]
    pub fn next(&mut self, rng: &mut Rng) -> u32 {
        if self.rho == 0 {
            return rng.next_u32();
        }
        let value = rng.next_u32() as u64;
        let rho = self.rho as u64 + 1;
        let answer = ((value * ((1u64 << 32) - rho) + self.last as u64 * rho) >> 32) as u32;
        self.last = answer;
        answer
    }
}

/// Percent (0..=100) to netem's u32 probability scale (iproute2 `set_percent`).
pub fn pct_to_u32(pct: f64) -> u32 {
    rint(pct / 100.0 * u32::MAX as f64).clamp(0.0, u32::MAX as f64) as u32
}

/// netem `tabledist(mu, sigma, state, prng, dist)`; returns ns (may be negative).
#[inline]
pub fn tabledist(mu: i64, sigma: i32, state: &mut CRandom, rng: &mut Rng, table: Option<&[i16]>) -> i64 {
    if sigma == 0 {
        return mu;
    }
    let rnd = state.next(rng);
    match table {
        None => (rnd % (2 * sigma as u32)) as i64 + mu - sigma as i64,
        Some(t) => {
            let t = t[rnd as usize % t.len()] as i64;
            let sigma = sigma as i64;
            let mut x = (sigma % NETEM_DIST_SCALE) * t;
            if x >= 0 {
                x += NETEM_DIST_SCALE / 2;
            } else {
                x -= NETEM_DIST_SCALE / 2;
            }
            x / NETEM_DIST_SCALE + (sigma / NETEM_DIST_SCALE) * t + mu
        }
    }
}


/// Standard normal sample (Box-Muller).
#[inline]
pub fn gaussian(rng: &mut Rng) -> f64 {
    let u1 = 1.0 - rng.next_f64(); // (0, 1]
    let u2 = rng.next_f64();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// Delay-jitter generator: `delay + tabledist(jitter, dist, correlation)`.
///
/// * correlation 0: bit-exact netem `tabledist()` (uniform via `rnd % 2σ`,
///   tables via `rnd % 4096`).
/// * correlation > 0: netem's `get_crandom()` cannot produce correlated
///   delays (its correlated u32 is reduced modulo 2σ / the table size, which
///   keeps only the uncorrelated low bits). linkem instead drives the same
///   inverse-CDF lookup with a Gaussian AR(1) copula: z' = ρz + sqrt(1-ρ²)ε,
///   u = Φ(z'). The marginal distribution is exactly the configured one and
///   successive delays have (rank) correlation ≈ ρ.
pub struct JitterGen {
    mu: i64,
    sigma: i32,
    table: Option<&'static [i16]>,
    rho: f64,
    z: f64,
    cr: CRandom,
}

impl JitterGen {
    pub fn new(mu_ns: u64, sigma_ns: u64, dist: JitterDist, corr_u32: u32, rng: &mut Rng) -> JitterGen {
        JitterGen {
            mu: mu_ns as i64,
            sigma: sigma_ns.min(i32::MAX as u64) as i32,
            table: dist.table(),
            rho: corr_u32 as f64 / u32::MAX as f64,
            z: gaussian(rng),
            cr: CRandom::new(0, rng),
        }
    }

    /// One delay sample in ns (may be negative; the caller clamps at 0).
    #[inline]
    pub fn sample(&mut self, rng: &mut Rng) -> i64 {
        if self.sigma == 0 {
            return self.mu;
        }
        if self.rho <= 0.0 {
            return tabledist(self.mu, self.sigma, &mut self.cr, rng, self.table);
        }
        self.z = self.rho * self.z + (1.0 - self.rho * self.rho).sqrt() * gaussian(rng);
        let u = (0.5 + 0.5 * unsafe { erf(self.z / std::f64::consts::SQRT_2) }).clamp(0.0, 1.0 - 1e-12);
        let sigma = self.sigma as i64;
        match self.table {
            None => self.mu - sigma + (u * (2 * sigma) as f64) as i64,
            Some(t) => {
                let v = t[((u * t.len() as f64) as usize).min(t.len() - 1)] as i64;
                // same fixed-point scaling as tabledist()
                let mut x = (sigma % NETEM_DIST_SCALE) * v;
                if x >= 0 {
                    x += NETEM_DIST_SCALE / 2;
                } else {
                    x -= NETEM_DIST_SCALE / 2;
                }
                x / NETEM_DIST_SCALE + (sigma / NETEM_DIST_SCALE) * v + self.mu
            }
        }
    }
}

/// Random loss. correlation 0: netem's `loss >= prandom_u32()`. correlation ρ > 0:
/// a two-state Markov chain with P(loss | previous lost) = p + ρ(1-p) and
/// P(loss | previous kept) = p(1-ρ): the long-run loss rate stays p and the
/// lag-1 correlation of loss events is ρ. (netem's get_crandom() instead
/// lowers the effective loss rate as the correlation grows.)
pub struct LossGen {
    p_u32: u32,
    p: f64,
    rho: f64,
    last: bool,
}

impl LossGen {
    pub fn new(p_u32: u32, corr_u32: u32) -> LossGen {
        LossGen { p_u32, p: p_u32 as f64 / u32::MAX as f64, rho: corr_u32 as f64 / u32::MAX as f64, last: false }
    }
    #[inline]
    pub fn lost(&mut self, rng: &mut Rng) -> bool {
        if self.p_u32 == 0 {
            return false;
        }
        if self.rho <= 0.0 {
            return self.p_u32 >= rng.next_u32();
        }
        let q = if self.last { self.p + self.rho * (1.0 - self.p) } else { self.p * (1.0 - self.rho) };
        self.last = rng.next_f64() < q;
        self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moments(v: &[f64]) -> (f64, f64) {
        let n = v.len() as f64;
        let m = v.iter().sum::<f64>() / n;
        let var = v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n;
        (m, var.sqrt())
    }

    #[test]
    fn tables_match_iproute2() {
        // First entries of iproute2's generated normal.dist / pareto.dist.
        assert_eq!(&normal_table()[..8], &[-32768, -28307, -26871, -25967, -25298, -24765, -24320, -23937]);
        assert_eq!(normal_table().len(), 4096);
        assert_eq!(pareto_table().len(), 4096);
        assert_eq!(paretonormal_table().len(), 4096);
        assert_eq!(pareto_table()[0], -5461); // (1 - 1.5) * 4/3 * 8192
        assert_eq!(*pareto_table().last().unwrap(), 32767); // clamped tail
        // centred: median ~0, mean ~0
        let t = normal_table();
        assert!(t[2048].abs() <= 4, "median {}", t[2048]);
        let mean: f64 = t.iter().map(|&x| x as f64).sum::<f64>() / 4096.0;
        assert!(mean.abs() < 20.0, "mean {}", mean);
    }

    fn sample(dist: JitterDist, mu: i64, sigma: i32, corr_pct: f64, n: usize) -> Vec<f64> {
        let mut rng = Rng::new(42);
        let mut g = JitterGen::new(mu as u64, sigma as u64, dist, pct_to_u32(corr_pct), &mut rng);
        (0..n).map(|_| g.sample(&mut rng) as f64).collect()
    }

    #[test]
    fn uniform_jitter_moments() {
        // netem default: uniform on [mu - sigma, mu + sigma): sd = sigma / sqrt(3)
        let v = sample(JitterDist::Uniform, 50_000_000, 5_000_000, 0.0, 200_000);
        let (m, s) = moments(&v);
        assert!((m - 50e6).abs() < 0.02e6, "mean {}", m);
        assert!((s - 5e6 / 3f64.sqrt()).abs() < 0.03e6, "sd {}", s);
        assert!(v.iter().all(|&x| (45e6..55e6).contains(&x)));
    }

    #[test]
    fn normal_jitter_moments() {
        let v = sample(JitterDist::Normal, 50_000_000, 5_000_000, 0.0, 200_000);
        let (m, s) = moments(&v);
        assert!((m - 50e6).abs() < 0.05e6, "mean {}", m);
        assert!((s - 5e6).abs() < 0.1e6, "sd {}", s);
        // clamped at +-4 sigma by the i16 table
        assert!(v.iter().all(|&x| (x - 50e6).abs() <= 4.0 * 5e6 + 1e3));
    }

    #[test]
    fn pareto_jitter_heavy_tail() {
        let v = sample(JitterDist::Pareto, 50_000_000, 5_000_000, 0.0, 200_000);
        let (m, s) = moments(&v);
        // netem's pareto table: a = 3, mean removed, scaled by 4/3
        // (the table mean is slightly negative because the tail is clamped at 4σ)
        assert!((m - 50e6).abs() < 0.25e6, "mean {}", m);
        assert!(s > 4.0e6 && s < 6.5e6, "sd {}", s);
        let min = v.iter().cloned().fold(f64::MAX, f64::min);
        let max = v.iter().cloned().fold(f64::MIN, f64::max);
        // bounded below at mu - 2/3 sigma, long right tail up to mu + 4 sigma
        assert!(min >= 50e6 - 0.667 * 5e6 - 1e3, "min {}", min);
        assert!(max > 50e6 + 3.0 * 5e6, "max {}", max);
        let skew = v.iter().map(|x| ((x - m) / s).powi(3)).sum::<f64>() / v.len() as f64;
        assert!(skew > 1.0, "skew {}", skew);
        let pn = sample(JitterDist::ParetoNormal, 50_000_000, 5_000_000, 0.0, 200_000);
        let (m2, s2) = moments(&pn);
        assert!((m2 - 50e6).abs() < 0.25e6 && s2 > 3.0e6 && s2 < 6.0e6, "paretonormal {} {}", m2, s2);
    }

    #[test]
    fn jitter_correlation() {
        let lag1 = |v: &[f64]| {
            let (m, s) = moments(v);
            v.windows(2).map(|w| (w[0] - m) * (w[1] - m)).sum::<f64>() / ((v.len() - 1) as f64 * s * s)
        };
        let v0 = sample(JitterDist::Uniform, 0, 5_000_000, 0.0, 100_000);
        let v50 = sample(JitterDist::Uniform, 0, 5_000_000, 50.0, 100_000);
        let v90 = sample(JitterDist::Uniform, 0, 5_000_000, 90.0, 100_000);
        assert!(lag1(&v0).abs() < 0.02);
        assert!((lag1(&v50) - 0.5).abs() < 0.05, "lag1 {}", lag1(&v50));
        assert!((lag1(&v90) - 0.9).abs() < 0.05, "lag1 {}", lag1(&v90));
        // the marginal distribution is preserved (copula), unlike netem
        let (m, s) = moments(&v90);
        assert!(m.abs() < 0.3e6, "mean {}", m);
        assert!((s - moments(&v0).1).abs() < 0.3e6, "sd {}", s);
        let n50 = sample(JitterDist::Normal, 0, 5_000_000, 50.0, 100_000);
        assert!((lag1(&n50) - 0.5).abs() < 0.07, "normal lag1 {}", lag1(&n50));
        assert!((moments(&n50).1 - 5e6).abs() < 0.3e6);
    }

    #[test]
    fn netem_crandom_modulo_loses_correlation() {
        // Documented reason for the copula: netem's exact path with rho > 0.
        let mut rng = Rng::new(7);
        let mut cr = CRandom::new(pct_to_u32(90.0), &mut rng);
        let v: Vec<f64> = (0..50_000).map(|_| tabledist(0, 5_000_000, &mut cr, &mut rng, None) as f64).collect();
        let (m, s) = moments(&v);
        let l = v.windows(2).map(|w| (w[0] - m) * (w[1] - m)).sum::<f64>() / ((v.len() - 1) as f64 * s * s);
        assert!(l.abs() < 0.05, "lag1 {}", l);
    }

    #[test]
    fn loss_gen_rate_and_correlation() {
        for (pct, corr) in [(2.0, 0.0), (2.0, 25.0), (10.0, 50.0)] {
            let mut rng = Rng::new(3);
            let mut g = LossGen::new(pct_to_u32(pct), pct_to_u32(corr));
            let n = 400_000;
            let v: Vec<bool> = (0..n).map(|_| g.lost(&mut rng)).collect();
            let rate = v.iter().filter(|&&x| x).count() as f64 / n as f64;
            assert!((rate - pct / 100.0).abs() < 0.1 * pct / 100.0 + 0.001, "rate {} for {}%", rate, pct);
            let both = v.windows(2).filter(|w| w[0] && w[1]).count() as f64;
            let prev = v[..n - 1].iter().filter(|&&x| x).count() as f64;
            let cond = both / prev; // P(loss | previous loss)
            let p = pct / 100.0;
            let want = p + corr / 100.0 * (1.0 - p);
            assert!((cond - want).abs() < 0.03, "P(loss|loss) {} want {}", cond, want);
        }
    }

    #[test]
    fn zero_sigma_is_exact() {
        let v = sample(JitterDist::Normal, 10_000_000, 0, 0.0, 10);
        assert!(v.iter().all(|&x| x == 10e6));
    }
}
