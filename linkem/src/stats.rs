//! Counters. Each counter has a single writer (the forwarding thread) and is
//! read concurrently by the control thread, so updates are plain relaxed
//! load+store (no locked RMW on the hot path).

use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

#[derive(Default)]
pub struct Counter(AtomicU64);

impl Counter {
    #[inline]
    pub fn add(&self, n: u64) {
        self.0.store(self.0.load(Relaxed).wrapping_add(n), Relaxed);
    }
    #[inline]
    pub fn inc(&self) {
        self.add(1)
    }
    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
    #[inline]
    pub fn max(&self, v: u64) {
        if v > self.0.load(Relaxed) {
            self.0.store(v, Relaxed);
        }
    }
}

pub const LOG2_BUCKETS: usize = 32;

/// log2 histogram of microseconds: bucket 0 counts v < 1 us, bucket k (k >= 1)
/// counts 2^(k-1) <= v < 2^k us; the last bucket also takes everything larger.
pub struct Log2Hist {
    pub buckets: [Counter; LOG2_BUCKETS],
    pub count: Counter,
    pub sum_ns: Counter,
    pub max_ns: Counter,
}

impl Default for Log2Hist {
    fn default() -> Self {
        Log2Hist {
            buckets: std::array::from_fn(|_| Counter::default()),
            count: Counter::default(),
            sum_ns: Counter::default(),
            max_ns: Counter::default(),
        }
    }
}

#[inline]
pub fn log2_bucket(us: u64) -> usize {
    if us == 0 { 0 } else { ((64 - us.leading_zeros()) as usize).min(LOG2_BUCKETS - 1) }
}

impl Log2Hist {
    #[inline]
    pub fn record_ns(&self, ns: u64) {
        self.buckets[log2_bucket(ns / 1000)].inc();
        self.count.inc();
        self.sum_ns.add(ns);
        self.max_ns.max(ns);
    }
    pub fn snapshot(&self) -> HistSnap {
        HistSnap {
            buckets: self.buckets.iter().map(|c| c.get()).collect(),
            count: self.count.get(),
            sum_ns: self.sum_ns.get(),
            max_ns: self.max_ns.get(),
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct HistSnap {
    pub buckets: Vec<u64>,
    pub count: u64,
    pub sum_ns: u64,
    pub max_ns: u64,
}

impl HistSnap {
    pub fn minus(&self, base: &HistSnap) -> HistSnap {
        HistSnap {
            buckets: self.buckets.iter().zip(base.buckets.iter().chain(std::iter::repeat(&0))).map(|(a, b)| a.wrapping_sub(*b)).collect(),
            count: self.count.wrapping_sub(base.count),
            sum_ns: self.sum_ns.wrapping_sub(base.sum_ns),
            // max is not resettable by subtraction; reported since the last reset
            // only if the base recorded nothing else, so keep the raw max.
            max_ns: self.max_ns,
        }
    }
    /// Upper bound (us) of the bucket holding quantile q.
    pub fn quantile_le(&self, q: f64) -> Option<u64> {
        if self.count == 0 {
            return None;
        }
        let target = (q * self.count as f64).ceil().max(1.0) as u64;
        let mut acc = 0;
        for (k, c) in self.buckets.iter().enumerate() {
            acc += c;
            if acc >= target {
                return Some(1u64 << k);
            }
        }
        Some(1u64 << (LOG2_BUCKETS - 1))
    }
    pub fn to_json(&self) -> Value {
        let le: Vec<u64> = (0..LOG2_BUCKETS).map(|k| 1u64 << k).collect();
        json!({
            "le_us": le,
            "counts": self.buckets,
            "count": self.count,
            "mean_us": if self.count > 0 { self.sum_ns as f64 / self.count as f64 / 1000.0 } else { 0.0 },
            "max_us": self.max_ns as f64 / 1000.0,
            "p50_le_us": self.quantile_le(0.5),
            "p99_le_us": self.quantile_le(0.99),
        })
    }
}

/// Log-linear histogram of nanoseconds (the layout of HdrHistogram with 3 bits of
/// sub-bucket precision): 16 linear buckets of 128 ns below 2048 ns, then 8
/// buckets per power of two, so a bucket is at most 1/8 as wide as its lower
/// bound and a quantile read as its bucket's upper bound is at most 12.5 % high.
/// Values of 2^37 ns (137 s) and more share the last bucket.
pub const LATE_BUCKETS: usize = LATE_LINEAR + (LATE_TOP_POW - 4) * LATE_SUB;
const LATE_UNIT_SHIFT: u32 = 7; // 128 ns
const LATE_LINEAR: usize = 16;
const LATE_SUB: usize = 8;
const LATE_TOP_POW: usize = 30; // in 128-ns units: 2^30 units = 2^37 ns

#[inline]
pub fn late_bucket(ns: u64) -> usize {
    let u = ns >> LATE_UNIT_SHIFT;
    if u < LATE_LINEAR as u64 {
        return u as usize;
    }
    let k = (63 - u.leading_zeros()) as usize; // floor(log2 u) >= 4
    if k >= LATE_TOP_POW {
        return LATE_BUCKETS - 1;
    }
    let sub = ((u >> (k - 3)) & 7) as usize;
    LATE_LINEAR + (k - 4) * LATE_SUB + sub
}

/// Exclusive upper bound of bucket `i`, ns.
pub fn late_bucket_upper_ns(i: usize) -> u64 {
    if i < LATE_LINEAR {
        return (i as u64 + 1) << LATE_UNIT_SHIFT;
    }
    let k = 4 + (i - LATE_LINEAR) / LATE_SUB;
    let sub = ((i - LATE_LINEAR) % LATE_SUB) as u64;
    ((LATE_SUB as u64 + sub + 1) << (k - 3)) << LATE_UNIT_SHIFT
}

/// How late packets left against their schedule. Cumulative since start: `reset`
/// does not touch it (the stats reply subtracts its base snapshot; the `lateness`
/// command hands out the raw counts, so that any number of readers can take the
/// difference of two readings).
pub struct LateHist {
    pub b: Box<[Counter]>,
    pub count: Counter,
    pub sum_ns: Counter,
    pub max_ns: Counter,
}

impl Default for LateHist {
    fn default() -> Self {
        LateHist {
            b: (0..LATE_BUCKETS).map(|_| Counter::default()).collect(),
            count: Counter::default(),
            sum_ns: Counter::default(),
            max_ns: Counter::default(),
        }
    }
}

impl LateHist {
    #[inline]
    pub fn record_ns(&self, ns: u64) {
        self.b[late_bucket(ns)].inc();
        self.count.inc();
        self.sum_ns.add(ns);
        self.max_ns.max(ns);
    }
    pub fn snapshot(&self) -> LateSnap {
        LateSnap {
            buckets: self.b.iter().map(|c| c.get()).collect(),
            count: self.count.get(),
            sum_ns: self.sum_ns.get(),
            max_ns: self.max_ns.get(),
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct LateSnap {
    pub buckets: Vec<u64>,
    pub count: u64,
    pub sum_ns: u64,
    /// Largest value since start (a maximum cannot be subtracted).
    pub max_ns: u64,
}

impl LateSnap {
    pub fn minus(&self, base: &LateSnap) -> LateSnap {
        LateSnap {
            buckets: self.buckets.iter().enumerate().map(|(i, x)| x.wrapping_sub(*base.buckets.get(i).unwrap_or(&0))).collect(),
            count: self.count.wrapping_sub(base.count),
            sum_ns: self.sum_ns.wrapping_sub(base.sum_ns),
            max_ns: self.max_ns,
        }
    }
    /// Upper bound (ns) of the bucket holding quantile q; None when empty.
    pub fn quantile_ns(&self, q: f64) -> Option<u64> {
        if self.count == 0 {
            return None;
        }
        let target = (q * self.count as f64).ceil().max(1.0) as u64;
        let mut acc = 0;
        for (i, c) in self.buckets.iter().enumerate() {
            acc += c;
            if acc >= target {
                return Some(late_bucket_upper_ns(i));
            }
        }
        Some(late_bucket_upper_ns(LATE_BUCKETS - 1))
    }
    /// Summary for the stats reply (µs).
    pub fn to_json(&self) -> Value {
        let us = |v: Option<u64>| v.map(|ns| ns as f64 / 1000.0);
        json!({
            "count": self.count,
            "mean_us": if self.count > 0 { self.sum_ns as f64 / self.count as f64 / 1000.0 } else { 0.0 },
            "max_us": self.max_ns as f64 / 1000.0,
            "p50_us": us(self.quantile_ns(0.5)),
            "p90_us": us(self.quantile_ns(0.9)),
            "p99_us": us(self.quantile_ns(0.99)),
        })
    }
    /// The non-empty buckets as {"le_ns": [upper bounds], "counts": [...]}.
    pub fn buckets_json(&self) -> Value {
        let (le, n): (Vec<u64>, Vec<u64>) =
            self.buckets.iter().enumerate().filter(|(_, c)| **c > 0).map(|(i, c)| (late_bucket_upper_ns(i), *c)).unzip();
        json!({"le_ns": le, "counts": n})
    }
}

#[derive(Default)]
pub struct DirStats {
    pub received: Counter,
    pub lost: Counter,
    pub duplicated: Counter,
    pub corrupted: Counter,
    pub queue_dropped: Counter,
    pub forwarded: Counter,
    pub bytes_in: Counter,
    pub bytes_out: Counter,
    pub ttl_dropped: Counter,
    pub pool_dropped: Counter,
    pub tx_errors: Counter,
    pub late_dropped: Counter,
    /// Packets CoDel dropped at dequeue (`queue_dropped` counts the queue limit's).
    pub codel_dropped: Counter,
    pub queue_delay: Log2Hist,
    /// Transmit time minus scheduled time of every frame sent.
    pub sched_error: LateHist,
    /// Sojourn time in the bottleneck queue of every packet that left it: from
    /// its arrival to the start of its serialisation (links with a rate or trace).
    pub sojourn: LateHist,
}

pub const DIR_COUNTERS: &[&str] = &[
    "received", "lost", "duplicated", "corrupted", "queue_dropped", "forwarded", "bytes_in", "bytes_out",
    "ttl_dropped", "pool_dropped", "tx_errors", "late_dropped", "codel_dropped",
];

impl DirStats {
    pub fn counters(&self) -> Vec<u64> {
        vec![
            self.received.get(), self.lost.get(), self.duplicated.get(), self.corrupted.get(),
            self.queue_dropped.get(), self.forwarded.get(), self.bytes_in.get(), self.bytes_out.get(),
            self.ttl_dropped.get(), self.pool_dropped.get(), self.tx_errors.get(), self.late_dropped.get(),
            self.codel_dropped.get(),
        ]
    }
    pub fn snapshot(&self) -> DirSnap {
        DirSnap {
            counters: self.counters(),
            queue_delay: self.queue_delay.snapshot(),
            sched_error: self.sched_error.snapshot(),
            sojourn: self.sojourn.snapshot(),
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct DirSnap {
    pub counters: Vec<u64>,
    pub queue_delay: HistSnap,
    pub sched_error: LateSnap,
    pub sojourn: LateSnap,
}

impl DirSnap {
    pub fn minus(&self, b: &DirSnap) -> DirSnap {
        let sub = |a: &Vec<u64>, b: &Vec<u64>| -> Vec<u64> {
            a.iter().enumerate().map(|(i, x)| x.wrapping_sub(*b.get(i).unwrap_or(&0))).collect()
        };
        DirSnap {
            counters: sub(&self.counters, &b.counters),
            queue_delay: self.queue_delay.minus(&b.queue_delay),
            sched_error: self.sched_error.minus(&b.sched_error),
            sojourn: self.sojourn.minus(&b.sojourn),
        }
    }
    pub fn to_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        for (i, k) in DIR_COUNTERS.iter().enumerate() {
            m.insert(k.to_string(), json!(self.counters[i]));
        }
        m.insert("queue_delay_us".into(), self.queue_delay.to_json());
        m.insert("sched_error_us".into(), self.sched_error.to_json());
        m.insert("sojourn_us".into(), self.sojourn.to_json());
        Value::Object(m)
    }
}

/// Per-port receive counters (frames the kernel put in our ring).
#[derive(Default)]
pub struct PortStats {
    pub rx_frames: Counter,
    pub rx_ignored: Counter,
    pub rx_truncated: Counter,
    pub ring_drops: Counter,
    /// Frames forwarded from the ring frame they arrived in (no copy).
    pub rx_kept: Counter,
    /// Kept frames copied out of the ring after all (they stayed half a ring long).
    pub rx_evicted: Counter,
}

impl PortStats {
    pub fn snapshot(&self) -> Vec<u64> {
        vec![self.rx_frames.get(), self.rx_ignored.get(), self.rx_truncated.get(), self.ring_drops.get(), self.rx_kept.get(),
             self.rx_evicted.get()]
    }
}
pub const PORT_COUNTERS: &[&str] = &["rx_frames", "rx_ignored", "rx_truncated", "ring_drops", "rx_kept", "rx_evicted"];

/// Timing-strategy counters (one set per forwarding thread, summed in output).
#[derive(Default)]
pub struct TimingStats {
    pub loops: Counter,
    pub sleeps: Counter,
    pub sleep_ns: Counter,
    pub timer_wakeups: Counter,
    pub rx_wakeups: Counter,
    pub spin_ns: Counter,
    pub tx_calls: Counter,
    pub tx_packets: Counter,
    pub tx_eagain: Counter,
    pub rx_batches: Counter,
    pub rx_packets: Counter,
}
pub const TIMING_COUNTERS: &[&str] = &[
    "loops", "sleeps", "sleep_ns", "timer_wakeups", "rx_wakeups", "spin_ns", "tx_calls", "tx_packets", "tx_eagain",
    "rx_batches", "rx_packets",
];
impl TimingStats {
    pub fn snapshot(&self) -> Vec<u64> {
        vec![
            self.loops.get(), self.sleeps.get(), self.sleep_ns.get(), self.timer_wakeups.get(), self.rx_wakeups.get(),
            self.spin_ns.get(), self.tx_calls.get(), self.tx_packets.get(), self.tx_eagain.get(), self.rx_batches.get(),
            self.rx_packets.get(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log2_buckets() {
        assert_eq!(log2_bucket(0), 0);
        assert_eq!(log2_bucket(1), 1);
        assert_eq!(log2_bucket(2), 2);
        assert_eq!(log2_bucket(3), 2);
        assert_eq!(log2_bucket(4), 3);
        assert_eq!(log2_bucket(1023), 10);
        assert_eq!(log2_bucket(1024), 11);
        assert_eq!(log2_bucket(u64::MAX), LOG2_BUCKETS - 1);
        let h = Log2Hist::default();
        for us in [0u64, 5, 5, 5, 100] {
            h.record_ns(us * 1000 + 300);
        }
        let s = h.snapshot();
        assert_eq!(s.count, 5);
        assert_eq!(s.quantile_le(0.5), Some(8));
        assert_eq!(s.quantile_le(1.0), Some(128));
        let j = s.to_json();
        assert_eq!(j["counts"][3], 3);
        assert_eq!(j["le_us"][3], 8);
        let d = s.minus(&s);
        assert_eq!(d.count, 0);
    }

    #[test]
    fn late_buckets_cover_every_value_in_order() {
        // every value falls in a bucket whose bounds hold it, buckets are contiguous
        // and no wider than 1/8 of their lower bound (128 ns below 2048 ns)
        let mut lower = 0u64;
        for i in 0..LATE_BUCKETS - 1 {
            let upper = late_bucket_upper_ns(i);
            assert!(upper > lower, "bucket {} empty", i);
            assert_eq!(late_bucket(lower), i, "lower bound {} of bucket {}", lower, i);
            assert_eq!(late_bucket(upper - 1), i, "upper bound {} of bucket {}", upper, i);
            assert_eq!(late_bucket(upper), i + 1);
            if lower >= 2048 {
                assert!((upper - lower) * 8 <= lower, "bucket {} [{}, {}) too wide", i, lower, upper);
            } else {
                assert_eq!(upper - lower, 128);
            }
            lower = upper;
        }
        // the last bucket: [15/16 of 2^37 ns, 2^37 ns) and everything above
        assert_eq!(lower, 15u64 << 33);
        assert_eq!(late_bucket_upper_ns(LATE_BUCKETS - 1), 1u64 << 37);
        assert_eq!(late_bucket(1u64 << 37), LATE_BUCKETS - 1);
        assert_eq!(late_bucket(u64::MAX), LATE_BUCKETS - 1);
        assert_eq!(late_bucket(0), 0);
    }

    #[test]
    fn late_quantiles_are_upper_bounds_within_an_eighth() {
        // 1000 values: 980 at 20 us, 15 at 3 ms, 5 at 40 ms
        let h = LateHist::default();
        for _ in 0..980 {
            h.record_ns(20_000);
        }
        for _ in 0..15 {
            h.record_ns(3_000_000);
        }
        for _ in 0..5 {
            h.record_ns(40_000_000);
        }
        let s = h.snapshot();
        let p50 = s.quantile_ns(0.5).unwrap();
        let p99 = s.quantile_ns(0.99).unwrap();
        let p999 = s.quantile_ns(0.999).unwrap();
        assert!(p50 > 20_000 && p50 <= 20_000 + 20_000 / 8, "p50 {}", p50);
        assert!(p99 > 3_000_000 && p99 <= 3_000_000 + 3_000_000 / 8, "p99 {}", p99);
        assert!(p999 > 40_000_000 && p999 <= 45_000_000, "p99.9 {}", p999);
        assert_eq!(s.max_ns, 40_000_000);
        let j = s.to_json();
        assert_eq!(j["count"], 1000);
        assert_eq!(j["p99_us"], json!(p99 as f64 / 1000.0));
        // the sparse bucket list: three buckets, counts in order
        let b = s.buckets_json();
        assert_eq!(b["counts"], json!([980, 15, 5]));
        assert_eq!(b["le_ns"][0], json!(p50));
        assert!(LateSnap::default().quantile_ns(0.5).is_none());
    }

    #[test]
    fn late_difference_of_two_readings_is_the_window() {
        // what a reader does with two `lateness` replies: the window holds only what
        // was recorded between them
        let h = LateHist::default();
        for _ in 0..100 {
            h.record_ns(10_000);
        }
        let before = h.snapshot();
        for _ in 0..10 {
            h.record_ns(5_000_000);
        }
        let w = h.snapshot().minus(&before);
        assert_eq!(w.count, 10);
        assert_eq!(w.sum_ns, 50_000_000);
        let p50 = w.quantile_ns(0.5).unwrap();
        assert!(p50 > 5_000_000 && p50 <= 5_000_000 + 5_000_000 / 8, "p50 {}", p50);
        assert_eq!(w.buckets.iter().sum::<u64>(), 10);
    }
}
