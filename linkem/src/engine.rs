//! Forwarding engine: drains the RX rings, runs the emulation pipeline, keeps
//! packets in per-direction delay lines and transmits them at their time.

use crate::afpacket::{RxRing, TxBatch, TxSock, TP_STATUS_CSUMNOTREADY, VIRTIO_NET_HDR_F_NEEDS_CSUM, VNET_HDR_LEN};
use crate::config::DirConfig;
use crate::emu::{Copy, Emu, Release};
use crate::gso::Gso;
use crate::ringhold::{Place, RingHold};
use crate::frame::{classify, complete_partial_csum, l4_csum_location, rewrite, Class, LocalAddrs, ETH_HLEN};
use crate::stats::{Counter, DirStats, PortStats, TimingStats};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

#[inline]
pub fn mono_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

#[inline]
pub fn clock_ns(c: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(c, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Set by the SIGTERM/SIGINT handler.
pub static STOP: AtomicBool = AtomicBool::new(false);
/// eventfds the signal handler writes to (async-signal-safe wake-up).
pub static SIG_WAKE_FDS: [std::sync::atomic::AtomicI32; 4] = [const { std::sync::atomic::AtomicI32::new(-1) }; 4];

/// State shared between forwarding threads, the control thread and main.
pub struct Shared {
    pub stop: AtomicBool,
    pub dir_stats: [Arc<DirStats>; 2],
    pub port_stats: [Arc<PortStats>; 2],
    pub timing: Mutex<Vec<Arc<TimingStats>>>,
    pub pending: [Mutex<Option<(DirConfig, Option<u64>)>>; 2],
    pub req_gen: [AtomicU64; 2],
    pub done_gen: [AtomicU64; 2],
    pub wake_fds: Mutex<Vec<i32>>,
    pub current: [Mutex<serde_json::Value>; 2],
}

impl Shared {
    pub fn new() -> Shared {
        Shared {
            stop: AtomicBool::new(false),
            dir_stats: [Arc::new(DirStats::default()), Arc::new(DirStats::default())],
            port_stats: [Arc::new(PortStats::default()), Arc::new(PortStats::default())],
            timing: Mutex::new(Vec::new()),
            pending: [Mutex::new(None), Mutex::new(None)],
            req_gen: [AtomicU64::new(0), AtomicU64::new(0)],
            done_gen: [AtomicU64::new(0), AtomicU64::new(0)],
            wake_fds: Mutex::new(Vec::new()),
            current: [Mutex::new(serde_json::json!({})), Mutex::new(serde_json::json!({}))],
        }
    }
    pub fn wake_all(&self) {
        for &fd in self.wake_fds.lock().unwrap().iter() {
            let one: u64 = 1;
            unsafe { libc::write(fd, &one as *const u64 as *const libc::c_void, 8) };
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Sleep on a timerfd until the next deadline (minus `spin_ns`, then spin).
    Sleep,
    /// Never sleep: poll rings and clock continuously.
    Busy,
}

#[derive(Clone, Debug)]
pub struct TimingOpts {
    pub mode: Mode,
    /// Sleep until `deadline - spin_ns`, then spin.
    pub spin_ns: u64,
    /// Minimum spacing between consecutive timer wake-ups while busy.
    pub coalesce_ns: u64,
    /// Do not wake on packet arrival when no packet can be due before the next
    /// timer wake-up (all directions have a minimum delay).
    pub rx_defer: bool,
    /// Upper bound of the deferral window.
    pub max_defer_ns: u64,
    /// Spin at most this fraction (percent) of wall time (per 100 ms window).
    pub spin_budget_pct: u64,
    /// Overload guard: drop arrivals while the delay line is this late (0 = off).
    pub max_late_ns: u64,
}

impl TimingOpts {
    pub fn describe(&self) -> String {
        format!(
            "{}{}{}{}",
            match self.mode {
                Mode::Sleep => "timerfd-sleep",
                Mode::Busy => "busy-poll",
            },
            if self.spin_ns > 0 && self.mode == Mode::Sleep {
                format!("+adaptive-spin(max {}us, budget {}%)", self.spin_ns / 1000, self.spin_budget_pct)
            } else {
                String::new()
            },
            if self.coalesce_ns > 0 { format!("+coalesce{}us", self.coalesce_ns / 1000) } else { String::new() },
            if self.rx_defer { "+rxdefer" } else { "" }
        )
    }
}

const SLOT: usize = 2048;
/// Slots for GSO runs (`--gso`): 64 KiB of payload plus headers and vnet header.
pub const BIG_SLOT: usize = 65536 + 512;
/// Spin only after sleeping at least this long (light load).
const SPIN_MIN_SLEEP_NS: u64 = 100_000;

/// Packet buffers: fixed-size slots ([vnet hdr 10 B][frame]) in chunks of
/// about 8 MiB, grown on demand up to `max_slots`.
pub struct Pool {
    chunks: Vec<Box<[u8]>>,
    free: Vec<u32>,
    max_slots: usize,
    slot: usize,
    per_chunk: usize,
}

impl Pool {
    pub fn new(slot: usize, max_slots: usize) -> Pool {
        Pool { chunks: Vec::new(), free: Vec::new(), max_slots, slot, per_chunk: ((8 << 20) / slot).max(1) }
    }
    #[inline]
    pub fn alloc(&mut self) -> Option<u32> {
        if let Some(s) = self.free.pop() {
            return Some(s);
        }
        let have = self.chunks.len() * self.per_chunk;
        if have >= self.max_slots {
            return None;
        }
        self.chunks.push(vec![0u8; self.slot * self.per_chunk].into_boxed_slice());
        for i in (have + 1..have + self.per_chunk).rev() {
            self.free.push(i as u32);
        }
        Some(have as u32)
    }
    #[inline]
    pub fn free(&mut self, s: u32) {
        self.free.push(s);
    }
    #[inline]
    pub fn slot(&mut self, s: u32) -> &mut [u8] {
        let s = s as usize;
        let c = &mut self.chunks[s / self.per_chunk];
        let o = (s % self.per_chunk) * self.slot;
        &mut c[o..o + self.slot]
    }
    #[inline]
    pub fn ptr(&self, s: u32) -> *const u8 {
        let s = s as usize;
        unsafe { self.chunks[s / self.per_chunk].as_ptr().add((s % self.per_chunk) * self.slot) }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Pkt {
    send_at: u64,
    seq: u64,
    slot: u32,
    /// Frame length (one frame; a GSO run is one frame of several segments).
    len: u32,
    /// Wire packets in this frame (1, or the segments of a GSO run).
    nseg: u16,
    /// Where its bytes are: `slot` of the 2 KiB pool, of the big one (GSO runs),
    /// or the frame `slot` of the RX ring (see ringhold).
    loc: Loc,
    /// Bytes on the emulated wire: every segment with its own headers.
    wire: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Loc {
    Pool,
    Big,
    Ring,
}

pub struct Port {
    #[allow(dead_code)]
    pub name: String,
    pub mac: [u8; 6],
    pub rx: RxRing,
    pub stats: Arc<PortStats>,
}

pub struct Dir {
    pub idx: usize,
    pub emu: Emu,
    pub tx: TxSock,
    pub egress_mac: [u8; 6],
    pub peer_mac: [u8; 6],
    pub stats: Arc<DirStats>,
    fifo: VecDeque<Pkt>,
    heap: BinaryHeap<Reverse<Pkt>>,
    staged: VecDeque<Pkt>,
    batch: TxBatch,
    pool: Pool,
    big: Pool,
    /// Packets kept in the ingress RX ring until they leave.
    hold: RingHold,
    /// Segments of a GSO run leaving within this window of the run's first
    /// segment are sent as one frame (what the receiver's GRO would merge).
    pub gro_window_ns: u64,
    /// Per-segment pipeline results of the current super-frame: (segment, copy).
    scratch: Vec<(u32, Copy)>,
    /// Packets the bottleneck holds until their dequeue (CoDel), by its id, in order.
    held: VecDeque<(u64, Pkt)>,
    released: Vec<Release>,
    seq: u64,
    seen_gen: u64,
}

impl Dir {
    /// `ring`: the layout of the ingress RX ring (`RxRing::layout`).
    pub fn new(idx: usize, emu: Emu, tx: TxSock, egress_mac: [u8; 6], peer_mac: [u8; 6], stats: Arc<DirStats>, max_slots: usize,
               ring: (*mut u8, usize, usize)) -> Dir {
        Dir {
            idx, emu, tx, egress_mac, peer_mac, stats,
            fifo: VecDeque::with_capacity(16384),
            heap: BinaryHeap::new(),
            staged: VecDeque::new(),
            batch: TxBatch::new(),
            pool: Pool::new(SLOT, max_slots),
            big: Pool::new(BIG_SLOT, (max_slots / 16).max(64)),
            hold: RingHold::new(ring.0, ring.1, ring.2),
            gro_window_ns: 0,
            scratch: Vec::with_capacity(128),
            held: VecDeque::new(),
            released: Vec::with_capacity(64),
            seq: 0,
            seen_gen: 0,
        }
    }

    #[inline]
    fn next_deadline(&self) -> u64 {
        let mut t = u64::MAX;
        if let Some(p) = self.staged.front() {
            t = t.min(p.send_at);
        }
        if let Some(p) = self.fifo.front() {
            t = t.min(p.send_at);
        }
        if let Some(Reverse(p)) = self.heap.peek() {
            t = t.min(p.send_at);
        }
        t.min(self.emu.next_release())
    }

    /// Dequeue the held packets due by `now` (CoDel): drop what CoDel dropped,
    /// put the rest on the delay line.
    fn release_due(&mut self, now: u64) {
        if self.emu.next_release() > now {
            return;
        }
        let mut rel = std::mem::take(&mut self.released);
        rel.clear();
        self.emu.release_due(now, &self.stats, &mut rel);
        for r in rel.iter() {
            // a copy without a buffer (pool exhausted) was never held here
            while self.held.front().is_some_and(|(id, _)| *id < r.id) {
                let (_, p) = self.held.pop_front().unwrap();
                self.release(p);
            }
            if self.held.front().is_none_or(|(id, _)| *id != r.id) {
                continue;
            }
            let (_, mut p) = self.held.pop_front().unwrap();
            match r.send_at {
                None => self.release(p),
                Some(t) => {
                    p.send_at = t;
                    self.stats.queue_delay.record_ns(r.queue_delay);
                    self.enqueue(p);
                }
            }
        }
        self.released = rel;
    }

    /// A copy leaves for the delay line, or waits in the bottleneck (CoDel).
    #[inline]
    fn place(&mut self, c: &Copy, p: Pkt) {
        match c.held {
            Some(id) => self.held.push_back((id, p)),
            None => self.enqueue(p),
        }
    }

    #[inline]
    fn pop_due(&mut self, now: u64) -> Option<Pkt> {
        let f = self.fifo.front().map(|p| p.send_at).unwrap_or(u64::MAX);
        let h = self.heap.peek().map(|Reverse(p)| p.send_at).unwrap_or(u64::MAX);
        if f <= h {
            if f <= now { self.fifo.pop_front() } else { None }
        } else if h <= now {
            self.heap.pop().map(|Reverse(p)| p)
        } else {
            None
        }
    }

    /// Transmit everything due at `now`. Returns packets sent.
    fn transmit_due(&mut self, now: u64, ts: &TimingStats) -> usize {
        let mut sent_total = 0;
        loop {
            while self.staged.len() < crate::afpacket::TX_BATCH {
                match self.pop_due(now) {
                    Some(p) => self.staged.push_back(p),
                    None => break,
                }
            }
            if self.staged.is_empty() {
                return sent_total;
            }
            let off = if self.tx.vnet { 0 } else { VNET_HDR_LEN };
            self.batch.n = 0;
            for i in 0..self.staged.len() {
                let p = self.staged[i];
                let ptr = unsafe { self.buf_ptr(&p).add(off) };
                self.batch.push(ptr, p.len as usize + VNET_HDR_LEN - off);
            }
            let tnow = mono_ns();
            ts.tx_calls.inc();
            let n = self.batch.n;
            let sent = match self.batch.send(self.tx.fd) {
                Ok(k) => k,
                Err(e) if e == libc::EAGAIN || e == libc::EINTR => {
                    // socket buffer full: retry on the next loop iteration
                    ts.tx_eagain.inc();
                    return sent_total;
                }
                Err(_) => {
                    // The first frame of the batch was refused (e.g. ENOBUFS when
                    // the peer's backlog is full): count it, drop it, go on.
                    self.stats.tx_errors.add(self.staged[0].nseg as u64);
                    let p = self.staged.pop_front().unwrap();
                    self.release(p);
                    continue;
                }
            };
            for _ in 0..sent {
                let p = self.staged.pop_front().unwrap();
                let err = tnow.saturating_sub(p.send_at);
                self.stats.sched_error.record_ns(err);
                self.stats.forwarded.add(p.nseg as u64);
                self.stats.bytes_out.add(p.wire as u64);
                self.release(p);
            }
            ts.tx_packets.add(sent as u64);
            sent_total += sent;
            if sent < n {
                ts.tx_eagain.inc();
                return sent_total;
            }
        }
    }

    /// Start of a packet's [vnet header][frame].
    #[inline]
    fn buf_ptr(&self, p: &Pkt) -> *const u8 {
        match p.loc {
            Loc::Pool => self.pool.ptr(p.slot),
            Loc::Big => self.big.ptr(p.slot),
            Loc::Ring => match self.hold.place(p.slot, p.seq) {
                Place::Ring(ptr) => ptr,
                Place::Pool { slot, big: false } => self.pool.ptr(slot),
                Place::Pool { slot, big: true } => self.big.ptr(slot),
            },
        }
    }

    #[inline]
    fn release(&mut self, p: Pkt) {
        match p.loc {
            Loc::Pool => self.pool.free(p.slot),
            Loc::Big => self.big.free(p.slot),
            Loc::Ring => match self.hold.release(p.slot, p.seq) {
                None => {}
                Some((slot, false)) => self.pool.free(slot),
                Some((slot, true)) => self.big.free(slot),
            },
        }
    }

    /// Copy held ring frame `frame` into a pool buffer and hand it back to the
    /// kernel. False if no buffer is free (the frame stays held).
    fn evict(&mut self, frame: u32) -> bool {
        let Some(bytes) = self.hold.bytes(frame as usize) else { return true };
        let big = bytes.len() > SLOT;
        let Some(slot) = (if big { self.big.alloc() } else { self.pool.alloc() }) else { return false };
        let dst = if big { self.big.slot(slot) } else { self.pool.slot(slot) };
        dst[..bytes.len()].copy_from_slice(bytes);
        self.hold.evicted(frame, slot, big);
        true
    }

    /// Whether ring frame `frame` is one of our kept packets.
    #[inline]
    pub fn holds(&self, frame: usize) -> bool {
        self.hold.is_held(frame)
    }

    /// Before reading the ring at `head`: evict the held frames the kernel could
    /// reach before the next read (half a ring or more behind the reader); counts
    /// them in `evicted`. False if the frame at `head` itself is still held (no
    /// buffer to evict it to).
    pub fn make_room(&mut self, head: usize, evicted: &Counter) -> bool {
        while let Some((frame, _)) = self.hold.due_for_eviction(head) {
            if !self.evict(frame) {
                break;
            }
            evicted.inc();
        }
        !self.hold.is_held(head)
    }

    /// Before sleeping until the ring at `head` gets a frame: the kernel reports the
    /// ring readable while the frame it wrote last is not handed back, so that one
    /// must not stay held.
    pub fn before_rx_wait(&mut self, head: usize, frame_nr: usize, evicted: &Counter) {
        let last = (head + frame_nr - 1) % frame_nr;
        if self.hold.is_held(last) && self.evict(last as u32) {
            evicted.inc();
        }
    }

    #[inline]
    fn enqueue(&mut self, p: Pkt) {
        if self.emu.cfg.reorder {
            self.heap.push(Reverse(p));
        } else {
            self.fifo.push_back(p);
        }
    }

    /// Overload guard: true when the oldest due packet is more than
    /// `max_late` overdue (the emulator itself cannot keep up).
    #[inline]
    fn overloaded(&self, now: u64, max_late: u64) -> bool {
        max_late > 0 && self.next_deadline().saturating_add(max_late) < now
    }

    /// Run the pipeline on one received frame and enqueue the resulting copies.
    /// `at` = (ring frame, offset of the frame in it). A single copy is written in
    /// place and kept in the ring (returns true: the caller must not hand the frame
    /// back); duplicates are copied into the pool.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn ingest(&mut self, t: u64, frame: &mut [u8], vnet: Option<&mut [u8]>, at: (usize, usize), csum_not_ready: bool, v6: bool,
              ip_len: u32, payload_off: u32) -> bool {
        if frame.len() > SLOT - VNET_HDR_LEN {
            self.stats.pool_dropped.inc();
            return false;
        }
        // the queue as it is at this arrival
        self.release_due(t);
        let mut out = [Copy::default(); 2];
        let payload_len = (ip_len + ETH_HLEN as u32).saturating_sub(payload_off);
        let n = self.emu.process(t, frame.len() as u32, ip_len, payload_len, &self.stats, &mut out);
        // the checksum the sender left to the NIC, read before the vnet header is rewritten
        let partial = match &vnet {
            Some(v) if v[0] & VIRTIO_NET_HDR_F_NEEDS_CSUM != 0 => {
                Some((u16::from_le_bytes([v[6], v[7]]) as usize, u16::from_le_bytes([v[8], v[9]]) as usize))
            }
            Some(_) => None,
            None if csum_not_ready => l4_csum_location(frame, v6),
            None => None,
        };
        let len = frame.len() as u32;
        let keep = n == 1 && at.1 >= VNET_HDR_LEN && (vnet.is_some() || !self.tx.vnet);
        if keep {
            let c = out[0];
            prepare(frame, vnet, &self.egress_mac, &self.peer_mac, self.tx.vnet, c.corrupt_bit, partial, v6, payload_off);
            self.hold.take(at.0, self.seq, at.1 - VNET_HDR_LEN, frame.len() + VNET_HDR_LEN);
            let p = Pkt { send_at: c.send_at, seq: self.seq, slot: at.0 as u32, len, nseg: 1, loc: Loc::Ring, wire: len };
            self.seq += 1;
            if c.held.is_none() {
                self.stats.queue_delay.record_ns(c.queue_delay);
            }
            self.place(&c, p);
            return true;
        }
        for c in out.iter().take(n) {
            let Some(slot) = self.pool.alloc() else {
                self.stats.pool_dropped.inc();
                continue;
            };
            let buf = self.pool.slot(slot);
            let (hdr, body) = buf.split_at_mut(VNET_HDR_LEN);
            let f = &mut body[..frame.len()];
            f.copy_from_slice(frame);
            prepare(f, Some(hdr), &self.egress_mac, &self.peer_mac, self.tx.vnet, c.corrupt_bit, partial, v6, payload_off);
            let p = Pkt { send_at: c.send_at, seq: self.seq, slot, len, nseg: 1, loc: Loc::Pool, wire: len };
            self.seq += 1;
            if c.held.is_none() {
                self.stats.queue_delay.record_ns(c.queue_delay);
            }
            self.place(c, p);
        }
        false
    }

    /// A GSO super-frame: the pipeline runs once per wire segment; runs of
    /// consecutive, unaltered segments leaving within `gro_window_ns` of each
    /// other go out as one GSO frame at the time of the run's last segment,
    /// everything else as single packets. When the whole super-frame is one run it
    /// is written in place and kept in the ring (returns Some(true)); otherwise the
    /// runs are copied into the pool (Some(false)). None if the frame cannot be cut
    /// (the caller counts it).
    fn ingest_gso(&mut self, t: u64, frame: &mut [u8], vnet: &mut [u8], at: (usize, usize), v6: bool) -> Option<bool> {
        let g = Gso::parse(frame, vnet)?;
        let ip_hlen = (g.l4off - ETH_HLEN) as u32;
        self.release_due(t);
        self.scratch.clear();
        let mut out = [Copy::default(); 2];
        for s in 0..g.nseg {
            let flen = g.run_len(s, s + 1) as u32;
            let ip_len = flen - ETH_HLEN as u32;
            let n = self.emu.process(t, flen, ip_len, ip_len - ip_hlen, &self.stats, &mut out);
            for c in out.iter().take(n) {
                if c.held.is_none() {
                    self.stats.queue_delay.record_ns(c.queue_delay);
                }
                self.scratch.push((s as u32, *c));
            }
        }
        let tx_vnet = self.tx.vnet;
        let mut k = 0;
        while k < self.scratch.len() {
            let (s0, c0) = self.scratch[k];
            // extend the run: next segment, first copy, no corruption, in time (a
            // segment the bottleneck holds, CoDel, leaves alone at its own time)
            let mut e = k + 1;
            if tx_vnet && c0.corrupt_bit.is_none() && c0.held.is_none() {
                while e < self.scratch.len() {
                    let (s, c) = self.scratch[e];
                    if s != self.scratch[e - 1].0 + 1 || c.corrupt_bit.is_some() || c.held.is_some()
                        || c.send_at < self.scratch[e - 1].1.send_at || c.send_at - c0.send_at > self.gro_window_ns {
                        break;
                    }
                    e += 1;
                }
            }
            let (i, j) = (s0 as usize, self.scratch[e - 1].0 as usize + 1);
            let send_at = self.scratch[e - 1].1.send_at;
            let corrupt = c0.corrupt_bit; // a corrupted segment never starts a longer run
            let wire = (g.run_len(i, j) + (j - i - 1) * g.hlen) as u32;
            if k == 0 && e == self.scratch.len() && i == 0 && j == g.nseg && corrupt.is_none() && tx_vnet && at.1 >= VNET_HDR_LEN {
                // the whole super-frame leaves as it came: write it in place
                g.finish_run(frame, vnet, 0, g.nseg);
                rewrite(frame, &self.egress_mac, &self.peer_mac, v6);
                self.hold.take(at.0, self.seq, at.1 - VNET_HDR_LEN, frame.len() + VNET_HDR_LEN);
                let p = Pkt { send_at, seq: self.seq, slot: at.0 as u32, len: frame.len() as u32, nseg: g.nseg as u16, loc: Loc::Ring, wire };
                self.seq += 1;
                self.place(&c0, p);
                return Some(true);
            }
            let big = g.run_len(i, j) + VNET_HDR_LEN > SLOT;
            let alloc = if big { self.big.alloc() } else { self.pool.alloc() };
            let Some(slot) = alloc else {
                self.stats.pool_dropped.add((j - i) as u64);
                k = e;
                continue;
            };
            let buf = if big { self.big.slot(slot) } else { self.pool.slot(slot) };
            let len = g.write(frame, i, j, buf);
            let (hdr, body) = buf.split_at_mut(VNET_HDR_LEN);
            let f = &mut body[..len];
            rewrite(f, &self.egress_mac, &self.peer_mac, v6);
            if !tx_vnet || corrupt.is_some() {
                let (start, off) = g.csum_location();
                complete_partial_csum(f, start, off);
                hdr.fill(0);
            }
            if let Some(bit) = corrupt {
                flip_bit(f, g.l4off, bit);
            }
            let loc = if big { Loc::Big } else { Loc::Pool };
            let p = Pkt { send_at, seq: self.seq, slot, len: len as u32, nseg: (j - i) as u16, loc, wire };
            self.seq += 1;
            self.place(&c0, p);
            k = e;
        }
        Some(false)
    }
}

/// Make a received frame the one to send: router rewrite, the vnet header
/// (only the NEEDS_CSUM offload, no GSO: a single packet), the checksum completed
/// in software where the receiver cannot be left to do it, corruption last.
#[inline]
#[allow(clippy::too_many_arguments)]
fn prepare(f: &mut [u8], hdr: Option<&mut [u8]>, egress_mac: &[u8; 6], peer_mac: &[u8; 6], tx_vnet: bool, corrupt: Option<u32>,
           partial: Option<(usize, usize)>, v6: bool, payload_off: u32) {
    rewrite(f, egress_mac, peer_mac, v6);
    let mut offload = None;
    if let Some((start, off)) = partial {
        if tx_vnet && corrupt.is_none() {
            offload = Some((start, off));
        } else {
            complete_partial_csum(f, start, off);
        }
    }
    if let Some(h) = hdr {
        h.fill(0);
        if let Some((start, off)) = offload {
            h[0] = VIRTIO_NET_HDR_F_NEEDS_CSUM;
            h[6..8].copy_from_slice(&(start as u16).to_le_bytes());
            h[8..10].copy_from_slice(&(off as u16).to_le_bytes());
        }
    }
    if let Some(bit) = corrupt {
        flip_bit(f, payload_off as usize, bit);
    }
}

/// Corruption: flip bit `bit` of the IP payload starting at `payload_off`.
#[inline]
fn flip_bit(f: &mut [u8], payload_off: usize, bit: u32) {
    let pos = payload_off + (bit / 8) as usize;
    if pos < f.len() {
        f[pos] ^= 1 << (bit % 8);
    }
}

pub struct Engine {
    pub ports: Vec<Port>,
    pub dirs: Vec<Dir>,
    pub shared: Arc<Shared>,
    pub timing: TimingOpts,
    pub ts: Arc<TimingStats>,
    wake_fd: i32,
    timer_fd: i32,
}

fn timerfd_set_abs(fd: i32, t: u64) {
    let its = libc::itimerspec {
        it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
        it_value: libc::timespec { tv_sec: (t / 1_000_000_000) as i64, tv_nsec: (t % 1_000_000_000) as i64 },
    };
    unsafe { libc::timerfd_settime(fd, libc::TFD_TIMER_ABSTIME, &its, std::ptr::null_mut()) };
}

impl Engine {
    pub fn new(ports: Vec<Port>, dirs: Vec<Dir>, shared: Arc<Shared>, timing: TimingOpts) -> Engine {
        let wake_fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        let timer_fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        {
            let mut w = shared.wake_fds.lock().unwrap();
            if w.len() < SIG_WAKE_FDS.len() {
                SIG_WAKE_FDS[w.len()].store(wake_fd, Ordering::SeqCst);
            }
            w.push(wake_fd);
        }
        let ts = Arc::new(TimingStats::default());
        shared.timing.lock().unwrap().push(ts.clone());
        Engine { ports, dirs, shared, timing, ts, wake_fd, timer_fd }
    }

    fn apply_pending(&mut self, now: u64) {
        for d in self.dirs.iter_mut() {
            let g = self.shared.req_gen[d.idx].load(Ordering::Acquire);
            if g != d.seen_gen {
                if let Some((cfg, seed)) = self.shared.pending[d.idx].lock().unwrap().take() {
                    d.emu.reconfigure(cfg, seed, now);
                }
                d.seen_gen = g;
                self.shared.done_gen[d.idx].store(g, Ordering::Release);
            }
        }
    }

    /// A new frame waits in one of the rings (not one of our own kept ones).
    #[inline]
    fn rx_ready(&self) -> bool {
        self.ports.iter().zip(self.dirs.iter()).any(|(p, d)| p.rx.ready() && !d.holds(p.rx.head()))
    }

    fn min_delay(&self) -> u64 {
        self.dirs.iter().map(|d| d.emu.cfg.min_delay_ns()).min().unwrap_or(0)
    }

    pub fn run(&mut self) {
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0) };
        let mut local = LocalAddrs::read();
        let mut real_off = clock_ns(libc::CLOCK_REALTIME) as i128 - mono_ns() as i128;
        let mut next_house = mono_ns() + 100_000_000;
        let mut next_addr = mono_ns() + 1_000_000_000;
        let mut last_wake = 0u64;
        let mut armed = 0u64; // absolute timerfd expiry currently programmed (0 = none)
        // Adaptive spin: EWMA of timer lateness (ns, x16 fixed point) and the
        // spin time used in the current 100 ms budget window.
        let mut late_ewma16: u64 = 20_000 * 16;
        let mut spun_window: u64 = 0;
        let spin_budget = self.timing.spin_budget_pct * 1_000_000; // ns per 100 ms
        let mut dmin = self.min_delay();
        let max_late = self.timing.max_late_ns;
        let nports = self.ports.len();
        let ts = self.ts.clone();
        let mut pfds: Vec<libc::pollfd> = Vec::with_capacity(nports + 2);
        loop {
            if self.shared.stop.load(Ordering::Relaxed) || STOP.load(Ordering::Relaxed) {
                break;
            }
            ts.loops.inc();
            let now = mono_ns();
            if self.dirs.iter().any(|d| self.shared.req_gen[d.idx].load(Ordering::Relaxed) != d.seen_gen) {
                self.apply_pending(now);
                dmin = self.min_delay();
            }
            // ---- receive -----------------------------------------------------
            for pi in 0..nports {
                let mut got = 0u64;
                let port = &mut self.ports[pi];
                let dir = &mut self.dirs[pi];
                while got < 1024 {
                    let head = port.rx.head();
                    if !dir.make_room(head, &port.stats.rx_evicted) {
                        break; // our own packet still sits where the kernel writes next
                    }
                    let Some(fr) = port.rx.peek() else { break };
                    got += 1;
                    let mut kept = false;
                    if (fr.snaplen as usize) < fr.len as usize {
                        port.stats.rx_truncated.inc();
                    } else {
                        match classify(fr.data, &port.mac, &local) {
                            Class::Ignore => port.stats.rx_ignored.inc(),
                            Class::TtlExceeded => dir.stats.ttl_dropped.inc(),
                            Class::Forward { v6, ip_len, payload_off } => {
                                // Kernel receive timestamp (CLOCK_REALTIME) -> MONOTONIC.
                                let rt = fr.sec as i128 * 1_000_000_000 + fr.nsec as i128;
                                let mut t = (rt - real_off) as u64;
                                if t > now || t + 1_000_000_000 < now {
                                    t = now;
                                }
                                let at = (head, fr.mac);
                                let gso = fr.vnet.as_ref().is_some_and(|v| v[1] != 0); // gso_type != NONE
                                if dir.overloaded(now, max_late) {
                                    let segs = match &fr.vnet {
                                        Some(v) if gso => Gso::parse(fr.data, v).map(|g| g.nseg as u64).unwrap_or(1),
                                        _ => 1,
                                    };
                                    dir.stats.received.add(segs);
                                    dir.stats.bytes_in.add(fr.data.len() as u64);
                                    dir.stats.late_dropped.add(segs);
                                } else if gso {
                                    let v = fr.vnet.unwrap();
                                    match dir.ingest_gso(t, fr.data, v, at, v6) {
                                        Some(k) => kept = k,
                                        None => port.stats.rx_truncated.inc(),
                                    }
                                } else {
                                    let csum_not_ready = fr.status & TP_STATUS_CSUMNOTREADY != 0;
                                    kept = dir.ingest(t, fr.data, fr.vnet, at, csum_not_ready, v6, ip_len, payload_off);
                                }
                            }
                        }
                    }
                    if kept {
                        port.stats.rx_kept.inc();
                        port.rx.skip();
                    } else {
                        port.rx.release();
                    }
                }
                if got > 0 {
                    port.stats.rx_frames.add(got);
                    ts.rx_batches.inc();
                    ts.rx_packets.add(got);
                }
            }
            // ---- dequeue (CoDel) and transmit ---------------------------------
            let now = mono_ns();
            for d in self.dirs.iter_mut() {
                d.release_due(now);
                d.transmit_due(now, &ts);
            }
            // ---- housekeeping ------------------------------------------------
            if now >= next_house {
                next_house = now + 100_000_000;
                spun_window = 0;
                real_off = clock_ns(libc::CLOCK_REALTIME) as i128 - mono_ns() as i128;
                for p in self.ports.iter() {
                    p.stats.ring_drops.add(p.rx.drops());
                }
                if now >= next_addr {
                    next_addr = now + 1_000_000_000;
                    local = LocalAddrs::read();
                }
            }
            // ---- wait ------------------------------------------------------------
            let next = self.dirs.iter().map(|d| d.next_deadline()).min().unwrap_or(u64::MAX);
            let now = mono_ns();
            if next <= now || self.rx_ready() {
                continue;
            }
            if self.timing.mode == Mode::Busy {
                std::hint::spin_loop();
                continue;
            }
            let mut target = next;
            if target != u64::MAX && self.timing.coalesce_ns > 0 {
                target = target.max(last_wake + self.timing.coalesce_ns);
            }
            // Skip watching the rings when no arrival could be due before our
            // next wake-up (deferral window <= half the minimum delay).
            let defer = self.timing.rx_defer && next != u64::MAX && dmin >= 200_000;
            let mut wake_at = target;
            if defer {
                let window = (dmin / 2).min(self.timing.max_defer_ns);
                wake_at = wake_at.min(now + window);
            }
            // Adaptive spin: only when we are about to sleep for a long time
            // (light load), sleep until `deadline - spin` and spin the rest, which
            // hides the wake-up-from-idle latency. Under load (next deadline close)
            // plain timer sleeps are used and `coalesce` bounds the wake-up rate.
            let spin = if self.timing.spin_ns == 0 || spun_window >= spin_budget {
                0
            } else {
                (late_ewma16 / 16 * 2 + 2_000).min(self.timing.spin_ns)
            };
            let spin_this = spin > 0 && wake_at == target && target != u64::MAX && target > now + spin + SPIN_MIN_SLEEP_NS;
            let sleep_until = if wake_at == u64::MAX { u64::MAX } else if spin_this { wake_at - spin } else { wake_at };
            let mut timer_fired = false;
            ts.sleeps.inc();
            if defer && sleep_until != u64::MAX {
                // Nothing to watch but the clock: one clock_nanosleep (hrtimer with
                // 1 ns slack). Control requests are picked up at the next wake-up
                // (<= max_defer); signals interrupt the sleep.
                let tsp = libc::timespec { tv_sec: (sleep_until / 1_000_000_000) as i64, tv_nsec: (sleep_until % 1_000_000_000) as i64 };
                let r = unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &tsp, std::ptr::null_mut()) };
                timer_fired = r == 0;
                if timer_fired {
                    ts.timer_wakeups.inc();
                }
            } else {
                if sleep_until != armed {
                    // (re-)arming also clears an expired timer's tick count
                    timerfd_set_abs(self.timer_fd, if sleep_until == u64::MAX { 0 } else { sleep_until });
                    armed = sleep_until;
                }
                for (d, p) in self.dirs.iter_mut().zip(self.ports.iter()) {
                    let (_, _, frame_nr) = p.rx.layout();
                    d.before_rx_wait(p.rx.head(), frame_nr, &p.stats.rx_evicted);
                }
                pfds.clear();
                pfds.push(libc::pollfd { fd: self.timer_fd, events: libc::POLLIN, revents: 0 });
                pfds.push(libc::pollfd { fd: self.wake_fd, events: libc::POLLIN, revents: 0 });
                for p in self.ports.iter() {
                    pfds.push(libc::pollfd { fd: p.rx.fd, events: libc::POLLIN, revents: 0 });
                }
                let r = unsafe { libc::ppoll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, std::ptr::null(), std::ptr::null()) };
                if r > 0 {
                    if pfds[0].revents != 0 {
                        ts.timer_wakeups.inc();
                        timer_fired = true;
                        armed = 0; // expired: must be re-armed (which resets it)
                    } else if pfds[2..].iter().any(|p| p.revents != 0) {
                        ts.rx_wakeups.inc();
                    }
                    if pfds[1].revents != 0 {
                        let mut buf = 0u64;
                        unsafe { libc::read(self.wake_fd, &mut buf as *mut u64 as *mut libc::c_void, 8) };
                    }
                }
            }
            let woke = mono_ns();
            ts.sleep_ns.add(woke - now);
            last_wake = woke;
            if timer_fired && sleep_until != u64::MAX {
                let late = woke.saturating_sub(sleep_until).min(1_000_000);
                late_ewma16 = late_ewma16 - late_ewma16 / 16 + late;
            }
            if spin_this && timer_fired {
                // finish the last `spin` ns by spinning
                let t0 = mono_ns();
                while mono_ns() < wake_at && (defer || !self.rx_ready()) {
                    std::hint::spin_loop();
                }
                let spun = mono_ns() - t0;
                spun_window += spun;
                ts.spin_ns.add(spun);
            }
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        unsafe {
            libc::close(self.timer_fd);
        }
    }
}
