//! Frame classification and L3 router rewrite (MACs, TTL / hop limit) plus
//! Internet checksum helpers.

use std::net::{Ipv4Addr, Ipv6Addr};

pub const ETH_HLEN: usize = 14;

#[derive(Clone, Debug, Default)]
pub struct LocalAddrs {
    pub v4: Vec<[u8; 4]>,
    pub v6: Vec<[u8; 16]>,
}

impl LocalAddrs {
    /// All addresses configured in this network namespace.
    pub fn read() -> LocalAddrs {
        let mut la = LocalAddrs::default();
        unsafe {
            let mut ifap: *mut libc::ifaddrs = std::ptr::null_mut();
            if libc::getifaddrs(&mut ifap) != 0 {
                return la;
            }
            let mut p = ifap;
            while !p.is_null() {
                let a = (*p).ifa_addr;
                if !a.is_null() {
                    match (*a).sa_family as i32 {
                        libc::AF_INET => {
                            let sin = &*(a as *const libc::sockaddr_in);
                            la.v4.push(sin.sin_addr.s_addr.to_ne_bytes());
                        }
                        libc::AF_INET6 => {
                            let sin6 = &*(a as *const libc::sockaddr_in6);
                            la.v6.push(sin6.sin6_addr.s6_addr);
                        }
                        _ => {}
                    }
                }
                p = (*p).ifa_next;
            }
            libc::freeifaddrs(ifap);
        }
        la
    }
    #[allow(dead_code)]
    pub fn describe(&self) -> Vec<String> {
        let mut v: Vec<String> = self.v4.iter().map(|a| Ipv4Addr::from(*a).to_string()).collect();
        v.extend(self.v6.iter().map(|a| Ipv6Addr::from(*a).to_string()));
        v
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Not for us to forward (ARP, other MAC, to the router itself, multicast...).
    Ignore,
    /// TTL/hop limit would expire: dropped (no ICMP time-exceeded is generated).
    TtlExceeded,
    Forward { v6: bool, ip_len: u32, payload_off: u32 },
}

#[inline]
pub fn classify(f: &[u8], my_mac: &[u8; 6], local: &LocalAddrs) -> Class {
    if f.len() < ETH_HLEN + 20 || f[0..6] != my_mac[..] {
        return Class::Ignore;
    }
    let et = u16::from_be_bytes([f[12], f[13]]);
    match et {
        0x0800 => {
            let ip = &f[ETH_HLEN..];
            if ip[0] >> 4 != 4 {
                return Class::Ignore;
            }
            let ihl = ((ip[0] & 0x0f) as usize) * 4;
            let tot = u16::from_be_bytes([ip[2], ip[3]]) as usize;
            if ihl < 20 || tot < ihl || tot > ip.len() {
                return Class::Ignore;
            }
            let dst: [u8; 4] = [ip[16], ip[17], ip[18], ip[19]];
            if dst[0] >= 224 || dst == [0, 0, 0, 0] || local.v4.contains(&dst) {
                return Class::Ignore;
            }
            if ip[8] <= 1 {
                return Class::TtlExceeded;
            }
            Class::Forward { v6: false, ip_len: tot as u32, payload_off: (ETH_HLEN + ihl) as u32 }
        }
        0x86DD => {
            if f.len() < ETH_HLEN + 40 {
                return Class::Ignore;
            }
            let ip = &f[ETH_HLEN..];
            if ip[0] >> 4 != 6 {
                return Class::Ignore;
            }
            let plen = u16::from_be_bytes([ip[4], ip[5]]) as usize;
            if 40 + plen > ip.len() {
                return Class::Ignore;
            }
            let mut dst = [0u8; 16];
            dst.copy_from_slice(&ip[24..40]);
            // multicast, link-local and local destinations are the kernel's business
            if dst[0] == 0xff || (dst[0] == 0xfe && dst[1] & 0xc0 == 0x80) || local.v6.contains(&dst) {
                return Class::Ignore;
            }
            if ip[7] <= 1 {
                return Class::TtlExceeded;
            }
            Class::Forward { v6: true, ip_len: (40 + plen) as u32, payload_off: (ETH_HLEN + 40) as u32 }
        }
        _ => Class::Ignore,
    }
}

/// Router rewrite: src MAC = egress MAC, dst MAC = next hop, TTL/hop limit - 1
/// (IPv4 header checksum updated incrementally, RFC 1624, as ip_decrease_ttl()).
#[inline]
pub fn rewrite(f: &mut [u8], src: &[u8; 6], dst: &[u8; 6], v6: bool) {
    f[0..6].copy_from_slice(dst);
    f[6..12].copy_from_slice(src);
    if v6 {
        f[ETH_HLEN + 7] -= 1;
    } else {
        f[ETH_HLEN + 8] -= 1;
        let c = u16::from_ne_bytes([f[ETH_HLEN + 10], f[ETH_HLEN + 11]]) as u32;
        let mut check = c + (0x0100u16.to_be() as u32);
        check += (check >= 0xFFFF) as u32;
        let b = (check as u16).to_ne_bytes();
        f[ETH_HLEN + 10] = b[0];
        f[ETH_HLEN + 11] = b[1];
    }
}

/// One's-complement sum of `data` (big-endian 16-bit words) added to `sum`.
pub fn csum_add(mut sum: u64, data: &[u8]) -> u64 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u16::from_be_bytes([c[0], c[1]]) as u64;
    }
    if let [b] = chunks.remainder() {
        sum += (*b as u64) << 8;
    }
    sum
}

pub fn csum_fold(mut sum: u64) -> u16 {
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// Complete a CHECKSUM_PARTIAL frame in software (what skb_checksum_help()
/// does): the check field already holds the pseudo-header sum.
pub fn complete_partial_csum(f: &mut [u8], csum_start: usize, csum_offset: usize) -> bool {
    let pos = csum_start + csum_offset;
    if csum_start >= f.len() || pos + 2 > f.len() {
        return false;
    }
    let s = csum_add(0, &f[csum_start..]);
    let mut c = !csum_fold(s);
    if c == 0 {
        c = 0xffff; // CSUM_MANGLED_0
    }
    f[pos..pos + 2].copy_from_slice(&c.to_be_bytes());
    true
}

/// Where the L4 checksum lives for TCP/UDP over IPv4/IPv6 (no extension
/// headers), used when the kernel flags TP_STATUS_CSUMNOTREADY without a vnet
/// header: (csum_start, csum_offset) relative to the frame start.
pub fn l4_csum_location(f: &[u8], v6: bool) -> Option<(usize, usize)> {
    let (proto, start) = if v6 {
        (f[ETH_HLEN + 6], ETH_HLEN + 40)
    } else {
        (f[ETH_HLEN + 9], ETH_HLEN + ((f[ETH_HLEN] & 0x0f) as usize) * 4)
    };
    match proto {
        6 => Some((start, 16)),
        17 => Some((start, 6)),
        _ => None,
    }
}

/// Full IPv4 header checksum check (tests).
#[cfg(test)]
pub fn ipv4_header_ok(ip: &[u8]) -> bool {
    let ihl = ((ip[0] & 0x0f) as usize) * 4;
    csum_fold(csum_add(0, &ip[..ihl])) == 0xffff
}

#[cfg(test)]
mod tests {
    use super::*;

    const MY: [u8; 6] = [2, 0, 0, 0, 0, 1];

    fn ipv4_frame(dst: [u8; 4], ttl: u8, proto: u8, payload: usize) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + payload];
        f[0..6].copy_from_slice(&MY);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 9]);
        f[12] = 0x08;
        let ip = &mut f[14..];
        ip[0] = 0x45;
        let tot = (20 + payload) as u16;
        ip[2..4].copy_from_slice(&tot.to_be_bytes());
        ip[8] = ttl;
        ip[9] = proto;
        ip[12..16].copy_from_slice(&[198, 18, 200, 2]);
        ip[16..20].copy_from_slice(&dst);
        let c = !csum_fold(csum_add(0, &ip[..20]));
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        for (i, b) in ip[20..].iter_mut().enumerate() {
            *b = i as u8;
        }
        f
    }

    #[test]
    fn classify_and_rewrite_ipv4() {
        let local = LocalAddrs { v4: vec![[198, 18, 200, 1]], v6: vec![] };
        let mut f = ipv4_frame([198, 18, 201, 2], 64, 17, 100);
        assert_eq!(classify(&f, &MY, &local), Class::Forward { v6: false, ip_len: 120, payload_off: 34 });
        rewrite(&mut f, &[2, 0, 0, 0, 0, 2], &[2, 0, 0, 0, 0, 3], false);
        assert_eq!(&f[0..6], &[2, 0, 0, 0, 0, 3]);
        assert_eq!(&f[6..12], &[2, 0, 0, 0, 0, 2]);
        assert_eq!(f[14 + 8], 63);
        assert!(ipv4_header_ok(&f[14..]));
        // incremental update stays correct across many decrements / values
        for ttl in 2..=255u8 {
            let mut g = ipv4_frame([10, (ttl / 3), 7, ttl], ttl, 6, 10);
            rewrite(&mut g, &MY, &MY, false);
            assert!(ipv4_header_ok(&g[14..]), "ttl {}", ttl);
        }
        // to the router itself, other MAC, multicast, TTL expiry
        assert_eq!(classify(&ipv4_frame([198, 18, 200, 1], 64, 1, 8), &MY, &local), Class::Ignore);
        let mut other = ipv4_frame([198, 18, 201, 2], 64, 1, 8);
        other[0] = 0xff;
        assert_eq!(classify(&other, &MY, &local), Class::Ignore);
        assert_eq!(classify(&ipv4_frame([224, 0, 0, 1], 64, 1, 8), &MY, &local), Class::Ignore);
        assert_eq!(classify(&ipv4_frame([198, 18, 201, 2], 1, 1, 8), &MY, &local), Class::TtlExceeded);
        let mut arp = ipv4_frame([198, 18, 201, 2], 64, 1, 8);
        arp[12] = 0x08;
        arp[13] = 0x06;
        assert_eq!(classify(&arp, &MY, &local), Class::Ignore);
    }

    #[test]
    fn classify_ipv6() {
        let local = LocalAddrs::default();
        let mut f = vec![0u8; 14 + 40 + 8];
        f[0..6].copy_from_slice(&MY);
        f[12] = 0x86;
        f[13] = 0xdd;
        f[14] = 0x60;
        f[14 + 5] = 8;
        f[14 + 7] = 64;
        f[14 + 24] = 0x20;
        f[14 + 25] = 0x01;
        assert_eq!(classify(&f, &MY, &local), Class::Forward { v6: true, ip_len: 48, payload_off: 54 });
        rewrite(&mut f, &MY, &MY, true);
        assert_eq!(f[14 + 7], 63);
        f[14 + 24] = 0xfe;
        f[14 + 25] = 0x80;
        assert_eq!(classify(&f, &MY, &local), Class::Ignore);
    }

    #[test]
    fn partial_checksum_completion() {
        // UDP over IPv4 with a CHECKSUM_PARTIAL-style pseudo-header sum in place
        let mut f = ipv4_frame([198, 18, 201, 2], 64, 17, 8 + 33);
        let (start, off) = l4_csum_location(&f, false).unwrap();
        assert_eq!((start, off), (34, 6));
        let udp_len = (8 + 33) as u16;
        f[34 + 4..34 + 6].copy_from_slice(&udp_len.to_be_bytes());
        let mut pseudo = csum_add(0, &f[14 + 12..14 + 20]);
        pseudo += 17 + udp_len as u64;
        let p = csum_fold(pseudo);
        f[34 + 6..34 + 8].copy_from_slice(&p.to_be_bytes());
        assert!(complete_partial_csum(&mut f, start, off));
        // verify: pseudo header + UDP segment sums to 0xffff
        let mut s = csum_add(0, &f[14 + 12..14 + 20]);
        s += 17 + udp_len as u64;
        s = csum_add(s, &f[34..]);
        assert_eq!(csum_fold(s), 0xffff);
    }
}
