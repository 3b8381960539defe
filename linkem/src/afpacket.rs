//! AF_PACKET plumbing: a TPACKET_V2 mmap'ed RX ring per interface and a
//! separate non-receiving TX socket per interface used with sendmmsg().
//! Both use PACKET_VNET_HDR when available so that checksum-offloaded frames
//! (CHECKSUM_PARTIAL from the veth peer) keep their offload state end to end.

use std::ffi::CString;
use std::io;
use std::sync::atomic::{AtomicU32, Ordering};

pub const ETH_P_ALL: u16 = 0x0003;
const PACKET_RX_RING: libc::c_int = 5;
const PACKET_STATISTICS: libc::c_int = 6;
const PACKET_VERSION: libc::c_int = 10;
const PACKET_QDISC_BYPASS: libc::c_int = 20;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const PACKET_VNET_HDR: libc::c_int = 15;
const TPACKET_V2: libc::c_int = 1;

pub const TP_STATUS_KERNEL: u32 = 0;
pub const TP_STATUS_USER: u32 = 1;
pub const TP_STATUS_CSUMNOTREADY: u32 = 8;

pub const VNET_HDR_LEN: usize = 10;
pub const VIRTIO_NET_HDR_F_NEEDS_CSUM: u8 = 1;

#[repr(C)]
pub struct Tpacket2Hdr {
    pub tp_status: u32,
    pub tp_len: u32,
    pub tp_snaplen: u32,
    pub tp_mac: u16,
    pub tp_net: u16,
    pub tp_sec: u32,
    pub tp_nsec: u32,
    pub tp_vlan_tci: u16,
    pub tp_vlan_tpid: u16,
    pub tp_padding: [u8; 4],
}

#[repr(C)]
struct TpacketReq {
    tp_block_size: u32,
    tp_block_nr: u32,
    tp_frame_size: u32,
    tp_frame_nr: u32,
}

#[repr(C)]
#[derive(Default)]
struct TpacketStats {
    tp_packets: u32,
    tp_drops: u32,
}

fn last_err(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{}: {}", what, e))
}

fn setsockopt_int(fd: i32, level: i32, opt: i32, val: i32) -> libc::c_int {
    unsafe {
        libc::setsockopt(fd, level, opt, &val as *const i32 as *const libc::c_void, std::mem::size_of::<i32>() as u32)
    }
}

pub struct IfInfo {
    pub name: String,
    pub index: i32,
    pub mac: [u8; 6],
}

pub fn if_info(name: &str) -> io::Result<IfInfo> {
    let c = CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "bad name"))?;
    let index = unsafe { libc::if_nametoindex(c.as_ptr()) } as i32;
    if index == 0 {
        return Err(io::Error::new(io::ErrorKind::NotFound, format!("interface {} not found", name)));
    }
    let path = format!("/sys/class/net/{}/address", name);
    let s = std::fs::read_to_string(&path)?;
    let mac = parse_mac(s.trim()).ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("bad MAC in {}", path)))?;
    Ok(IfInfo { name: name.to_string(), index, mac })
}

pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return None;
    }
    let mut m = [0u8; 6];
    for (i, p) in parts.iter().enumerate() {
        if p.is_empty() || p.len() > 2 {
            return None;
        }
        m[i] = u8::from_str_radix(p, 16).ok()?;
    }
    Some(m)
}

fn sockaddr_ll(ifindex: i32, proto: u16) -> libc::sockaddr_ll {
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = proto.to_be();
    sll.sll_ifindex = ifindex;
    sll
}

pub struct RxRing {
    pub fd: i32,
    map: *mut u8,
    map_len: usize,
    frame_size: usize,
    frame_nr: usize,
    head: usize,
    pub vnet: bool,
}

unsafe impl Send for RxRing {}

pub struct RxFrame<'a> {
    pub data: &'a mut [u8],
    /// The virtio_net_hdr preceding the frame (when vnet is on).
    pub vnet: Option<&'a mut [u8]>,
    /// Offset of `data` in its ring frame (the vnet header, if any, is just before it).
    pub mac: usize,
    pub len: u32,
    pub snaplen: u32,
    pub status: u32,
    pub sec: u32,
    pub nsec: u32,
}

impl RxRing {
    /// `frame_size`: 2048 for MTU-sized frames, or a multiple of the page size
    /// large enough for a GSO super-frame (`--gso`).
    pub fn open(ifindex: i32, frame_nr: usize, frame_size: usize, want_vnet: bool) -> io::Result<RxRing> {
        // Protocol 0 at creation: receive nothing until bound to our interface.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(last_err("socket(AF_PACKET)"));
        }
        let close_err = |e: io::Error| {
            unsafe { libc::close(fd) };
            e
        };
        if setsockopt_int(fd, libc::SOL_PACKET, PACKET_VERSION, TPACKET_V2) != 0 {
            return Err(close_err(last_err("PACKET_VERSION")));
        }
        if setsockopt_int(fd, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1) != 0 {
            return Err(close_err(last_err("PACKET_IGNORE_OUTGOING")));
        }
        let vnet = want_vnet && setsockopt_int(fd, libc::SOL_PACKET, PACKET_VNET_HDR, 1) == 0;
        // a block holds whole frames and is a multiple of the page size; the kernel
        // allocates each block as a power of two of pages, so big frames fill 2 MiB
        let block_size = if frame_size <= 4096 { 1usize << 20 } else { ((2usize << 20) / frame_size).max(1) * frame_size };
        let frames_per_block = block_size / frame_size;
        let block_nr = frame_nr.div_ceil(frames_per_block);
        let frame_nr = block_nr * frames_per_block;
        let req = TpacketReq {
            tp_block_size: block_size as u32,
            tp_block_nr: block_nr as u32,
            tp_frame_size: frame_size as u32,
            tp_frame_nr: frame_nr as u32,
        };
        let r = unsafe {
            libc::setsockopt(fd, libc::SOL_PACKET, PACKET_RX_RING, &req as *const TpacketReq as *const libc::c_void,
                std::mem::size_of::<TpacketReq>() as u32)
        };
        if r != 0 {
            return Err(close_err(last_err("PACKET_RX_RING")));
        }
        let map_len = block_size * block_nr;
        let map = unsafe {
            libc::mmap(std::ptr::null_mut(), map_len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED | libc::MAP_POPULATE, fd, 0)
        };
        if map == libc::MAP_FAILED {
            return Err(close_err(last_err("mmap rx ring")));
        }
        let sll = sockaddr_ll(ifindex, ETH_P_ALL);
        let r = unsafe {
            libc::bind(fd, &sll as *const libc::sockaddr_ll as *const libc::sockaddr, std::mem::size_of::<libc::sockaddr_ll>() as u32)
        };
        if r != 0 {
            unsafe { libc::munmap(map, map_len) };
            return Err(close_err(last_err("bind rx")));
        }
        Ok(RxRing { fd, map: map as *mut u8, map_len, frame_size, frame_nr, head: 0, vnet })
    }

    #[inline]
    fn hdr(&self, i: usize) -> *mut Tpacket2Hdr {
        unsafe { self.map.add(i * self.frame_size) as *mut Tpacket2Hdr }
    }

    #[inline]
    fn status_atomic(&self, i: usize) -> &AtomicU32 {
        unsafe { &*(self.hdr(i) as *const AtomicU32) }
    }

    /// True if the frame at the head of the ring belongs to user space.
    #[inline]
    pub fn ready(&self) -> bool {
        self.status_atomic(self.head).load(Ordering::Acquire) & TP_STATUS_USER != 0
    }

    /// The frame at the head, if ready, writable in place. Must be followed by
    /// `release()`, or `skip()` when the caller keeps the frame.
    #[inline]
    pub fn peek(&mut self) -> Option<RxFrame<'_>> {
        let st = self.status_atomic(self.head).load(Ordering::Acquire);
        if st & TP_STATUS_USER == 0 {
            return None;
        }
        unsafe {
            let h = &*self.hdr(self.head);
            let base = self.map.add(self.head * self.frame_size);
            let mac = h.tp_mac as usize;
            let snap = (h.tp_snaplen as usize).min(self.frame_size.saturating_sub(mac));
            let data = std::slice::from_raw_parts_mut(base.add(mac), snap);
            let vnet = if self.vnet && mac >= VNET_HDR_LEN {
                Some(std::slice::from_raw_parts_mut(base.add(mac - VNET_HDR_LEN), VNET_HDR_LEN))
            } else {
                None
            };
            Some(RxFrame { data, vnet, mac, len: h.tp_len, snaplen: h.tp_snaplen, status: st, sec: h.tp_sec, nsec: h.tp_nsec })
        }
    }

    #[inline]
    pub fn release(&mut self) {
        self.status_atomic(self.head).store(TP_STATUS_KERNEL, Ordering::Release);
        self.skip();
    }

    /// Move on without handing the head frame back (the caller keeps it, see ringhold).
    #[inline]
    pub fn skip(&mut self) {
        self.head += 1;
        if self.head == self.frame_nr {
            self.head = 0;
        }
    }

    /// Index of the head frame (the next one to read).
    #[inline]
    pub fn head(&self) -> usize {
        self.head
    }

    /// The mapping: (base, frame size, number of frames).
    pub fn layout(&self) -> (*mut u8, usize, usize) {
        (self.map, self.frame_size, self.frame_nr)
    }

    /// Kernel drop counter since the last call (PACKET_STATISTICS resets).
    pub fn drops(&self) -> u64 {
        let mut st = TpacketStats::default();
        let mut len = std::mem::size_of::<TpacketStats>() as libc::socklen_t;
        let r = unsafe {
            libc::getsockopt(self.fd, libc::SOL_PACKET, PACKET_STATISTICS, &mut st as *mut TpacketStats as *mut libc::c_void, &mut len)
        };
        if r == 0 { st.tp_drops as u64 } else { 0 }
    }
}

impl Drop for RxRing {
    fn drop(&mut self) {
        unsafe {
            libc::munmap(self.map as *mut libc::c_void, self.map_len);
            libc::close(self.fd);
        }
    }
}

pub struct TxSock {
    pub fd: i32,
    pub vnet: bool,
}

impl TxSock {
    pub fn open(ifindex: i32, want_vnet: bool) -> io::Result<TxSock> {
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(last_err("socket(AF_PACKET tx)"));
        }
        let vnet = want_vnet && setsockopt_int(fd, libc::SOL_PACKET, PACKET_VNET_HDR, 1) == 0;
        // Straight to the driver: the router's egress qdisc is not part of the model.
        setsockopt_int(fd, libc::SOL_PACKET, PACKET_QDISC_BYPASS, 1);
        setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, 16 << 20);
        // Protocol 0: this socket never receives.
        let sll = sockaddr_ll(ifindex, 0);
        let r = unsafe {
            libc::bind(fd, &sll as *const libc::sockaddr_ll as *const libc::sockaddr, std::mem::size_of::<libc::sockaddr_ll>() as u32)
        };
        if r != 0 {
            let e = last_err("bind tx");
            unsafe { libc::close(fd) };
            return Err(e);
        }
        Ok(TxSock { fd, vnet })
    }
}

impl Drop for TxSock {
    fn drop(&mut self) {
        unsafe { libc::close(self.fd) };
    }
}

/// Batch of frames for one sendmmsg() call.
pub struct TxBatch {
    msgs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
    pub n: usize,
}

unsafe impl Send for TxBatch {}

pub const TX_BATCH: usize = 64;

impl TxBatch {
    pub fn new() -> TxBatch {
        let msgs = (0..TX_BATCH).map(|_| unsafe { std::mem::zeroed::<libc::mmsghdr>() }).collect();
        let iovs = (0..TX_BATCH).map(|_| libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }).collect();
        TxBatch { msgs, iovs, n: 0 }
    }
    #[inline]
    pub fn push(&mut self, ptr: *const u8, len: usize) {
        self.iovs[self.n] = libc::iovec { iov_base: ptr as *mut libc::c_void, iov_len: len };
        self.n += 1;
    }
    /// Send frames [0, n). Returns Ok(number sent) (may be < n on EAGAIN).
    pub fn send(&mut self, fd: i32) -> Result<usize, i32> {
        for i in 0..self.n {
            let m = &mut self.msgs[i];
            m.msg_hdr.msg_iov = &mut self.iovs[i];
            m.msg_hdr.msg_iovlen = 1;
            m.msg_hdr.msg_name = std::ptr::null_mut();
            m.msg_hdr.msg_namelen = 0;
            m.msg_len = 0;
        }
        let r = unsafe { libc::sendmmsg(fd, self.msgs.as_mut_ptr(), self.n as u32, libc::MSG_DONTWAIT) };
        if r < 0 {
            return Err(io::Error::last_os_error().raw_os_error().unwrap_or(0));
        }
        Ok(r as usize)
    }
}
