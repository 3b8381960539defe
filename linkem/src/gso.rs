//! GSO super-frames (labs with offloads on, `linkem --gso`).
//!
//! With TSO/GSO on, an endpoint hands its veth one frame carrying up to 64 KiB
//! of TCP (or UDP, `UDP_SEGMENT`) payload plus a virtio_net_hdr that says how
//! it is to be cut: `gso_size` payload bytes per wire packet. The emulated wire
//! still carries those MTU-sized packets, so linkem runs its pipeline once per
//! *segment* (loss, queue, serialisation, delay, jitter) and then writes back
//! runs of consecutive segments that leave together as one frame, again with a
//! GSO header. A run delivered as one frame is what the receiver's GRO would
//! have merged; everything else leaves as single packets.
//!
//! `Gso::write` does for a run [i, j) what the kernel's `tcp_gso_segment()` /
//! `__udp_gso_segment()` do for one segment: IP length (and IPv4 ID + i,
//! header checksum), TCP sequence number + i × mss, CWR only in the first
//! segment, FIN/PSH only in the last, UDP length, and the L4 checksum left as
//! CHECKSUM_PARTIAL (pseudo-header sum in place, NEEDS_CSUM in the vnet header).

use crate::afpacket::{VIRTIO_NET_HDR_F_NEEDS_CSUM, VNET_HDR_LEN};
use crate::frame::{csum_add, csum_fold, ETH_HLEN};

#[cfg(test)]
pub const GSO_NONE: u8 = 0;
pub const GSO_TCPV4: u8 = 1;
pub const GSO_TCPV6: u8 = 4;
pub const GSO_UDP_L4: u8 = 5;
pub const GSO_ECN: u8 = 0x80;

const TCP_FIN: u8 = 0x01;
const TCP_PSH: u8 = 0x08;
const TCP_CWR: u8 = 0x80;

/// How one super-frame is cut into wire packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gso {
    pub v6: bool,
    pub tcp: bool,
    /// Offset of the L4 header in the frame (= the IP payload offset).
    pub l4off: usize,
    /// Length of all headers (Ethernet + IP + TCP/UDP).
    pub hlen: usize,
    /// Payload bytes per segment (the vnet header's gso_size).
    pub mss: usize,
    /// Payload bytes of the whole super-frame.
    pub payload: usize,
    pub nseg: usize,
    /// The vnet gso_type byte as received (with the ECN flag).
    gso_type: u8,
}

impl Gso {
    /// Parse a frame whose vnet header announces GSO. None for anything this
    /// code does not cut (IPv6 extension headers, UFO, a zero gso_size...).
    pub fn parse(frame: &[u8], vnet: &[u8]) -> Option<Gso> {
        let gso_type = vnet[1];
        let mss = u16::from_le_bytes([vnet[4], vnet[5]]) as usize;
        if mss == 0 || frame.len() < ETH_HLEN + 40 {
            return None;
        }
        let et = u16::from_be_bytes([frame[12], frame[13]]);
        let v6 = match et {
            0x0800 => false,
            0x86DD => true,
            _ => return None,
        };
        let tcp = match (gso_type & !GSO_ECN, v6) {
            (GSO_TCPV4, false) | (GSO_TCPV6, true) => true,
            (GSO_UDP_L4, _) => false,
            _ => return None,
        };
        let (proto, l4off) = if v6 {
            (frame[ETH_HLEN + 6], ETH_HLEN + 40)
        } else {
            (frame[ETH_HLEN + 9], ETH_HLEN + ((frame[ETH_HLEN] & 0x0f) as usize) * 4)
        };
        if proto != if tcp { 6 } else { 17 } {
            return None;
        }
        let l4len = if tcp {
            if frame.len() < l4off + 20 {
                return None;
            }
            ((frame[l4off + 12] >> 4) as usize) * 4
        } else {
            8
        };
        let hlen = l4off + l4len;
        if l4len < 8 || frame.len() <= hlen {
            return None;
        }
        let payload = frame.len() - hlen;
        Some(Gso { v6, tcp, l4off, hlen, mss, payload, nseg: payload.div_ceil(mss), gso_type })
    }

    /// Payload bytes of segments [i, j).
    #[inline]
    pub fn run_payload(&self, i: usize, j: usize) -> usize {
        (j * self.mss).min(self.payload) - i * self.mss
    }

    /// Frame length (Ethernet header included) of segments [i, j) as one frame.
    #[inline]
    pub fn run_len(&self, i: usize, j: usize) -> usize {
        self.hlen + self.run_payload(i, j)
    }

    /// Write segments [i, j) of `src` as one frame into `dst`, preceded by its
    /// virtio_net_hdr (`VNET_HDR_LEN` bytes). The L4 checksum is left partial
    /// (NEEDS_CSUM); a run of more than one segment keeps the GSO type and
    /// gso_size. Returns the frame length (without the vnet header).
    pub fn write(&self, src: &[u8], i: usize, j: usize, dst: &mut [u8]) -> usize {
        debug_assert!(i < j && j <= self.nseg);
        let start = self.hlen + i * self.mss;
        let plen = self.run_payload(i, j);
        let len = self.hlen + plen;
        let (hdr, body) = dst.split_at_mut(VNET_HDR_LEN);
        body[..self.hlen].copy_from_slice(&src[..self.hlen]);
        body[self.hlen..len].copy_from_slice(&src[start..start + plen]);
        self.finish_run(&mut body[..len], hdr, i, j);
        len
    }

    /// The headers of `f`, the frame of segments [i, j) with the super-frame's
    /// headers, as `write` leaves them, and its virtio_net_hdr in `hdr`. For the
    /// whole super-frame (i = 0, j = nseg) this works in place on the frame as received.
    pub fn finish_run(&self, f: &mut [u8], hdr: &mut [u8], i: usize, j: usize) {
        let len = f.len();
        let l4 = self.l4off;
        let l4len = len - l4;
        if self.v6 {
            let pl = (len - ETH_HLEN - 40) as u16;
            f[ETH_HLEN + 4..ETH_HLEN + 6].copy_from_slice(&pl.to_be_bytes());
        } else {
            let ip = ETH_HLEN;
            f[ip + 2..ip + 4].copy_from_slice(&((len - ETH_HLEN) as u16).to_be_bytes());
            let id = u16::from_be_bytes([f[ip + 4], f[ip + 5]]).wrapping_add(i as u16);
            f[ip + 4..ip + 6].copy_from_slice(&id.to_be_bytes());
            f[ip + 10..ip + 12].copy_from_slice(&[0, 0]);
            let c = !csum_fold(csum_add(0, &f[ip..l4]));
            f[ip + 10..ip + 12].copy_from_slice(&c.to_be_bytes());
        }
        let csum_off = if self.tcp {
            let seq = u32::from_be_bytes([f[l4 + 4], f[l4 + 5], f[l4 + 6], f[l4 + 7]]).wrapping_add((i * self.mss) as u32);
            f[l4 + 4..l4 + 8].copy_from_slice(&seq.to_be_bytes());
            if i > 0 {
                f[l4 + 13] &= !TCP_CWR;
            }
            if j < self.nseg {
                f[l4 + 13] &= !(TCP_FIN | TCP_PSH);
            }
            16
        } else {
            f[l4 + 4..l4 + 6].copy_from_slice(&(l4len as u16).to_be_bytes());
            6
        };
        // CHECKSUM_PARTIAL: the field holds the folded pseudo-header sum.
        let addrs = if self.v6 { &f[ETH_HLEN + 8..ETH_HLEN + 40] } else { &f[ETH_HLEN + 12..ETH_HLEN + 20] };
        let proto = if self.tcp { 6 } else { 17 };
        let pseudo = csum_fold(csum_add(0, addrs) + proto + l4len as u64);
        f[l4 + csum_off..l4 + csum_off + 2].copy_from_slice(&pseudo.to_be_bytes());
        hdr.fill(0);
        hdr[0] = VIRTIO_NET_HDR_F_NEEDS_CSUM;
        hdr[6..8].copy_from_slice(&(l4 as u16).to_le_bytes());
        hdr[8..10].copy_from_slice(&(csum_off as u16).to_le_bytes());
        if j - i > 1 {
            hdr[1] = self.gso_type;
            hdr[2..4].copy_from_slice(&(self.hlen as u16).to_le_bytes());
            hdr[4..6].copy_from_slice(&(self.mss as u16).to_le_bytes());
        }
    }

    /// Offset of the L4 checksum field (csum_start, csum_offset).
    pub fn csum_location(&self) -> (usize, usize) {
        (self.l4off, if self.tcp { 16 } else { 6 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{complete_partial_csum, ipv4_header_ok};

    /// A TCP/IPv4 or IPv6 super-frame as a TSO endpoint hands it out, with the
    /// partial checksum (pseudo-header sum over the whole length) in place.
    fn tcp_super(v6: bool, payload: usize, flags: u8) -> (Vec<u8>, [u8; 10]) {
        let iph = if v6 { 40 } else { 20 };
        let mut f = vec![0u8; 14 + iph + 32 + payload];
        f[12..14].copy_from_slice(if v6 { &[0x86, 0xdd] } else { &[0x08, 0x00] });
        let ip = 14;
        if v6 {
            f[ip] = 0x60;
            f[ip + 4..ip + 6].copy_from_slice(&((32 + payload) as u16).to_be_bytes());
            f[ip + 6] = 6;
            f[ip + 7] = 64;
            f[ip + 8] = 0xfd;
            f[ip + 23] = 1;
            f[ip + 24] = 0xfd;
            f[ip + 39] = 2;
        } else {
            f[ip] = 0x45;
            f[ip + 2..ip + 4].copy_from_slice(&((iph + 32 + payload) as u16).to_be_bytes());
            f[ip + 4..ip + 6].copy_from_slice(&0xfffeu16.to_be_bytes());
            f[ip + 8] = 64;
            f[ip + 9] = 6;
            f[ip + 12..ip + 16].copy_from_slice(&[10, 0, 0, 1]);
            f[ip + 16..ip + 20].copy_from_slice(&[10, 0, 1, 2]);
        }
        let l4 = ip + iph;
        f[l4 + 4..l4 + 8].copy_from_slice(&0xffff_f000u32.to_be_bytes()); // wraps
        f[l4 + 12] = 8 << 4;
        f[l4 + 13] = flags;
        for (k, b) in f[l4 + 32..].iter_mut().enumerate() {
            *b = (k * 7 + k / 251) as u8;
        }
        let mut v = [0u8; 10];
        v[0] = VIRTIO_NET_HDR_F_NEEDS_CSUM;
        v[1] = if v6 { GSO_TCPV6 } else { GSO_TCPV4 };
        v[4..6].copy_from_slice(&1448u16.to_le_bytes());
        (f, v)
    }

    /// Complete the partial checksum and verify it like a receiver would.
    fn l4_ok(f: &mut [u8], g: &Gso) -> bool {
        let (s, o) = g.csum_location();
        complete_partial_csum(f, s, o);
        let addrs = if g.v6 { &f[22..54] } else { &f[26..34] };
        let proto = if g.tcp { 6 } else { 17 };
        let sum = csum_add(0, addrs) + proto + (f.len() - g.l4off) as u64;
        csum_fold(csum_add(sum, &f[g.l4off..])) == 0xffff
    }

    #[test]
    fn tcp_segments_match_kernel_segmentation() {
        for v6 in [false, true] {
            let payload = 10 * 1448 + 100;
            let (src, v) = tcp_super(v6, payload, TCP_CWR | TCP_PSH | TCP_FIN | 0x10);
            let g = Gso::parse(&src, &v).unwrap();
            assert_eq!((g.nseg, g.mss, g.payload, g.hlen), (11, 1448, payload, g.l4off + 32));
            let mut data = Vec::new();
            let mut buf = vec![0u8; 70_000];
            for i in 0..g.nseg {
                let n = g.write(&src, i, i + 1, &mut buf);
                let (hdr, body) = buf.split_at_mut(VNET_HDR_LEN);
                let f = &mut body[..n];
                assert_eq!(hdr[1], GSO_NONE);
                assert_eq!(n, g.hlen + if i < 10 { 1448 } else { 100 });
                let l4 = g.l4off;
                let seq = u32::from_be_bytes(f[l4 + 4..l4 + 8].try_into().unwrap());
                assert_eq!(seq, 0xffff_f000u32.wrapping_add(i as u32 * 1448));
                let fl = f[l4 + 13];
                assert_eq!(fl & TCP_CWR != 0, i == 0, "CWR only first");
                assert_eq!(fl & (TCP_FIN | TCP_PSH) != 0, i == 10, "FIN/PSH only last");
                assert_eq!(fl & 0x10, 0x10, "ACK everywhere");
                if v6 {
                    assert_eq!(u16::from_be_bytes([f[18], f[19]]) as usize, n - 54);
                } else {
                    assert_eq!(u16::from_be_bytes([f[16], f[17]]) as usize, n - 14);
                    assert_eq!(u16::from_be_bytes([f[18], f[19]]), 0xfffeu16.wrapping_add(i as u16));
                    assert!(ipv4_header_ok(&f[14..]));
                }
                assert!(l4_ok(f, &g), "checksum of segment {}", i);
                data.extend_from_slice(&f[g.hlen..]);
            }
            assert_eq!(&data[..], &src[g.hlen..], "payload reassembles");
        }
    }

    #[test]
    fn runs_keep_gso_and_start_where_they_should() {
        let (src, v) = tcp_super(false, 20 * 1448, 0x18);
        let g = Gso::parse(&src, &v).unwrap();
        let mut buf = vec![0u8; 70_000];
        let n = g.write(&src, 3, 9, &mut buf);
        assert_eq!(n, g.hlen + 6 * 1448);
        assert_eq!(buf[1], GSO_TCPV4);
        assert_eq!(u16::from_le_bytes([buf[4], buf[5]]), 1448);
        assert_eq!(u16::from_le_bytes([buf[2], buf[3]]) as usize, g.hlen);
        let f = &mut buf[VNET_HDR_LEN..VNET_HDR_LEN + n];
        assert_eq!(&f[g.hlen..], &src[g.hlen + 3 * 1448..g.hlen + 9 * 1448]);
        assert_eq!(f[g.l4off + 13] & TCP_PSH, 0, "PSH belongs to the last segment");
        assert!(l4_ok(f, &g));
        // the whole frame as one run is the original, bit for bit, after checksumming
        let n = g.write(&src, 0, 20, &mut buf);
        let mut orig = src.clone();
        let mut out = buf[VNET_HDR_LEN..VNET_HDR_LEN + n].to_vec();
        let pseudo_len = (orig.len() - g.l4off) as u64;
        let pseudo = csum_fold(csum_add(0, &orig[26..34]) + 6 + pseudo_len);
        orig[g.l4off + 16..g.l4off + 18].copy_from_slice(&pseudo.to_be_bytes());
        orig[24..26].copy_from_slice(&[0, 0]);
        out[24..26].copy_from_slice(&[0, 0]);
        assert_eq!(out, orig);
    }

    #[test]
    fn udp_gso_segments_are_datagrams() {
        let payload = 5 * 1200 + 17;
        let mut f = vec![0u8; 14 + 20 + 8 + payload];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[14 + 8] = 64;
        f[14 + 9] = 17;
        f[14 + 12..14 + 20].copy_from_slice(&[10, 0, 0, 1, 10, 0, 1, 2]);
        for (k, b) in f[42..].iter_mut().enumerate() {
            *b = k as u8;
        }
        let mut v = [0u8; 10];
        v[1] = GSO_UDP_L4;
        v[4..6].copy_from_slice(&1200u16.to_le_bytes());
        let g = Gso::parse(&f, &v).unwrap();
        assert!(!g.tcp);
        assert_eq!(g.nseg, 6);
        let mut buf = vec![0u8; 70_000];
        for i in 0..6 {
            let n = g.write(&f, i, i + 1, &mut buf);
            let s = &mut buf[VNET_HDR_LEN..VNET_HDR_LEN + n];
            let dl = if i < 5 { 1200 } else { 17 };
            assert_eq!(u16::from_be_bytes([s[38], s[39]]) as usize, 8 + dl);
            assert_eq!(&s[42..], &f[42 + i * 1200..42 + i * 1200 + dl]);
            assert!(l4_ok(s, &g));
        }
        // UFO, unknown types, zero gso_size, v4 type on a v6 frame: not cut
        v[1] = 3;
        assert!(Gso::parse(&f, &v).is_none());
        v[1] = GSO_TCPV4;
        assert!(Gso::parse(&f, &v).is_none(), "UDP frame announced as TCP");
        v[1] = GSO_UDP_L4;
        v[4..6].copy_from_slice(&[0, 0]);
        assert!(Gso::parse(&f, &v).is_none());
        let (t6, mut v6) = tcp_super(true, 3000, 0x10);
        v6[1] = GSO_TCPV4;
        assert!(Gso::parse(&t6, &v6).is_none());
    }
}
