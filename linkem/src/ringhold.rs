//! Packets kept in the RX ring while they wait out their delay.
//!
//! A forwarded frame is normally written once, in place, in the RX ring frame the
//! kernel put it in (MAC rewrite, TTL, vnet header) and sent from there: the ring
//! frame is handed back to the kernel only when the packet has left. That saves
//! copying every packet into a buffer of our own (one memcpy per byte, most of
//! linkem's user-space time with offloads on).
//!
//! The kernel fills a TPACKET_V2 ring in order and stops (drops) at the first frame
//! user space has not handed back, so a frame must not stay in the ring until the
//! kernel comes round to it again. A held frame that is half a ring behind the
//! reader (the kernel has written half a ring of frames since) is therefore
//! *evicted*: copied into a buffer of the pool and its ring frame handed back. The
//! packet keeps its place in the delay line; where its bytes are is looked up here
//! by its sequence number. With short delays nothing is evicted; with long ones
//! (more than half a ring of frames in flight) the packets that stay long are copied
//! once, as before.

use crate::afpacket::TP_STATUS_KERNEL;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU32, Ordering};

/// Where the bytes of a held packet are now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// Still in the ring, starting at this address.
    Ring(*mut u8),
    /// Copied out into a pool slot (`big`: the big pool).
    Pool { slot: u32, big: bool },
}

/// One ring frame held by a packet: its sequence number and the span of the
/// ring frame holding [vnet header][frame].
#[derive(Clone, Copy, Debug)]
struct Holder {
    seq: u64,
    off: u32,
    len: u32,
}

pub struct RingHold {
    base: *mut u8,
    frame_size: usize,
    frame_nr: usize,
    holder: Vec<Option<Holder>>,
    /// Frames in the order they were taken (the ring's order); entries whose frame
    /// was released meanwhile are skipped lazily.
    order: VecDeque<(u32, u64)>,
    /// Evicted packets, by sequence number: their pool slot.
    evicted: HashMap<u64, (u32, bool)>,
    /// Frames held now.
    pub held: usize,
}

unsafe impl Send for RingHold {}

impl RingHold {
    /// `base`: the ring's mapping (frames of `frame_size` bytes, each starting with
    /// its tpacket header's status word).
    pub fn new(base: *mut u8, frame_size: usize, frame_nr: usize) -> RingHold {
        RingHold {
            base,
            frame_size,
            frame_nr,
            holder: vec![None; frame_nr],
            order: VecDeque::with_capacity(frame_nr),
            evicted: HashMap::new(),
            held: 0,
        }
    }

    #[inline]
    pub fn is_held(&self, frame: usize) -> bool {
        self.holder[frame].is_some()
    }

    /// The packet `seq` keeps ring frame `frame`: bytes [off, off + len) of it are
    /// its [vnet header][frame]. The reader moves on without handing the frame back.
    #[inline]
    pub fn take(&mut self, frame: usize, seq: u64, off: usize, len: usize) {
        debug_assert!(self.holder[frame].is_none() && off + len <= self.frame_size);
        self.holder[frame] = Some(Holder { seq, off: off as u32, len: len as u32 });
        self.order.push_back((frame as u32, seq));
        self.held += 1;
    }

    /// Where the bytes of packet `seq`, taken from `frame`, are now.
    #[inline]
    pub fn place(&self, frame: u32, seq: u64) -> Place {
        match self.holder[frame as usize] {
            Some(h) if h.seq == seq => Place::Ring(unsafe { self.frame_ptr(frame as usize).add(h.off as usize) }),
            _ => {
                let (slot, big) = self.evicted[&seq];
                Place::Pool { slot, big }
            }
        }
    }

    /// The packet has left (or was dropped): hand its ring frame back, or return the
    /// pool slot it was evicted to, for the caller to free.
    #[inline]
    pub fn release(&mut self, frame: u32, seq: u64) -> Option<(u32, bool)> {
        match self.holder[frame as usize] {
            Some(h) if h.seq == seq => {
                self.give_back(frame as usize);
                None
            }
            _ => self.evicted.remove(&seq),
        }
    }

    /// The next held frame that must leave the ring before the reader at `head`
    /// goes on: one half a ring or more behind it. Returns (frame, its bytes).
    pub fn due_for_eviction(&mut self, head: usize) -> Option<(u32, &[u8])> {
        while let Some(&(f, seq)) = self.order.front() {
            let h = match self.holder[f as usize] {
                Some(h) if h.seq == seq => h,
                _ => {
                    self.order.pop_front(); // released meanwhile
                    continue;
                }
            };
            let behind = (head + self.frame_nr - f as usize) % self.frame_nr;
            if behind != 0 && behind < self.frame_nr / 2 {
                return None;
            }
            let p = unsafe { self.frame_ptr(f as usize).add(h.off as usize) };
            return Some((f, unsafe { std::slice::from_raw_parts(p, h.len as usize) }));
        }
        None
    }

    /// The bytes of held frame `frame` ([vnet header][frame]), if it is held.
    pub fn bytes(&self, frame: usize) -> Option<&[u8]> {
        let h = self.holder[frame]?;
        Some(unsafe { std::slice::from_raw_parts(self.frame_ptr(frame).add(h.off as usize), h.len as usize) })
    }

    /// The held frame `frame` was copied into `slot`: hand it back to the kernel.
    pub fn evicted(&mut self, frame: u32, slot: u32, big: bool) {
        let h = self.holder[frame as usize].expect("evicting a frame not held");
        self.evicted.insert(h.seq, (slot, big));
        self.give_back(frame as usize);
    }

    #[inline]
    fn give_back(&mut self, frame: usize) {
        self.holder[frame] = None;
        self.held -= 1;
        let status = unsafe { &*(self.frame_ptr(frame) as *const AtomicU32) };
        status.store(TP_STATUS_KERNEL, Ordering::Release);
    }

    #[inline]
    unsafe fn frame_ptr(&self, frame: usize) -> *mut u8 {
        unsafe { self.base.add(frame * self.frame_size) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::afpacket::TP_STATUS_USER;

    /// A fake ring: `n` frames of 256 bytes, status words set to "user".
    fn ring(n: usize) -> Vec<u32> {
        vec![TP_STATUS_USER; n * 64].iter().enumerate().map(|(i, &s)| if i % 64 == 0 { s } else { i as u32 }).collect()
    }

    fn status(mem: &[u32], frame: usize) -> u32 {
        mem[frame * 64]
    }

    #[test]
    fn release_hands_the_frame_back_and_eviction_keeps_the_bytes() {
        let mut mem = ring(8);
        let mut h = RingHold::new(mem.as_mut_ptr() as *mut u8, 256, 8);
        h.take(0, 100, 16, 32);
        h.take(1, 101, 16, 32);
        assert_eq!(h.held, 2);
        assert!(matches!(h.place(0, 100), Place::Ring(p) if p == unsafe { (mem.as_mut_ptr() as *mut u8).add(16) }));
        assert_eq!(h.release(0, 100), None);
        assert_eq!(status(&mem, 0), TP_STATUS_KERNEL);
        assert_eq!(status(&mem, 1), TP_STATUS_USER);
        // reader at 4: frame 1 is 3 behind, less than half of 8
        assert!(h.due_for_eviction(4).is_none());
        // reader at 5: 4 behind, half the ring: out it goes, with its bytes
        let (f, bytes) = h.due_for_eviction(5).unwrap();
        assert_eq!((f, bytes.len()), (1, 32));
        assert_eq!(&bytes[..4], &(64u32 + 4).to_ne_bytes()); // word 68 of the fake ring
        h.evicted(1, 7, false);
        assert_eq!(status(&mem, 1), TP_STATUS_KERNEL);
        assert_eq!(h.held, 0);
        // the kernel reuses frame 1 for another packet, which we keep too
        mem[64] = TP_STATUS_USER;
        h.take(1, 109, 16, 32);
        assert_eq!(h.place(1, 101), Place::Pool { slot: 7, big: false });
        assert!(matches!(h.place(1, 109), Place::Ring(_)));
        assert_eq!(h.release(1, 101), Some((7, false)));
        assert_eq!(status(&mem, 1), TP_STATUS_USER, "the newer holder keeps the frame");
        assert_eq!(h.release(1, 109), None);
        assert_eq!(status(&mem, 1), TP_STATUS_KERNEL);
        assert!(h.due_for_eviction(0).is_none());
    }

    #[test]
    fn the_frame_at_the_reader_is_always_evicted() {
        let mut mem = ring(8);
        let mut h = RingHold::new(mem.as_mut_ptr() as *mut u8, 256, 8);
        h.take(3, 1, 16, 32);
        // the reader went round the ring and is at frame 3 again
        assert_eq!(h.due_for_eviction(3).map(|x| x.0), Some(3));
        assert!(h.is_held(3));
    }
}
