//! The bottleneck: a queue in front of a link whose capacity can vary with time
//! (constant rate, `spikes`, `onoff`, or a mahimahi trace).
//!
//! Drop-tail FIFO: the model is *virtual*. The FIFO is work-conserving and the
//! capacity schedule is a known function of time, so a packet's departure time
//! is fully determined when it arrives; no timer is needed per serialisation
//! event. `offer(t, ip_bytes)` returns when the packet starts and finishes
//! serialising.
//!
//! CoDel (RFC 8289) decides at dequeue, from the packet's sojourn time and the
//! bytes queued behind it *then*: what arrives later changes its decision, and a
//! drop lets the packets behind it start earlier. So with CoDel the queue holds
//! its packets (`hold`) and dequeues them when their time comes
//! (`dequeue_due(now)`, at `next_dequeue()`): a packet's dequeue time is when the
//! link can start serialising it (the previous packet finished, or the next
//! delivery opportunity), as a qdisc is dequeued when the device can send.

use crate::codel::{Backlog, Codel};
use crate::config::{DirConfig, Discipline, OnOff, QueueLimit, Spikes, Trace, MS, TRACE_OPP_BYTES};
use std::collections::VecDeque;
use std::sync::Arc;

/// A packet held in the queue until its dequeue (CoDel).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Held {
    /// Arrival, ns.
    t: u64,
    /// Bytes the rate and the queue count.
    bytes: u32,
    id: u64,
}

/// What a dequeue did with a held packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dequeued {
    /// Dropped by CoDel at `at` (ns).
    Dropped { id: u64, arrival: u64, at: u64 },
    /// Dequeued at `start` (its sojourn ends) and serialised until `finish`.
    Sent { id: u64, arrival: u64, start: u64, finish: u64 },
}

/// The held packets as CoDel sees them at a dequeue.
struct HeldBacklog<'a> {
    q: &'a mut VecDeque<Held>,
    bytes: &'a mut u64,
}

impl Backlog for HeldBacklog<'_> {
    type Pkt = Held;
    fn pop(&mut self, now: u64) -> Option<(u64, Held)> {
        match self.q.front() {
            Some(h) if h.t <= now => {
                let h = self.q.pop_front().unwrap();
                *self.bytes -= h.bytes as u64;
                Some((h.t, h))
            }
            _ => None,
        }
    }
    fn bytes(&self, now: u64) -> u64 {
        // packets read after their time came may sit at the tail with a later arrival
        let later: u64 = self.q.iter().rev().take_while(|h| h.t > now).map(|h| h.bytes as u64).sum();
        *self.bytes - later
    }
}

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
    /// CoDel's state, when the discipline is CoDel.
    codel: Option<Codel>,
    /// Packets held until their dequeue (CoDel; after a switch to FIFO, until
    /// they are gone), their bytes, the next id to hand out, and when the head
    /// is due (u64::MAX: none).
    held: VecDeque<Held>,
    held_bytes: u64,
    next_id: u64,
    next_svc: u64,
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
            codel: None,
            held: VecDeque::new(),
            held_bytes: 0,
            next_id: 0,
            next_svc: u64::MAX,
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
        self.codel = match (cfg.discipline, self.codel.take()) {
            (Discipline::Fifo, _) => None,
            // a new target or interval keeps the state (as `tc qdisc change` does)
            (Discipline::Codel(p), Some(mut c)) => {
                c.params = p;
                Some(c)
            }
            (Discipline::Codel(p), None) => Some(Codel::new(p)),
        };
        self.refresh_next();
    }

    /// Whether an arriving packet is held until its dequeue (`hold`) rather than
    /// scheduled at once (`offer`): with CoDel, and while packets held before a
    /// switch to FIFO are still queued.
    #[inline]
    pub fn holds(&self) -> bool {
        self.codel.is_some() || !self.held.is_empty()
    }

    /// Hold a packet of `ip_bytes` arriving at `t` until its dequeue; None when
    /// the queue limit drops it (drop-tail on arrival, as CoDel's own limit).
    /// Call `dequeue_due(t)` first, so that the queue is what it is at `t`.
    pub fn hold(&mut self, t: u64, ip_bytes: u32) -> Option<u64> {
        let bytes = if matches!(self.cap, Capacity::Trace { .. }) { ip_bytes } else { ip_bytes + self.overhead };
        let full = match self.limit {
            QueueLimit::Unlimited => false,
            QueueLimit::Packets(n) => self.held.len() as u64 >= n,
            QueueLimit::Bytes(n) => self.held_bytes + bytes as u64 > n,
            // a waiting time at the (mean) rate, as bytes: the wait itself depends
            // on the drops still to come
            QueueLimit::Time(ns) => match self.mean_rate_bps() {
                Some(bps) => (self.held_bytes + bytes as u64) as f64 * 8.0 > bps * ns as f64 / 1e9,
                None => false,
            },
        };
        if full {
            return None;
        }
        if let Some(c) = &mut self.codel {
            c.enqueued(bytes as u64);
        }
        let id = self.next_id;
        self.next_id += 1;
        self.held.push_back(Held { t, bytes, id });
        self.held_bytes += bytes as u64;
        if self.held.len() == 1 {
            self.refresh_next();
        }
        Some(id)
    }

    /// When the head of the held packets is dequeued (u64::MAX: nothing held).
    #[inline]
    pub fn next_dequeue(&self) -> u64 {
        self.next_svc
    }

    fn refresh_next(&mut self) {
        self.next_svc = match self.held.front() {
            Some(h) => self.serve(h.t.max(self.free_at), h.bytes).0,
            None => u64::MAX,
        };
    }

    fn mean_rate_bps(&self) -> Option<f64> {
        match &self.cap {
            Capacity::Rate { bps } => Some(*bps),
            Capacity::Trace { trace, .. } => Some(trace.mean_rate_bps()),
            Capacity::Unlimited => None,
        }
    }

    /// Dequeue every held packet whose dequeue time is at or before `now`, in
    /// order; CoDel decides at each dequeue time. `out` gets each packet's fate.
    pub fn dequeue_due(&mut self, now: u64, mut out: impl FnMut(Dequeued)) {
        while self.next_svc <= now {
            let at = self.next_svc;
            let sent = match &mut self.codel {
                Some(c) => {
                    let mut q = HeldBacklog { q: &mut self.held, bytes: &mut self.held_bytes };
                    c.dequeue(at, &mut q, |h| out(Dequeued::Dropped { id: h.id, arrival: h.t, at }))
                }
                None => {
                    let h = self.held.pop_front();
                    if let Some(h) = h {
                        self.held_bytes -= h.bytes as u64;
                    }
                    h
                }
            };
            if let Some(h) = sent {
                // it leaves the queue at `at` (>= its arrival and the link's free time)
                let (start, finish, cur) = self.serve(at, h.bytes);
                if let Capacity::Trace { cur: c, .. } = &mut self.cap {
                    *c = cur;
                }
                self.free_at = finish;
                out(Dequeued::Sent { id: h.id, arrival: h.t, start, finish });
            }
            self.refresh_next();
        }
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
            let mut off = rel % per;
            if off == 0 && l > 0 {
                // the previous loop's last opportunities (at its period) are at `t` too
                l -= 1;
                off = per;
            }
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
        // a packet arriving exactly at the period (10 ms) takes that opportunity,
        // the previous loop's last, not the next loop's first at 11 ms
        let mut b = Bottleneck::new(&c, 0);
        assert_eq!(pass(b.offer(10_000_000, 1500)).1, 10_000_000);
        assert_eq!(pass(b.offer(10_000_000, 1500)).1, 11_000_000);
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

    /// Hold packets (bytes, arrival) and dequeue them all: (start, finish) of each
    /// sent one in arrival order, None for a drop.
    fn held_times(b: &mut Bottleneck, pkts: &[(u32, u64)]) -> Vec<Option<(u64, u64)>> {
        let mut res = vec![None; pkts.len()];
        let mut at = std::collections::HashMap::new();
        let take = |d: Dequeued, res: &mut Vec<Option<(u64, u64)>>, at: &std::collections::HashMap<u64, usize>| {
            if let Dequeued::Sent { id, start, finish, .. } = d {
                res[at[&id]] = Some((start, finish));
            }
        };
        for (i, &(bytes, t)) in pkts.iter().enumerate() {
            b.dequeue_due(t, |d| take(d, &mut res, &at));
            if let Some(id) = b.hold(t, bytes) {
                at.insert(id, i);
            }
        }
        b.dequeue_due(u64::MAX / 2, |d| take(d, &mut res, &at));
        res
    }

    #[test]
    fn held_packets_leave_as_the_fifo_schedules_them_without_drops() {
        // every capacity model: with nothing for CoDel to drop (a short queue),
        // dequeuing held packets gives the virtual FIFO's times
        let text: String = "1\n1\n3\n10\n".into();
        let mut trace = trace_cfg(&text);
        trace.queue = crate::config::QueueLimit::Packets(1000);
        let cases = [
            cfg(json!({"rate_mbit": 12, "queue": {"packets": 1000}})),
            cfg(json!({"rate_mbit": 12, "spikes": {"period_ms": 100, "duration_ms": 20, "rate_pct": 25}, "queue": {"packets": 1000}})),
            cfg(json!({"rate_mbit": 12, "onoff": {"on_ms": 30, "off_ms": 20}, "queue": {"packets": 1000}})),
            trace,
        ];
        // pairs of packets of 1500 and 500 bytes every 7 ms
        let pkts: Vec<(u32, u64)> = (0..200u64).map(|i| (if i % 2 == 0 { 1500 } else { 500 }, (i / 2) * 7_000_000)).collect();
        for c in cases {
            let mut fifo = Bottleneck::new(&c, 0);
            let want: Vec<Option<(u64, u64)>> = pkts.iter().map(|&(b, t)| Some(pass(fifo.offer(t, b)))).collect();
            let mut c2 = c.clone();
            c2.discipline = crate::config::Discipline::Codel(crate::codel::CodelParams { target_ns: 1_000_000_000, interval_ns: 100_000_000 });
            let mut held = Bottleneck::new(&c2, 0);
            assert!(held.holds());
            assert_eq!(held_times(&mut held, &pkts), want, "{:?}", c.source);
        }
    }

    #[test]
    fn held_queue_limit_drops_on_arrival() {
        let mut c = cfg(json!({"rate_mbit": 10, "queue": {"packets": 3}}));
        c.discipline = crate::config::Discipline::Codel(Default::default());
        let mut b = Bottleneck::new(&c, 0);
        // the first is dequeued at once (after dequeue_due), 3 wait, the 5th is dropped
        let r = held_times(&mut b, &[(1500, S); 5]);
        assert_eq!(r.iter().filter(|x| x.is_some()).count(), 4);
        assert_eq!(r[4], None);
        // {"ms": 5} at 10 Mbit/s: 6250 bytes may wait (4 full packets)
        let mut c = cfg(json!({"rate_mbit": 10, "queue": {"ms": 5}}));
        c.discipline = crate::config::Discipline::Codel(Default::default());
        let mut b = Bottleneck::new(&c, 0);
        let r = held_times(&mut b, &[(1500, S); 10]);
        assert_eq!(r.iter().filter(|x| x.is_some()).count(), 5);
    }

    #[test]
    fn transparent_link_passes_through() {
        let mut b = Bottleneck::new(&DirConfig::default(), 0);
        assert_eq!(b.offer(123, 1500), Admit::Pass { start: 123, finish: 123 });
    }
}
