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

/// Linear 1-us histogram up to 4 ms for accurate scheduling-error percentiles.
pub const FINE_BUCKETS: usize = 4096;
pub struct FineHist {
    pub b: Box<[Counter]>,
}
impl Default for FineHist {
    fn default() -> Self {
        FineHist { b: (0..FINE_BUCKETS).map(|_| Counter::default()).collect() }
    }
}
impl FineHist {
    #[inline]
    pub fn record_ns(&self, ns: u64) {
        let us = ((ns / 1000) as usize).min(FINE_BUCKETS - 1);
        self.b[us].inc();
    }
    pub fn snapshot(&self) -> Vec<u64> {
        self.b.iter().map(|c| c.get()).collect()
    }
}

pub fn fine_quantile(v: &[u64], q: f64) -> Option<f64> {
    let n: u64 = v.iter().sum();
    if n == 0 {
        return None;
    }
    let target = (q * n as f64).ceil().max(1.0) as u64;
    let mut acc = 0;
    for (k, c) in v.iter().enumerate() {
        acc += c;
        if acc >= target {
            return Some(k as f64 + 0.5);
        }
    }
    None
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
    pub queue_delay: Log2Hist,
    pub sched_error: Log2Hist,
    pub sched_error_fine: FineHist,
}

pub const DIR_COUNTERS: &[&str] = &[
    "received", "lost", "duplicated", "corrupted", "queue_dropped", "forwarded", "bytes_in", "bytes_out",
    "ttl_dropped", "pool_dropped", "tx_errors", "late_dropped",
];

impl DirStats {
    pub fn counters(&self) -> Vec<u64> {
        vec![
            self.received.get(), self.lost.get(), self.duplicated.get(), self.corrupted.get(),
            self.queue_dropped.get(), self.forwarded.get(), self.bytes_in.get(), self.bytes_out.get(),
            self.ttl_dropped.get(), self.pool_dropped.get(), self.tx_errors.get(), self.late_dropped.get(),
        ]
    }
    pub fn snapshot(&self) -> DirSnap {
        DirSnap {
            counters: self.counters(),
            queue_delay: self.queue_delay.snapshot(),
            sched_error: self.sched_error.snapshot(),
            sched_fine: self.sched_error_fine.snapshot(),
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct DirSnap {
    pub counters: Vec<u64>,
    pub queue_delay: HistSnap,
    pub sched_error: HistSnap,
    pub sched_fine: Vec<u64>,
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
            sched_fine: sub(&self.sched_fine, &b.sched_fine),
        }
    }
    pub fn to_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        for (i, k) in DIR_COUNTERS.iter().enumerate() {
            m.insert(k.to_string(), json!(self.counters[i]));
        }
        m.insert("queue_delay_us".into(), self.queue_delay.to_json());
        let mut se = self.sched_error.to_json();
        se["p50_us"] = json!(fine_quantile(&self.sched_fine, 0.5));
        se["p90_us"] = json!(fine_quantile(&self.sched_fine, 0.9));
        se["p99_us"] = json!(fine_quantile(&self.sched_fine, 0.99));
        m.insert("sched_error_us".into(), se);
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
}

impl PortStats {
    pub fn snapshot(&self) -> Vec<u64> {
        vec![self.rx_frames.get(), self.rx_ignored.get(), self.rx_truncated.get(), self.ring_drops.get()]
    }
}
pub const PORT_COUNTERS: &[&str] = &["rx_frames", "rx_ignored", "rx_truncated", "ring_drops"];

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
}
