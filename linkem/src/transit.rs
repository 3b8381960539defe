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
//! The table is named after the two interfaces and *owned* (`flags owner`) by an
//! `nft -i` that linkem starts and keeps: the kernel deletes an owned table when the
//! netlink socket that created it closes, so the rules go when linkem goes, even
//! when it is killed (its end of nft's stdin closes, nft exits). The table is
//! replaced when the namespace's IPv4 addresses change. Without `nft` (or a kernel
//! or nft without owned tables) linkem warns and forwards as before, the kernel
//! processing transit frames.

use std::io::Write;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// The nftables table of the linkem forwarding between `ifaces`.
pub fn table_name(ifaces: &[String; 2]) -> String {
    let clean = |s: &str| s.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect::<String>();
    format!("linkem_{}_{}", clean(&ifaces[0]), clean(&ifaces[1]))
}

/// The addresses a chain lets through: the namespace's, without loopback, sorted.
fn keep(local: &[[u8; 4]]) -> Vec<String> {
    let mut keep: Vec<String> = local.iter().filter(|a| a[0] != 127).map(|a| format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3])).collect();
    keep.sort();
    keep.dedup();
    keep
}

/// The nft command (one line, as `nft -i` reads them) that creates `table`, owned by
/// the nft that runs it: on each interface's ingress, frames not sent to the
/// interface's own MAC (broadcast, multicast) and IPv4 frames to one of `local`
/// (the namespace's addresses) pass, other IPv4 frames are dropped. Plain
/// comparisons, no set: a set lookup per frame cost as much as the work it saves.
pub fn ruleset(table: &str, ifaces: &[String; 2], local: &[[u8; 4]]) -> String {
    let mut s = format!("table netdev {} {{ flags owner; ", table);
    for (i, dev) in ifaces.iter().enumerate() {
        s += &format!("chain transit{} {{ type filter hook ingress device \"{}\" priority 0; meta pkttype != host accept; ", i, dev);
        for k in keep(local) {
            s += &format!("ip daddr {} accept; ", k);
        }
        s += "meta protocol ip drop; }; ";
    }
    s += "}\n";
    s
}

/// The drop rules, held by a running `nft -i`.
pub struct TransitDrop {
    child: Child,
    stdin: Option<ChildStdin>,
    table: String,
    ifaces: [String; 2],
}

impl TransitDrop {
    /// Start `nft -i` and load the rules for the namespace's addresses `local`.
    pub fn start(ifaces: &[String; 2], local: &[[u8; 4]]) -> Result<TransitDrop, String> {
        let mut child = Command::new("nft")
            .arg("-i")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("nft: {}", e))?;
        let stdin = child.stdin.take();
        let mut t = TransitDrop { child, stdin, table: table_name(ifaces), ifaces: ifaces.clone() };
        t.load(local, false)?;
        Ok(t)
    }

    /// The namespace's addresses changed: replace the rules.
    pub fn update(&mut self, local: &[[u8; 4]]) -> Result<(), String> {
        self.load(local, true)
    }

    fn load(&mut self, local: &[[u8; 4]], replace: bool) -> Result<(), String> {
        let mut cmd = String::new();
        if replace {
            cmd += &format!("delete table netdev {}\n", self.table);
        }
        cmd += &ruleset(&self.table, &self.ifaces, local);
        let stdin = self.stdin.as_mut().ok_or("nft: gone")?;
        stdin.write_all(cmd.as_bytes()).and_then(|_| stdin.flush()).map_err(|e| format!("nft: {}", e))?;
        // nft -i reports nothing we can wait for: look until the table has the rules
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let out = Command::new("nft").args(["list", "table", "netdev", &self.table]).stderr(Stdio::null()).output();
            if let Ok(o) = out {
                let text = String::from_utf8_lossy(&o.stdout);
                if text.matches("meta protocol ip drop").count() == 2 && keep(local).iter().all(|a| text.contains(a.as_str())) {
                    return Ok(());
                }
            }
            if Instant::now() > deadline || self.child.try_wait().map(|s| s.is_some()).unwrap_or(true) {
                return Err("nft did not load the rules (owned tables need nft 0.9.9 and Linux 5.12)".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for TransitDrop {
    /// nft exits at the end of its input; the kernel then deletes the owned table.
    fn drop(&mut self) {
        self.stdin.take();
        let _ = self.child.wait();
    }
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
        assert!(r.starts_with("table netdev linkem_to_client_to_server { flags owner; "), "{}", r);
        assert!(r.ends_with("}\n") && r.matches('\n').count() == 1, "one line for nft -i: {}", r);
        for (i, dev) in ["to-client", "to-server"].iter().enumerate() {
            let chain = format!(
                "chain transit{} {{ type filter hook ingress device \"{}\" priority 0; meta pkttype != host accept; \
                 ip daddr 198.18.0.2 accept; ip daddr 198.18.1.1 accept; meta protocol ip drop; }};",
                i, dev
            );
            assert!(r.contains(&chain), "{}", r);
        }
        assert!(!r.contains("127.0.0.1"));
    }
}
