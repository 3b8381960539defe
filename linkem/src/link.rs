//! The bottleneck: a drop-tail FIFO in front of a link whose capacity can vary
//! with time (constant rate, `spikes`, `onoff`, or a mahimahi trace).
//!
//! The model is *virtual*: the FIFO is work-conserving and the capacity schedule
//! is a known function of time, so a packet's departure time is fully determined
//! when it arrives; no timer is needed per serialisation event.
//! `offer(t, ip_bytes)` returns when the packet starts and finishes serialising.

use crate::config::{DirConfig, OnOff, QueueLimit, Spikes, Trace, MS, TRACE_OPP_BYTES};
use std::collections::VecDeque;
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    /// Dropped by the drop-tail queue.
    Drop,
    /// Accepted: service begins at `start` and serialisation ends at `finish` (ns).
    Pass { start: u64, finish: u64 },
}

#[derive(Debug)]
enum Capacity {
    /// No rate limit (infinite capacity); on/off may still gate it.
    Unlimited,
    Rate { bps: f64 },
    Trace { trace: Arc<Trace>, cur: Option<Opp> },
}

/// A delivery opportunity of the trace (loop number, index) and the bytes left in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Opp {
    l: u64,
    i: usize,
    left: u32,
}

#[derive(Debug)]
pub struct Bottleneck {
    cap: Capacity,
    spikes: Option<Spikes>,
    onoff: Option<OnOff>,
    limit: QueueLimit,
    /// Bytes counted per packet on top of its IP length (rate and byte queues).
    overhead: u32,
    /// Origin of the periodic schedules (spikes, on/off, trace).
    epoch: u64,
    /// When the last accepted packet finishes serialising.
    free_at: u64,
    /// Packets that have not started service yet: (service start, bytes).
    waiting: VecDeque<(u64, u32)>,
    waiting_bytes: u64,
}

impl Bottleneck {
    pub fn new(cfg: &DirConfig, epoch: u64) -> Bottleneck {
        let mut b = Bottleneck {
            cap: Capacity::Unlimited,
            spikes: None,
            onoff: None,
            limit: QueueLimit::Unlimited,
            overhead: 0,
            epoch,
            free_at: 0,
            waiting: VecDeque::new(),
            waiting_bytes: 0,
        };
        b.reconfigure(cfg, epoch);
        b
    }

    /// Apply a new configuration at time `now`. Packets already accepted keep
    /// their computed times; the periodic schedules restart their phase at `now`.
    pub fn reconfigure(&mut self, cfg: &DirConfig, now: u64) {
        self.cap = match (&cfg.trace, cfg.rate_bps) {
            (Some(t), _) => Capacity::Trace { trace: t.clone(), cur: None },
            (None, Some(bps)) => Capacity::Rate { bps },
            (None, None) => Capacity::Unlimited,
        };
        self.spikes = cfg.spikes.clone();
        self.onoff = cfg.onoff.clone();
        self.limit = cfg.queue.clone();
        self.overhead = cfg.rate_overhead;
        self.epoch = now;
    }

    pub fn is_transparent(&self) -> bool {
        matches!(self.cap, Capacity::Unlimited) && self.onoff.is_none()
    }

    /// (packets, bytes) waiting at time of the last offer.
    #[allow(dead_code)]
    pub fn backlog(&self) -> (usize, u64) {
        (self.waiting.len(), self.waiting_bytes)
    }

    /// Offer a packet of `ip_bytes` (IP header + payload) arriving at `t` (ns).
    /// The rate counts IP bytes plus the configured per-packet overhead (default
    /// 0, as mahimahi and the Mbit/s of most papers); trace opportunities carry
    /// one 1500-byte IP packet each, as in mahimahi.
    pub fn offer(&mut self, t: u64, ip_bytes: u32) -> Admit {
        if self.is_transparent() {
            return Admit::Pass { start: t, finish: t };
        }
        while let Some(&(s, b)) = self.waiting.front() {
            if s > t {
                break;
            }
            self.waiting.pop_front();
            self.waiting_bytes -= b as u64;
        }
        let avail = t.max(self.free_at);
        let bytes = if matches!(self.cap, Capacity::Trace { .. }) { ip_bytes } else { ip_bytes + self.overhead };
        let (svc, finish, cur) = self.serve(avail, bytes);
        if svc > t {
            let drop = match self.limit {
                QueueLimit::Unlimited => false,
                QueueLimit::Packets(n) => self.waiting.len() as u64 >= n,
                QueueLimit::Bytes(n) => self.waiting_bytes + bytes as u64 > n,
                QueueLimit::Time(ns) => svc - t > ns,
            };
            if drop {
                return Admit::Drop;
            }
            self.waiting.push_back((svc, bytes));
            self.waiting_bytes += bytes as u64;
        }
        if let Capacity::Trace { cur: c, .. } = &mut self.cap {
            *c = cur;
        }
        self.free_at = finish;
        Admit::Pass { start: svc, finish }
    }

    /// Rate multiplier at `t` (0 = off) and the time it next changes.
    fn segment(&self, t: u64) -> (f64, u64) {
        let mut mult = 1.0;
        let mut next = u64::MAX;
        let rel = t.saturating_sub(self.epoch);
        if let Some(o) = &self.onoff {
            if o.off_ns > 0 {
                let cyc = o.on_ns + o.off_ns;
                let ph = rel % cyc;
                if ph < o.on_ns {
                    next = next.min(t + (o.on_ns - ph));
                } else {
                    mult = 0.0;
                    next = next.min(t + (cyc - ph));
                }
            }
        }
        if let Some(s) = &self.spikes {
            if s.duration_ns > 0 {
                // The low-rate window is the last `duration` of each period.
                let ph = rel % s.period_ns;
                let normal_len = s.period_ns - s.duration_ns;
                if ph < normal_len {
                    next = next.min(t + (normal_len - ph));
                } else {
                    mult *= s.rate_frac;
                    next = next.min(t + (s.period_ns - ph));
                }
            }
        }
        (mult, next)
    }

    /// End of the off window containing `t`, if `t` is in one.
    fn off_until(&self, t: u64) -> Option<u64> {
        let o = self.onoff.as_ref()?;
        if o.off_ns == 0 {
            return None;
        }
        let cyc = o.on_ns + o.off_ns;
        let ph = t.saturating_sub(self.epoch) % cyc;
        if ph >= o.on_ns { Some(t + (cyc - ph)) } else { None }
    }

    /// Serve `bytes` for a packet that is head-of-line from `avail` on.
    /// Returns (service start, serialisation end, new trace cursor).
    fn serve(&self, avail: u64, bytes: u32) -> (u64, u64, Option<Opp>) {
        match &self.cap {
            Capacity::Unlimited => {
                let s = self.off_until(avail).unwrap_or(avail);
                (s, s, None)
            }
            Capacity::Rate { bps } => {
                let (s, f) = self.serve_rate(avail, bytes, *bps);
                (s, f, None)
            }
            Capacity::Trace { trace, cur } => self.serve_trace(trace, *cur, avail, bytes),
        }
    }

    fn serve_rate(&self, avail: u64, bytes: u32, bps: f64) -> (u64, u64) {
        let mut bits = bytes as f64 * 8.0;
        if self.spikes.is_none() && self.onoff.is_none() {
            return (avail, avail + (bits * 1e9 / bps).ceil() as u64);
        }
        let mut t = avail;
        let mut start = None;
        loop {
            let (mult, next) = self.segment(t);
            let r = bps * mult;
            if r <= 0.0 {
                if next == u64::MAX {
                    return (u64::MAX / 4, u64::MAX / 4);
                }
                t = next;
                continue;
            }
            let s = *start.get_or_insert(t);
            let need = (bits * 1e9 / r).ceil() as u64;
            if next == u64::MAX || t + need <= next {
                return (s, t + need);
            }
            bits -= (next - t) as f64 * r / 1e9;
            t = next;
        }
    }

    fn opp_time(&self, tr: &Trace, l: u64, i: usize) -> u64 {
        self.epoch + (l * tr.period_ms + tr.opps_ms[i]) * MS
    }

    /// First opportunity at or after `t` that is not inside an off window.
    fn seek_opp(&self, tr: &Trace, t: u64) -> (u64, usize) {
        let per = tr.period_ms * MS;
        let mut t = t.max(self.epoch);
        loop {
            let rel = t - self.epoch;
            let mut l = rel / per;
            let off = rel % per;
            let mut i = tr.opps_ms.partition_point(|&o| o * MS < off);
            if i == tr.opps_ms.len() {
                l += 1;
                i = 0;
            }
            let ot = self.opp_time(tr, l, i);
            match self.off_until(ot) {
                Some(end) => t = end,
                None => return (l, i),
            }
        }
    }

    fn next_opp(&self, tr: &Trace, l: u64, i: usize) -> (u64, usize) {
        let (l, i) = if i + 1 < tr.opps_ms.len() { (l, i + 1) } else { (l + 1, 0) };
        let ot = self.opp_time(tr, l, i);
        match self.off_until(ot) {
            None => (l, i),
            Some(end) => self.seek_opp(tr, end),
        }
    }

    fn serve_trace(&self, tr: &Trace, cur: Option<Opp>, avail: u64, bytes: u32) -> (u64, u64, Option<Opp>) {
        // The rest of the current opportunity is usable only by a packet that was
        // already queued at that instant (mahimahi wastes the remainder of an
        // opportunity when the queue runs empty).
        let (mut l, mut i, mut left) = match cur {
            Some(o) if self.opp_time(tr, o.l, o.i) >= avail => {
                if o.left > 0 {
                    (o.l, o.i, o.left)
                } else {
                    let (l, i) = self.next_opp(tr, o.l, o.i);
                    (l, i, TRACE_OPP_BYTES)
                }
            }
            _ => {
                let (l, i) = self.seek_opp(tr, avail);
                (l, i, TRACE_OPP_BYTES)
            }
        };
        let start = self.opp_time(tr, l, i);
        let mut remaining = bytes.max(1);
        loop {
            if remaining <= left {
                left -= remaining;
                return (start, self.opp_time(tr, l, i), Some(Opp { l, i, left }));
            }
            remaining -= left;
            let (nl, ni) = self.next_opp(tr, l, i);
            l = nl;
            i = ni;
            left = TRACE_OPP_BYTES;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{parse_dir, parse_trace, DirConfig};
    use serde_json::json;

    const S: u64 = 1_000_000_000;

    fn cfg(v: serde_json::Value) -> DirConfig {
        parse_dir(&v, "up").unwrap()
    }

    fn pass(a: Admit) -> (u64, u64) {
        match a {
            Admit::Pass { start, finish } => (start, finish),
            Admit::Drop => panic!("unexpected drop"),
        }
    }

    #[test]
    fn serialization_math() {
        // The rate counts IP bytes: 1500 B at 100 Mbit/s = 120 us.
        let mut b = Bottleneck::new(&cfg(json!({"rate_mbit": 100})), 0);
        assert_eq!(pass(b.offer(S, 1500)), (S, S + 120_000));
        // With Ethernet's 14 header bytes counted (as tbf does): 1514 B = 121.12 us;
        // back-to-back packets queue up.
        let mut b = Bottleneck::new(&cfg(json!({"rate_mbit": 100, "rate_overhead_bytes": 14, "queue": {"packets": 1000}})), 0);
        let (s0, f0) = pass(b.offer(S, 1500));
        assert_eq!((s0, f0), (S, S + 121_120));
        let (s1, f1) = pass(b.offer(S, 1500));
        assert_eq!((s1, f1), (S + 121_120, S + 242_240));
        // after the link drained, a new packet starts immediately
        let (s2, f2) = pass(b.offer(2 * S, 46));
        assert_eq!((s2, f2), (2 * S, 2 * S + 4_800));
        // 5 Mbit/s: 1514 B take 2.4224 ms
        let mut b = Bottleneck::new(&cfg(json!({"rate_mbit": 5, "rate_overhead_bytes": 14})), 0);
        assert_eq!(pass(b.offer(S, 1500)).1, S + 2_422_400);
    }

    #[test]
    fn long_run_rate_is_exact() {
        // Saturate a 40 Mbit/s link for 10 s of virtual time.
        let mut b = Bottleneck::new(&cfg(json!({"rate_mbit": 40, "rate_overhead_bytes": 14, "queue": {"packets": 100000}})), 0);
        let mut last = 0;
        for _ in 0..33_025 {
            last = pass(b.offer(0, 1500)).1;
        }
        let bits = 33_025.0 * 1514.0 * 8.0;
        let rate = bits / (last as f64 / 1e9);
        assert!((rate / 40e6 - 1.0).abs() < 1e-6, "rate {}", rate);
    }

    #[test]
    fn queue_drop_tail_packets() {
        let mut b = Bottleneck::new(&cfg(json!({"rate_mbit": 10, "queue": {"packets": 3}})), 0);
        // first is served at once, 3 wait, the 5th is dropped
        let r: Vec<Admit> = (0..5).map(|_| b.offer(S, 1500)).collect();
        assert!(r[..4].iter().all(|a| matches!(a, Admit::Pass { .. })));
        assert_eq!(r[4], Admit::Drop);
        assert_eq!(b.backlog().0, 3);
        // once the head leaves (1.2 ms later), there is room again
        assert!(matches!(b.offer(S + 1_300_000, 1500), Admit::Pass { .. }));
        assert_eq!(b.offer(S + 1_300_000, 1500), Admit::Drop);
    }

    #[test]
    fn queue_drop_tail_bytes() {
        let mut b = Bottleneck::new(&cfg(json!({"rate_mbit": 10, "rate_overhead_bytes": 14, "queue": {"bytes": 3000}})), 0);
        assert!(matches!(b.offer(S, 1500), Admit::Pass { .. })); // in service
        assert!(matches!(b.offer(S, 1500), Admit::Pass { .. })); // 1514 waiting
        assert_eq!(b.offer(S, 1500), Admit::Drop); // 3028 > 3000
        assert!(matches!(b.offer(S, 986), Admit::Pass { .. })); // 2514 <= 3000
        assert_eq!(b.offer(S, 586), Admit::Drop);
    }

    #[test]
    fn queue_drop_tail_ms() {
        // 10 Mbit/s, max 5 ms of waiting: 1500 B = 1.2 ms each
        let mut b = Bottleneck::new(&cfg(json!({"rate_mbit": 10, "queue": {"ms": 5}})), 0);
        let mut ok = 0;
        for _ in 0..10 {
            if matches!(b.offer(S, 1500), Admit::Pass { .. }) {
                ok += 1;
            }
        }
        // waits 0, 1.2, 2.4, 3.6, 4.8 ms are accepted; 6.0 ms is not
        assert_eq!(ok, 5);
    }

    #[test]
    fn default_queue_is_bdp_or_64_packets() {
        use crate::config::QueueLimit;
        // 100 Mbit/s, 50 ms each way: BDP over 100 ms = 1.25 MB
        assert_eq!(cfg(json!({"rate_mbit": 100, "delay_ms": 50})).queue, QueueLimit::Bytes(1_250_000));
        // 5 Mbit/s, 0 ms: 20 ms floor gives 12.5 kB < 64 * 1500
        assert_eq!(cfg(json!({"rate_mbit": 5})).queue, QueueLimit::Bytes(64 * 1500));
        assert_eq!(cfg(json!({"delay_ms": 5})).queue, QueueLimit::Unlimited);
        assert_eq!(cfg(json!({"onoff": {"on_ms": 10, "off_ms": 10}})).queue, QueueLimit::Packets(1000));
    }

    #[test]
    fn spikes_schedule() {
        // 12 Mbit/s, every 100 ms the last 20 ms run at 25 % (3 Mbit/s)
        let c = cfg(json!({"rate_mbit": 12, "spikes": {"period_ms": 100, "duration_ms": 20, "rate_pct": 25}, "queue": {"packets": 100000}}));
        let mut b = Bottleneck::new(&c, 0);
        // 1500 B = 1 ms at 12 Mbit/s, 4 ms at 3 Mbit/s
        assert_eq!(pass(b.offer(10_000_000, 1500)).1, 11_000_000);
        assert_eq!(pass(b.offer(85_000_000, 1500)).1, 89_000_000);
        // straddling the start of the spike: 0.5 ms at full rate, then 0.5 of the
        // packet at a quarter rate = 2 ms -> finishes at 82 ms
        let mut b = Bottleneck::new(&c, 0);
        assert_eq!(pass(b.offer(79_500_000, 1500)).1, 82_000_000);
        // straddling the end of the spike: 1 ms at 3 Mbit/s (375 B), rest at 12
        let mut b = Bottleneck::new(&c, 0);
        assert_eq!(pass(b.offer(99_000_000, 1500)).1, 100_750_000);
        // saturated long run: average rate = 0.8*12 + 0.2*3 = 10.2 Mbit/s
        let mut b = Bottleneck::new(&c, 0);
        let mut last = 0;
        let n = 8500; // ~1 s
        for _ in 0..n {
            last = pass(b.offer(0, 1500)).1;
        }
        let rate = n as f64 * 12000.0 / (last as f64 / 1e9);
        assert!((rate / 10.2e6 - 1.0).abs() < 0.01, "rate {}", rate);
    }

    #[test]
    fn onoff_blocks_delivery() {
        // on 30 ms / off 20 ms, 12 Mbit/s
        let c = cfg(json!({"rate_mbit": 12, "onoff": {"on_ms": 30, "off_ms": 20}, "queue": {"packets": 100000}}));
        let mut b = Bottleneck::new(&c, 0);
        // arriving during off (35 ms): waits for 50 ms, done at 51 ms
        assert_eq!(pass(b.offer(35_000_000, 1500)), (50_000_000, 51_000_000));
        // straddles the off period: starts at 29.5, 0.5 ms before off, resumes at 50
        let mut b = Bottleneck::new(&c, 0);
        assert_eq!(pass(b.offer(29_500_000, 1500)).1, 50_500_000);
        // nothing finishes inside an off window over a long saturated run
        let mut b = Bottleneck::new(&c, 0);
        for _ in 0..3000 {
            let f = pass(b.offer(0, 1500)).1;
            let ph = f % 50_000_000;
            assert!(ph <= 30_000_000, "finish in off window: {}", f);
        }
        // without a rate: infinite capacity when on, held during off
        let c = cfg(json!({"onoff": {"on_ms": 30, "off_ms": 20}}));
        let mut b = Bottleneck::new(&c, 0);
        assert_eq!(pass(b.offer(10_000_000, 1500)), (10_000_000, 10_000_000));
        assert_eq!(pass(b.offer(40_000_000, 1500)), (50_000_000, 50_000_000));
    }

    fn trace_cfg(text: &str) -> DirConfig {
        let mut c = DirConfig::default();
        c.trace = Some(Arc::new(parse_trace(text, "t").unwrap()));
        c.queue = crate::config::default_queue(&c);
        c
    }

    #[test]
    fn mahimahi_trace_delivery() {
        // opportunities at 1, 1, 3, 10 ms; the trace loops every 10 ms
        let c = trace_cfg("1\n1\n3\n10\n");
        let mut b = Bottleneck::new(&c, 0);
        // two full packets at t=0 use the two opportunities at 1 ms
        assert_eq!(pass(b.offer(0, 1500)).1, 1_000_000);
        assert_eq!(pass(b.offer(0, 1500)).1, 1_000_000);
        assert_eq!(pass(b.offer(0, 1500)).1, 3_000_000);
        assert_eq!(pass(b.offer(0, 1500)).1, 10_000_000);
        // loop: next opportunities at 11, 11, 13, 20 ms
        assert_eq!(pass(b.offer(0, 1500)).1, 11_000_000);
        // small packets share one opportunity while queued
        let mut b = Bottleneck::new(&c, 0);
        assert_eq!(pass(b.offer(0, 500)).1, 1_000_000);
        assert_eq!(pass(b.offer(0, 500)).1, 1_000_000);
        assert_eq!(pass(b.offer(0, 500)).1, 1_000_000);
        assert_eq!(pass(b.offer(0, 500)).1, 1_000_000); // second 1 ms opp
        // a packet arriving after the queue drained cannot use leftovers
        assert_eq!(pass(b.offer(2_000_000, 500)).1, 3_000_000);
        assert_eq!(pass(b.offer(4_000_000, 1500)).1, 10_000_000);
        // a 1500 B packet split over two opportunities departs at the second
        let mut b = Bottleneck::new(&c, 0);
        assert_eq!(pass(b.offer(0, 1000)).1, 1_000_000);
        assert_eq!(pass(b.offer(0, 1500)).1, 1_000_000 /* 500 B left in opp 1 + 1000 B of opp 2 */);
        assert_eq!(pass(b.offer(0, 1500)).1, 3_000_000);
    }

    #[test]
    fn trace_mean_rate_and_default_queue() {
        // 12 opportunities in 12 ms = 12 Mbit/s
        let text: String = (1..=12).map(|i| format!("{}\n", i)).collect();
        let mut c = trace_cfg(&text);
        let t = c.trace.as_ref().unwrap();
        assert!((t.mean_rate_bps() - 12e6).abs() < 1.0);
        // default queue: max(BDP at 12 Mbit/s over 20 ms, 64 frames)
        assert_eq!(c.queue, crate::config::QueueLimit::Bytes(64 * 1500));
        c.queue = crate::config::QueueLimit::Packets(1000);
        let mut b = Bottleneck::new(&c, 0);
        let mut last = 0;
        for _ in 0..120 {
            last = pass(b.offer(0, 1500)).1;
        }
        assert_eq!(last, 120_000_000);
    }

    #[test]
    fn transparent_link_passes_through() {
        let mut b = Bottleneck::new(&DirConfig::default(), 0);
        assert_eq!(b.offer(123, 1500), Admit::Pass { start: 123, finish: 123 });
    }
}
