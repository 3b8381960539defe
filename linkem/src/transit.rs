//! Keep the router's kernel from processing the frames linkem forwards.
//!
//! With `ip_forward=0` the router namespace's kernel still takes every transit
//! frame through `ip_rcv` and a route lookup that ends in an uncached error route
//! (allocated and freed through RCU per packet) before dropping it. That work runs
//! in the sender's softirq for data, and inside linkem's own `sendmmsg` for the
//! receiver's ACKs (veth delivers inline). An nftables `netdev` ingress chain on the
//! two interfaces drops IPv4 frames sent to the router's MAC but not to one of its
//! addresses *after* AF_PACKET has seen them (the kernel hands frames to packet
//! taps before its ingress hooks), so linkem still reads every frame and the
//! kernel still gets ARP, broadcast, multicast and everything for the router.
//!
//! The table is named after the two interfaces, replaced whole when the
//! namespace's IPv4 addresses change, and deleted when linkem exits. Without `nft`
//! (or if it refuses) linkem warns and forwards as before.

use std::io::Write;
use std::process::{Command, Stdio};

/// The nftables table of the linkem forwarding between `ifaces`.
pub fn table_name(ifaces: &[String; 2]) -> String {
    let clean = |s: &str| s.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect::<String>();
    format!("linkem_{}_{}", clean(&ifaces[0]), clean(&ifaces[1]))
}

/// An nft script that (re)creates `table`: on each interface's ingress, frames
/// not sent to the interface's own MAC (broadcast, multicast) and IPv4 frames to
/// one of `local` (the namespace's addresses) pass, other IPv4 frames are dropped.
/// Plain comparisons, no set: a set lookup per frame cost as much as the work it
/// saves.
pub fn ruleset(table: &str, ifaces: &[String; 2], local: &[[u8; 4]]) -> String {
    let mut keep: Vec<String> = local.iter().filter(|a| a[0] != 127).map(|a| format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3])).collect();
    keep.sort();
    keep.dedup();
    let mut s = format!("table netdev {t}\ndelete table netdev {t}\ntable netdev {t} {{\n", t = table);
    for (i, dev) in ifaces.iter().enumerate() {
        s += &format!("  chain transit{} {{\n    type filter hook ingress device \"{}\" priority 0;\n", i, dev);
        s += "    meta pkttype != host accept\n";
        for k in &keep {
            s += &format!("    ip daddr {} accept\n", k);
        }
        s += "    meta protocol ip drop\n  }\n";
    }
    s += "}\n";
    s
}

fn nft(script: &str) -> Result<(), String> {
    let mut child = Command::new("nft")
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("nft: {}", e))?;
    child.stdin.take().unwrap().write_all(script.as_bytes()).map_err(|e| format!("nft: {}", e))?;
    let out = child.wait_with_output().map_err(|e| format!("nft: {}", e))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("nft: {}", String::from_utf8_lossy(&out.stderr).trim().lines().next().unwrap_or("failed")))
    }
}

/// Install (or replace) the drop rules for the given local addresses.
pub fn install(table: &str, ifaces: &[String; 2], local: &[[u8; 4]]) -> Result<(), String> {
    nft(&ruleset(table, ifaces, local))
}

/// Remove the table (the kernel sees transit frames again).
pub fn remove(table: &str) {
    let _ = nft(&format!("table netdev {t}\ndelete table netdev {t}\n", t = table));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_keep_what_is_for_the_router() {
        let ifaces = ["to-client".to_string(), "to-server".to_string()];
        let t = table_name(&ifaces);
        assert_eq!(t, "linkem_to_client_to_server");
        let r = ruleset(&t, &ifaces, &[[198, 18, 1, 1], [127, 0, 0, 1], [198, 18, 0, 2], [198, 18, 1, 1]]);
        assert!(r.starts_with("table netdev linkem_to_client_to_server\ndelete table netdev linkem_to_client_to_server\n"));
        for dev in ["to-client", "to-server"] {
            let chain = format!(
                "type filter hook ingress device \"{}\" priority 0;\n    meta pkttype != host accept\n    \
                 ip daddr 198.18.0.2 accept\n    ip daddr 198.18.1.1 accept\n    meta protocol ip drop\n  }}",
                dev
            );
            assert!(r.contains(&chain), "{}", r);
        }
        assert!(!r.contains("127.0.0.1"));
    }
}
