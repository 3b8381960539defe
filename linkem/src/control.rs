//! Control socket (Unix stream, line protocol) and stats rendering.
//!
//!   stats\n        -> one JSON line of counters (since the last reset)
//!   lateness\n     -> one JSON line: lateness histograms, late drops and linkem's
//!                     own CPU, cumulative since start (a reader takes the
//!                     difference of two replies; `reset` does not change them)
//!   set <json>\n   -> replace the config of the directions given -> ok | error: ...
//!                     (a top-level "seed": N restarts their random draws from N)
//!   reset\n        -> zero the counters -> ok

use crate::config::{parse_config, Config};
use crate::engine::{mono_ns, Shared};
use crate::stats::{DirSnap, PORT_COUNTERS, TIMING_COUNTERS};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Clone, Default)]
pub struct Snapshot {
    pub t: u64,
    pub dirs: [DirSnap; 2],
    pub ports: [Vec<u64>; 2],
    pub timing: Vec<u64>,
    pub cpu_user_ns: u64,
    pub cpu_sys_ns: u64,
}

pub fn cpu_times() -> (u64, u64) {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    (tv(ru.ru_utime), tv(ru.ru_stime))
}

/// (on-CPU ns, run-queue wait ns) of this process, summed over its threads, from
/// the scheduler's counters (/proc/self/task/*/schedstat); None where the kernel
/// does not keep them.
pub fn sched_ns() -> Option<(u64, u64)> {
    let (mut run, mut wait, mut seen) = (0u64, 0u64, false);
    for t in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let Ok(text) = std::fs::read_to_string(t.path().join("schedstat")) else { continue };
        let mut f = text.split_whitespace().map(|x| x.parse::<u64>());
        if let (Some(Ok(r)), Some(Ok(w))) = (f.next(), f.next()) {
            run += r;
            wait += w;
            seen = true;
        }
    }
    seen.then_some((run, wait))
}

/// Involuntary context switches of this process so far, summed over its threads
/// (/proc/self/task/*/status), and the CPUs its forwarding threads (named
/// `linkem-fwd*`) last ran on (field 39 of their stat): where a late release can
/// come from (a preempted thread) and which core the forwarding ran on.
pub fn switches_and_cpus() -> (Option<u64>, Vec<u32>) {
    let (mut nivcsw, mut seen, mut cpus) = (0u64, false, Vec::new());
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else { return (None, cpus) };
    for t in dir.flatten() {
        if let Ok(status) = std::fs::read_to_string(t.path().join("status")) {
            for line in status.lines() {
                if let Some(v) = line.strip_prefix("nonvoluntary_ctxt_switches:") {
                    if let Ok(n) = v.trim().parse::<u64>() {
                        nivcsw += n;
                        seen = true;
                    }
                }
            }
        }
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if !comm.starts_with("linkem-fwd") {
            continue;
        }
        if let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) {
            let after = stat.rsplit_once(')').map(|x| x.1).unwrap_or("");
            if let Some(Ok(cpu)) = after.split_whitespace().nth(36).map(|x| x.parse::<u32>()) {
                if !cpus.contains(&cpu) {
                    cpus.push(cpu);
                }
            }
        }
    }
    cpus.sort_unstable();
    (seen.then_some(nivcsw), cpus)
}

pub struct Ctl {
    pub shared: Arc<Shared>,
    pub base: Mutex<Snapshot>,
    pub start: u64,
    pub info: Value,
    pub port_names: [String; 2],
    /// Scheduling class of the forwarding thread(s), e.g. "SCHED_FIFO:10".
    pub sched: Mutex<String>,
}

fn sum_timing(shared: &Shared) -> Vec<u64> {
    let mut v = vec![0u64; TIMING_COUNTERS.len()];
    for t in shared.timing.lock().unwrap().iter() {
        for (i, x) in t.snapshot().into_iter().enumerate() {
            v[i] += x;
        }
    }
    v
}

impl Ctl {
    pub fn snapshot(&self) -> Snapshot {
        let (u, s) = cpu_times();
        Snapshot {
            t: mono_ns(),
            dirs: [self.shared.dir_stats[0].snapshot(), self.shared.dir_stats[1].snapshot()],
            ports: [self.shared.port_stats[0].snapshot(), self.shared.port_stats[1].snapshot()],
            timing: sum_timing(&self.shared),
            cpu_user_ns: u,
            cpu_sys_ns: s,
        }
    }

    pub fn reset(&self) {
        *self.base.lock().unwrap() = self.snapshot();
    }

    pub fn stats_json(&self) -> Value {
        let cur = self.snapshot();
        let base = self.base.lock().unwrap().clone();
        let sub = |a: &Vec<u64>, b: &Vec<u64>| -> Vec<u64> {
            a.iter().enumerate().map(|(i, x)| x.wrapping_sub(*b.get(i).unwrap_or(&0))).collect()
        };
        let mut out = serde_json::Map::new();
        out.insert("uptime_s".into(), json!((cur.t - self.start) as f64 / 1e9));
        let since = if base.t == 0 { cur.t - self.start } else { cur.t - base.t };
        out.insert("since_reset_s".into(), json!(since as f64 / 1e9));
        for (k, v) in self.info.as_object().unwrap() {
            out.insert(k.clone(), v.clone());
        }
        out.insert("sched".into(), json!(*self.sched.lock().unwrap()));
        let mut fwd_total = 0;
        for (i, name) in ["up", "down"].iter().enumerate() {
            let d = cur.dirs[i].minus(&base.dirs[i]);
            fwd_total += d.counters[5];
            let mut j = d.to_json();
            j["config"] = self.shared.current[i].lock().unwrap().clone();
            out.insert(name.to_string(), j);
        }
        let mut ports = serde_json::Map::new();
        for (i, key) in ["a", "b"].iter().enumerate() {
            let v = sub(&cur.ports[i], &base.ports[i]);
            let mut m = serde_json::Map::new();
            m.insert("iface".into(), json!(self.port_names[i]));
            for (k, name) in PORT_COUNTERS.iter().enumerate() {
                m.insert(name.to_string(), json!(v[k]));
            }
            ports.insert(key.to_string(), Value::Object(m));
        }
        out.insert("ports".into(), Value::Object(ports));
        let tv = sub(&cur.timing, &base.timing);
        let mut tm = serde_json::Map::new();
        for (k, name) in TIMING_COUNTERS.iter().enumerate() {
            tm.insert(name.to_string(), json!(tv[k]));
        }
        let cu = cur.cpu_user_ns - base.cpu_user_ns;
        let cs = cur.cpu_sys_ns - base.cpu_sys_ns;
        tm.insert("cpu_user_s".into(), json!(cu as f64 / 1e9));
        tm.insert("cpu_sys_s".into(), json!(cs as f64 / 1e9));
        tm.insert(
            "cpu_ns_per_forwarded_pkt".into(),
            if fwd_total > 0 { json!((cu + cs) as f64 / fwd_total as f64) } else { Value::Null },
        );
        let txc = tv[TIMING_COUNTERS.iter().position(|x| *x == "tx_calls").unwrap()];
        let txp = tv[TIMING_COUNTERS.iter().position(|x| *x == "tx_packets").unwrap()];
        tm.insert("tx_batch_avg".into(), json!(if txc > 0 { txp as f64 / txc as f64 } else { 0.0 }));
        out.insert("timing".into(), Value::Object(tm));
        Value::Object(out)
    }

    /// Cumulative lateness per direction (frames sent, their lateness histogram,
    /// the largest lateness since start, arrivals the overload guard dropped,
    /// frames the receive ring of the direction's input port overflowed with),
    /// CoDel's drops and the bottleneck's sojourn-time histogram, and this
    /// process's scheduler times.
    pub fn lateness_json(&self) -> Value {
        let mut out = serde_json::Map::new();
        out.insert("t_s".into(), json!(mono_ns() as f64 / 1e9));
        let sched = sched_ns();
        out.insert("cpu_run_s".into(), json!(sched.map(|s| s.0 as f64 / 1e9)));
        out.insert("cpu_wait_s".into(), json!(sched.map(|s| s.1 as f64 / 1e9)));
        let (nivcsw, cpus) = switches_and_cpus();
        out.insert("nivcsw".into(), json!(nivcsw));
        out.insert("cpus".into(), json!(cpus));
        for (i, name) in ["up", "down"].iter().enumerate() {
            let d = &self.shared.dir_stats[i];
            let h = d.sched_error.snapshot();
            let mut j = h.buckets_json();
            j["released"] = json!(h.count);
            j["max_ns"] = json!(h.max_ns);
            j["late_dropped"] = json!(d.late_dropped.get());
            j["codel_dropped"] = json!(d.codel_dropped.get());
            // sojourn in the bottleneck queue of every packet that left it, ns buckets
            j["sojourn"] = d.sojourn.snapshot().buckets_json();
            // the up direction reads port a, the down direction port b
            j["ring_drops"] = json!(self.shared.port_stats[i].ring_drops.get());
            out.insert(name.to_string(), j);
        }
        Value::Object(out)
    }

    /// Validate and apply a (partial) config; waits until the forwarding
    /// threads have switched to it.
    pub fn set(&self, text: &str) -> Result<(), String> {
        let v: Value = serde_json::from_str(text).map_err(|e| format!("config: invalid JSON: {}", e))?;
        let cfg: Config = parse_config(&v)?;
        if cfg.seed.is_some() && cfg.up.is_none() && cfg.down.is_none() {
            return Err("seed: give it with the directions it seeds (up, down)".into());
        }
        let mut waits = Vec::new();
        for (i, dc) in [cfg.up, cfg.down].into_iter().enumerate() {
            if let Some(dc) = dc {
                *self.shared.current[i].lock().unwrap() = dc.source.clone();
                *self.shared.pending[i].lock().unwrap() = Some((dc, cfg.seed.map(|s| s ^ crate::emu::DIR_SEED[i])));
                let g = self.shared.req_gen[i].fetch_add(1, std::sync::atomic::Ordering::AcqRel) + 1;
                waits.push((i, g));
            }
        }
        self.shared.wake_all();
        let deadline = mono_ns() + 2_000_000_000;
        for (i, g) in waits {
            while self.shared.done_gen[i].load(std::sync::atomic::Ordering::Acquire) < g {
                if mono_ns() > deadline {
                    return Err("timeout waiting for the forwarding thread".into());
                }
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        Ok(())
    }

    pub fn handle_line(&self, line: &str) -> String {
        let line = line.trim();
        let (cmd, rest) = match line.find(char::is_whitespace) {
            Some(i) => (&line[..i], line[i..].trim()),
            None => (line, ""),
        };
        match cmd {
            "stats" => self.stats_json().to_string(),
            "lateness" => self.lateness_json().to_string(),
            "reset" => {
                self.reset();
                "ok".into()
            }
            "set" => match self.set(rest) {
                Ok(()) => "ok".into(),
                Err(e) => format!("error: {}", e),
            },
            "" => "error: empty command".into(),
            other => format!("error: unknown command \"{}\" (expected stats, lateness, set <json>, reset)", other),
        }
    }
}

pub fn serve(ctl: Arc<Ctl>, path: String) -> std::io::Result<()> {
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path)?;
    std::thread::Builder::new().name("linkem-ctl".into()).spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let ctl = ctl.clone();
            let _ = std::thread::Builder::new().name("linkem-ctl-conn".into()).spawn(move || handle_conn(ctl, conn));
        }
    })?;
    Ok(())
}

fn handle_conn(ctl: Arc<Ctl>, conn: UnixStream) {
    let Ok(mut w) = conn.try_clone() else { return };
    let r = BufReader::new(conn);
    for line in r.lines() {
        let Ok(line) = line else { break };
        let resp = ctl.handle_line(&line);
        if w.write_all(resp.as_bytes()).and_then(|_| w.write_all(b"\n")).is_err() {
            break;
        }
    }
}

/// `linkem ctl --control PATH stats|lateness|set JSON|reset`
pub fn client(path: &str, words: &[String]) -> i32 {
    let mut s = match UnixStream::connect(path) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("linkem ctl: cannot connect to {}: {}", path, e);
            return 1;
        }
    };
    let line = words.join(" ");
    if s.write_all(line.as_bytes()).and_then(|_| s.write_all(b"\n")).is_err() {
        eprintln!("linkem ctl: write failed");
        return 1;
    }
    let mut r = BufReader::new(s);
    let mut resp = String::new();
    if r.read_line(&mut resp).unwrap_or(0) == 0 {
        eprintln!("linkem ctl: no response");
        return 1;
    }
    let _ = std::io::stdout().write_all(resp.as_bytes());
    if resp.starts_with("error") { 1 } else { 0 }
}
