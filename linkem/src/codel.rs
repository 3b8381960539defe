//! CoDel, the Controlled Delay queue discipline, as RFC 8289 (section 5) specifies it.
//!
//! CoDel judges a queue by the sojourn time of the packets it dequeues: when
//! every packet dequeued for a whole `interval` waited at least `target` (and
//! more than one packet's bytes remained queued), it enters the dropping state
//! and drops a head packet; further drops follow at `interval / sqrt(count)`,
//! so the drop rate grows until the sojourn time falls below `target`, which
//! ends the dropping state. Entering it again soon after leaving it starts
//! from the previous drop rate (the count re-use rule, Linux's variant as the
//! RFC gives it).
//!
//! The state machine is independent of how packets are stored: `dequeue` works
//! on any [`Backlog`]. Times are ns on one clock; `0` means "none" as in the
//! RFC's `first_above_time`.

/// CoDel's two parameters, ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodelParams {
    pub target_ns: u64,
    pub interval_ns: u64,
}

/// RFC 8289's defaults: 5 ms target, 100 ms interval.
pub const DEFAULT_TARGET_NS: u64 = 5_000_000;
pub const DEFAULT_INTERVAL_NS: u64 = 100_000_000;

impl Default for CodelParams {
    fn default() -> Self {
        CodelParams { target_ns: DEFAULT_TARGET_NS, interval_ns: DEFAULT_INTERVAL_NS }
    }
}

/// The queue CoDel dequeues from.
pub trait Backlog {
    type Pkt;
    /// Remove the head packet if it had arrived by `now`: (its arrival time, it).
    fn pop(&mut self, now: u64) -> Option<(u64, Self::Pkt)>;
    /// Bytes still queued that had arrived by `now` (the RFC's `bytes()`).
    fn bytes(&self, now: u64) -> u64;
}

#[derive(Clone, Debug, PartialEq)]
pub struct Codel {
    pub params: CodelParams,
    /// Largest packet queued so far, bytes (the RFC's MAXPACKET, which "SHOULD
    /// use the interface MTU"; kept as Linux's sch_codel keeps it).
    pub maxpacket: u64,
    first_above_time: u64,
    drop_next: u64,
    count: u32,
    lastcount: u32,
    dropping: bool,
}

impl Codel {
    pub fn new(params: CodelParams) -> Codel {
        Codel { params, maxpacket: 0, first_above_time: 0, drop_next: 0, count: 0, lastcount: 0, dropping: false }
    }

    /// Record a packet entering the queue (its size updates MAXPACKET).
    #[inline]
    pub fn enqueued(&mut self, bytes: u64) {
        self.maxpacket = self.maxpacket.max(bytes);
    }

    #[cfg(test)]
    pub fn dropping(&self) -> bool {
        self.dropping
    }

    #[cfg(test)]
    pub fn count(&self) -> u32 {
        self.count
    }

    /// When the next drop is due while dropping, ns.
    #[cfg(test)]
    pub fn drop_next(&self) -> u64 {
        self.drop_next
    }

    fn control_law(&self, t: u64, count: u32) -> u64 {
        t + (self.params.interval_ns as f64 / (count.max(1) as f64).sqrt()) as u64
    }

    /// The RFC's `dodequeue`: pop the head and say whether it may be dropped.
    fn dodequeue<B: Backlog>(&mut self, now: u64, q: &mut B) -> (Option<B::Pkt>, bool) {
        let Some((tstamp, p)) = q.pop(now) else {
            // queue empty: reset
            self.first_above_time = 0;
            return (None, false);
        };
        let sojourn = now.saturating_sub(tstamp);
        let mut ok_to_drop = false;
        if sojourn < self.params.target_ns || q.bytes(now) <= self.maxpacket {
            // went below: stay below for at least an interval
            self.first_above_time = 0;
        } else if self.first_above_time == 0 {
            // just went above: if still above an interval from now, drop
            self.first_above_time = now + self.params.interval_ns;
        } else if now >= self.first_above_time {
            ok_to_drop = true;
        }
        (Some(p), ok_to_drop)
    }

    /// The RFC's `dequeue` at time `now`: the packet to send (None: the queue
    /// had nothing that had arrived by `now`); every packet it drops on the way
    /// goes to `drop`.
    pub fn dequeue<B: Backlog>(&mut self, now: u64, q: &mut B, mut drop: impl FnMut(B::Pkt)) -> Option<B::Pkt> {
        let (mut p, mut ok_to_drop) = self.dodequeue(now, q);
        if self.dropping {
            if !ok_to_drop {
                // sojourn time below target: leave the dropping state
                self.dropping = false;
            }
            // Drop the current packet and dequeue the next while drops are due;
            // a large backlog may need several drops now.
            while self.dropping && now >= self.drop_next {
                if let Some(x) = p.take() {
                    drop(x);
                }
                self.count += 1;
                (p, ok_to_drop) = self.dodequeue(now, q);
                if !ok_to_drop {
                    self.dropping = false;
                } else {
                    self.drop_next = self.control_law(self.drop_next, self.count);
                }
            }
        } else if ok_to_drop {
            // above target for an interval: drop and enter the dropping state
            if let Some(x) = p.take() {
                drop(x);
            }
            (p, _) = self.dodequeue(now, q);
            self.dropping = true;
            // Re-use the drop rate of the last dropping cycle when it ended
            // recently (drop_next is then at most an interval past the last drop).
            let delta = self.count.wrapping_sub(self.lastcount);
            self.count = 1;
            if delta > 1 && (now as i128 - self.drop_next as i128) < 16 * self.params.interval_ns as i128 {
                self.count = delta;
            }
            self.drop_next = self.control_law(now, self.count);
            self.lastcount = self.count;
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    const MS: u64 = 1_000_000;

    /// A FIFO of (arrival, bytes, id).
    #[derive(Default)]
    struct Fifo(VecDeque<(u64, u64, u32)>);

    impl Backlog for Fifo {
        type Pkt = u32;
        fn pop(&mut self, now: u64) -> Option<(u64, u32)> {
            match self.0.front() {
                Some(&(t, _, id)) if t <= now => {
                    self.0.pop_front();
                    Some((t, id))
                }
                _ => None,
            }
        }
        fn bytes(&self, now: u64) -> u64 {
            self.0.iter().filter(|x| x.0 <= now).map(|x| x.1).sum()
        }
    }

    /// A link of `svc` ns per 1500-byte packet, fed `per_svc` packets per
    /// service time (a standing queue grows when > 1), from time 0 to `end`,
    /// with `initial` packets queued at time 0. Returns each drop's time, and
    /// each sent packet's (dequeue time, sojourn).
    fn simulate(params: CodelParams, svc: u64, arrivals_per_svc: f64, initial: usize, end: u64) -> (Vec<u64>, Vec<(u64, u64)>) {
        let mut c = Codel::new(params);
        let mut q = Fifo::default();
        let mut id = 0u32;
        for _ in 0..initial {
            q.0.push_back((0, 1500, id));
            c.enqueued(1500);
            id += 1;
        }
        let gap = (svc as f64 / arrivals_per_svc) as u64;
        let mut next_arrival = gap;
        let (mut drops, mut sent) = (Vec::new(), Vec::new());
        let mut now = 0;
        let mut arrival_of = std::collections::HashMap::new();
        for &(t, _, i) in q.0.iter() {
            arrival_of.insert(i, t);
        }
        while now < end {
            while next_arrival <= now {
                q.0.push_back((next_arrival, 1500, id));
                arrival_of.insert(id, next_arrival);
                c.enqueued(1500);
                id += 1;
                next_arrival += gap;
            }
            match c.dequeue(now, &mut q, |_| drops.push(now)) {
                Some(p) => {
                    sent.push((now, now - arrival_of[&p]));
                    now += svc;
                }
                None => now = next_arrival.max(now + 1),
            }
        }
        (drops, sent)
    }

    #[test]
    fn below_target_never_drops() {
        // a queue that never holds 5 ms of packets (2 packets of 1.2 ms): no drop
        let (drops, sent) = simulate(CodelParams::default(), 1_200_000, 1.0, 2, 2_000 * MS);
        assert!(drops.is_empty(), "{} drops", drops.len());
        assert!(sent.iter().all(|&(_, s)| s < 5 * MS));
    }

    #[test]
    fn standing_queue_above_target_for_an_interval_starts_dropping() {
        // 100 packets of 1.2 ms queued at 0 and arrivals at the service rate: a
        // standing queue of 120 ms. The first dequeue whose sojourn reaches the
        // target sets first_above_time an interval later; the first drop is the
        // first dequeue at or after it, never before.
        let svc = 1_200_000;
        for interval in [100 * MS, 50 * MS] {
            let p = CodelParams { target_ns: 5 * MS, interval_ns: interval };
            let (drops, sent) = simulate(p, svc, 1.0, 100, 400 * MS);
            let above = sent.iter().find(|s| s.1 >= 5 * MS).unwrap().0;
            assert_eq!(above, 6 * MS); // the sixth packet, 5 x 1.2 ms
            assert!(!drops.is_empty());
            assert!(drops[0] >= above + interval && drops[0] < above + interval + svc, "first drop at {}", drops[0]);
        }
    }

    #[test]
    fn drop_spacing_shrinks_as_interval_over_sqrt_count() {
        // arrivals at 1.5x the service rate keep the queue above target: drops never
        // stop; drop n is due interval * (1 + 1/sqrt(2) + ... + 1/sqrt(n)) after the
        // first and happens at the first dequeue from then on (within a service time)
        let svc = 1_200_000;
        let (drops, _) = simulate(CodelParams::default(), svc, 1.5, 100, 3_000 * MS);
        assert!(drops.len() > 20, "{} drops", drops.len());
        let mut due = drops[0] as f64;
        for (n, &d) in drops.iter().enumerate().skip(1).take(20) {
            due += 100e6 / (n as f64).sqrt();
            assert!(d as f64 >= due - 1.0 && (d as f64) < due + svc as f64 + 1.0, "drop {} at {} ns, due {}", n, d, due);
        }
        let gaps: Vec<u64> = drops.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps[0] > gaps[10] && gaps[10] > gaps[19], "gaps do not shrink: {:?}", &gaps[..20]);
    }

    #[test]
    fn sojourn_below_target_stops_dropping_until_above_for_an_interval_again() {
        let mut c = Codel::new(CodelParams::default());
        let mut q = Fifo::default();
        for i in 0..100 {
            q.0.push_back((0, 1500, i));
            c.enqueued(1500);
        }
        // above target from 10 ms: no drop before 110 ms
        assert_eq!(c.dequeue(10 * MS, &mut q, |_| panic!("no drop before an interval")), Some(0));
        assert_eq!(c.dequeue(109 * MS, &mut q, |_| panic!("no drop before an interval")), Some(1));
        let mut dropped = vec![];
        assert_eq!(c.dequeue(110 * MS, &mut q, |p| dropped.push(p)), Some(3));
        assert_eq!(dropped, vec![2]);
        assert!(c.dropping());
        assert_eq!(c.count(), 1);
        assert_eq!(c.drop_next(), 210 * MS);
        // a packet that waited 1 ms ends the dropping state at once
        q.0.clear();
        for i in 0..2 {
            q.0.push_back((149 * MS, 1500, 500 + i));
        }
        assert_eq!(c.dequeue(150 * MS, &mut q, |_| panic!("below target: no drop")), Some(500));
        assert!(!c.dropping());
        // a new standing queue: above target from 160 ms, so no drop before 260 ms
        for i in 0..100 {
            q.0.push_back((150 * MS, 1500, 600 + i));
        }
        let mut t = 160 * MS;
        while t < 260 * MS {
            c.dequeue(t, &mut q, |_| panic!("dropped at {} ns, less than an interval above target", t));
            t += 10 * MS;
        }
        let mut n = 0;
        c.dequeue(260 * MS, &mut q, |_| n += 1);
        assert_eq!(n, 1);
        assert!(c.dropping());
    }

    #[test]
    fn count_is_reused_when_dropping_resumes_soon() {
        // a dropping cycle of several drops, the queue empties, a new standing queue
        // soon after: count starts from the previous cycle's (count - lastcount)
        let mut c = Codel::new(CodelParams::default());
        let mut q = Fifo::default();
        for i in 0..2000 {
            q.0.push_back((0, 1500, i));
            c.enqueued(1500);
        }
        // dequeues every ms: above target from 5 ms, drops at 105, 205, 276, 334, 384 ms
        let mut now = 0;
        while now < 400 * MS {
            c.dequeue(now, &mut q, |_| {});
            now += MS;
        }
        assert!(c.dropping());
        assert_eq!(c.count(), 5);
        let last_drop_next = c.drop_next();
        // the queue empties: dropping ends
        q.0.clear();
        assert_eq!(c.dequeue(now, &mut q, |_| {}), None);
        assert!(!c.dropping());
        // 50 ms later a new standing queue: the cycle starts at count 5 - 1 = 4
        now += 50 * MS;
        for i in 0..2000 {
            q.0.push_back((now, 1500, 10_000 + i));
        }
        let mut t = now;
        while !c.dropping() {
            t += MS;
            c.dequeue(t, &mut q, |_| {});
        }
        assert!(t - last_drop_next < 16 * 100 * MS);
        assert_eq!(c.count(), 4);
        assert_eq!(c.drop_next(), t + (100e6 / 2.0) as u64);
        // more than 16 intervals after the last cycle's drop_next, count restarts at 1
        let mut c2 = Codel::new(CodelParams::default());
        c2.enqueued(1500);
        c2.count = 15;
        c2.lastcount = 1;
        c2.drop_next = 1000 * MS;
        let start = c2.drop_next + 16 * 100 * MS + 200 * MS;
        let mut q2 = Fifo::default();
        for i in 0..10 {
            q2.0.push_back((start - 100 * MS, 1500, i));
        }
        c2.dequeue(start, &mut q2, |_| {});
        c2.dequeue(start + 100 * MS, &mut q2, |_| {});
        assert!(c2.dropping());
        assert_eq!(c2.count(), 1);
    }

    #[test]
    fn a_single_packet_backlog_is_never_dropped() {
        // the second term of the RFC's test: bytes() <= MAXPACKET keeps the link busy
        let mut c = Codel::new(CodelParams::default());
        let mut q = Fifo::default();
        for i in 0..2 {
            q.0.push_back((0, 1500, i));
            c.enqueued(1500);
        }
        // both waited far above target, but after taking the first only one packet remains
        assert_eq!(c.dequeue(200 * MS, &mut q, |_| panic!()), Some(0));
        assert_eq!(c.dequeue(400 * MS, &mut q, |_| panic!()), Some(1));
        assert!(!c.dropping());
    }

    #[test]
    fn packets_not_yet_arrived_are_not_in_the_backlog() {
        let mut c = Codel::new(CodelParams::default());
        let mut q = Fifo::default();
        q.0.push_back((10 * MS, 1500, 0));
        assert_eq!(c.dequeue(5 * MS, &mut q, |_| panic!()), None);
        assert_eq!(c.dequeue(10 * MS, &mut q, |_| panic!()), Some(0));
    }
}
