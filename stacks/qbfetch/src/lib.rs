//! What quicbench's Rust HTTP/3 clients share, so that each speaks as `qb-load` does
//! (loadclient/): its command line (the part an h3-only client needs), one JSON record per
//! request in `--requests`, one summary object on stdout, the content manifest check (size and
//! sha256 of every body), and the client's own CPU (rusage) and run-queue wait (schedstat) over
//! the transfer. A client binary brings the QUIC stack: it runs a [`Plan`] and fills [`Record`]s.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Parser;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// qb-load's options, those an HTTP/3-only client without session resumption honours. A value
/// outside what it accepts is refused with a one-line error naming the option (exit 2).
#[derive(Parser, Debug, Clone)]
pub struct Args {
    /// protocol: h3 (the only one this client speaks)
    #[arg(long, default_value = "h3")]
    pub proto: String,
    /// https://HOST[:PORT]: the authority and SNI of every request
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// ADDRESS:PORT to send to (default: the base URL's host and port)
    #[arg(long, value_name = "ADDRESS:PORT")]
    pub connect: Option<SocketAddr>,
    /// PEM file of the CA that signs the server's certificate (verified against the base URL's host)
    #[arg(long, value_name = "PEM")]
    pub ca: Option<PathBuf>,
    /// request path; {i} is replaced by 1..count
    #[arg(long, default_value = "")]
    pub path_template: String,
    /// requests
    #[arg(long, default_value_t = 1)]
    pub count: usize,
    /// requests in flight at once
    #[arg(long, default_value_t = 1)]
    pub parallel: usize,
    /// connection policy: shared (one connection, `parallel` streams at once) | per-object (a
    /// connection per request, `parallel` connections at once)
    #[arg(long, default_value = "shared")]
    pub connections: String,
    /// session resumption: none (the only one this client honours)
    #[arg(long, default_value = "none")]
    pub resumption: String,
    /// the content manifest (JSON: files[].path, size, sha256): every body is checked against it
    #[arg(long, value_name = "FILE")]
    pub manifest: Option<PathBuf>,
    /// write one JSON record per request here
    #[arg(long, value_name = "FILE")]
    pub requests: Option<PathBuf>,
    /// the whole run's deadline, e.g. 30s, 1500ms
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// write one qlog per connection here (<odcid>_client.sqlog)
    #[arg(long, value_name = "DIR")]
    pub qlog_dir: Option<PathBuf>,
    /// print the versions (JSON) and exit
    #[arg(long)]
    pub version: bool,
}

/// A Go-style duration as qb-load takes it: a number and a unit (ms, s, m).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("invalid duration {s:?} (accepted: a number and a unit ms, s or m, e.g. 30s)");
    let (num, unit) = s.find(|c: char| c.is_ascii_alphabetic()).map(|i| s.split_at(i)).ok_or_else(bad)?;
    let v: f64 = num.parse().map_err(|_| bad())?;
    let secs = match unit {
        "ms" => v / 1e3,
        "s" => v,
        "m" => v * 60.0,
        _ => return Err(bad()),
    };
    if !(secs.is_finite() && secs > 0.0) {
        return Err(bad());
    }
    Ok(Duration::from_secs_f64(secs))
}

/// How requests are put on connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    Shared,
    PerObject,
}

impl Policy {
    pub fn name(self) -> &'static str {
        match self {
            Policy::Shared => "shared",
            Policy::PerObject => "per-object",
        }
    }
}

/// The checked run: what a client binary needs to make its requests.
#[derive(Debug, Clone)]
pub struct Plan {
    /// the authority and TLS server name
    pub host: String,
    /// the authority as sent (host, with :port when not 443)
    pub authority: String,
    pub connect: SocketAddr,
    pub ca: Option<PathBuf>,
    pub paths: Vec<String>,
    pub parallel: usize,
    pub policy: Policy,
    pub timeout: Duration,
    pub qlog_dir: Option<PathBuf>,
}

/// A usage error: one line naming the option and what it accepts (exit 2).
#[derive(Debug)]
pub struct Usage(pub String);

impl Args {
    pub fn plan(&self) -> Result<Plan, Usage> {
        let u = |s: String| Usage(s);
        if self.proto != "h3" {
            return Err(u(format!("invalid --proto {:?} (accepted values: h3)", self.proto)));
        }
        if self.resumption != "none" {
            return Err(u(format!("invalid --resumption {:?} (accepted values: none)", self.resumption)));
        }
        let policy = match self.connections.as_str() {
            "shared" => Policy::Shared,
            "per-object" => Policy::PerObject,
            other => return Err(u(format!("invalid --connections {other:?} (accepted values: shared, per-object)"))),
        };
        if self.count < 1 {
            return Err(u(format!("invalid --count {} (accepted: >= 1)", self.count)));
        }
        if self.parallel < 1 {
            return Err(u(format!("invalid --parallel {} (accepted: >= 1)", self.parallel)));
        }
        if self.path_template.is_empty() {
            return Err(u("invalid --path-template \"\" (accepted: a path like /100KB/obj-{i}.bin)".into()));
        }
        let base = self.base_url.as_deref().ok_or_else(|| u("missing --base-url (accepted: https://HOST[:PORT])".into()))?;
        let authority = base
            .strip_prefix("https://")
            .map(|s| s.trim_end_matches('/'))
            .filter(|s| !s.is_empty() && !s.contains('/'))
            .ok_or_else(|| u(format!("invalid --base-url {base:?} (accepted: https://HOST[:PORT])")))?;
        let (host, port) = split_authority(authority)
            .ok_or_else(|| u(format!("invalid --base-url {base:?} (accepted: https://HOST[:PORT])")))?;
        let connect = match self.connect {
            Some(a) => a,
            None => std::net::ToSocketAddrs::to_socket_addrs(&(host.as_str(), port))
                .ok()
                .and_then(|mut a| a.next())
                .ok_or_else(|| u(format!("invalid --base-url {base:?}: host {host:?} does not resolve; give --connect")))?,
        };
        let mut template = self.path_template.clone();
        if !template.starts_with('/') {
            template.insert(0, '/');
        }
        let paths = (1..=self.count).map(|i| template.replace("{i}", &i.to_string())).collect();
        Ok(Plan {
            host,
            authority: authority.to_string(),
            connect,
            ca: self.ca.clone(),
            paths,
            parallel: self.parallel,
            policy,
            timeout: self.timeout,
            qlog_dir: self.qlog_dir.clone(),
        })
    }
}

/// HOST[:PORT] (HOST may be a bracketed IPv6 address) -> (host, port), port 443 by default.
pub fn split_authority(a: &str) -> Option<(String, u16)> {
    if let Some(rest) = a.strip_prefix('[') {
        let (h, tail) = rest.split_once(']')?;
        let port = match tail.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None if tail.is_empty() => 443,
            None => return None,
        };
        return Some((h.to_string(), port));
    }
    match a.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => Some((h.to_string(), p.parse().ok()?)),
        Some(_) => None,
        None => Some((a.to_string(), 443)),
    }
}

/// The content manifest: relative path -> (size, sha256).
#[derive(Debug, Default, Clone)]
pub struct Manifest(HashMap<String, (u64, String)>);

impl Manifest {
    pub fn load(path: &PathBuf) -> Result<Manifest, String> {
        let text = fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let doc: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut m = HashMap::new();
        for f in doc["files"].as_array().into_iter().flatten() {
            if let (Some(p), Some(size), Some(sha)) = (f["path"].as_str(), f["size"].as_u64(), f["sha256"].as_str()) {
                m.insert(p.trim_start_matches('/').to_string(), (size, sha.to_lowercase()));
            }
        }
        Ok(Manifest(m))
    }

    fn get(&self, path: &str) -> Option<&(u64, String)> {
        self.0.get(path.trim_start_matches('/'))
    }
}

/// Wall-clock nanoseconds since the epoch (the records' clock, as qb-load's).
pub fn now_ns() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}

/// Body gaps shorter than this are the reader's own scheduling (qb-load's minGapNs).
const MIN_GAP_NS: i64 = 1_000_000;
const MAX_GAPS: usize = 4096;

/// One request, as qb-load records it (`--requests`, one JSON object a line).
#[derive(Debug, Clone, Default)]
pub struct Record {
    pub i: usize,
    pub path: String,
    pub start_ns: Option<i64>,
    pub connect_start_ns: Option<i64>,
    pub connect_done_ns: Option<i64>,
    pub tls_done_ns: Option<i64>,
    pub first_byte_ns: Option<i64>,
    pub last_byte_ns: Option<i64>,
    pub bytes: u64,
    pub status: Option<u16>,
    pub proto: Option<String>,
    pub conn_id: Option<usize>,
    pub conn_reused: Option<bool>,
    pub sha256_ok: Option<bool>,
    pub error: Option<String>,
    pub stall_ns: Option<i64>,
    pub gaps_ns: Vec<[i64; 2]>,
    pub gaps_truncated: bool,
    /// the response's Content-Length, when it said one
    pub content_length: Option<u64>,
    pub end_ns: i64,
    hasher: Option<Sha256>,
    last_data_ns: i64,
    done: bool,
}

impl Record {
    pub fn new(i: usize, path: String) -> Record {
        Record { i, path, hasher: Some(Sha256::new()), ..Default::default() }
    }

    /// The request is taken up (before the connection it opens, if it opens one).
    pub fn begin(&mut self) {
        self.start_ns.get_or_insert_with(now_ns);
    }

    /// The request was put on its connection (sent, or queued behind the handshake).
    pub fn started(&mut self, conn_id: usize, first_on_conn: bool) {
        self.begin();
        self.conn_id = Some(conn_id);
        self.conn_reused = Some(!first_on_conn);
    }

    /// The first request of a connection carries its times: connect start, and the handshake's
    /// end (for h3 the connect and the TLS handshake end together, as in qb-load).
    pub fn connection_times(&mut self, connect_start_ns: i64, handshake_done_ns: Option<i64>) {
        if self.conn_reused == Some(false) {
            self.connect_start_ns = Some(connect_start_ns);
            self.connect_done_ns = handshake_done_ns;
            self.tls_done_ns = handshake_done_ns;
        }
    }

    /// The response's headers were decoded: the first byte (as qb-load's h3).
    pub fn headers(&mut self, status: Option<u16>, content_length: Option<u64>, proto: &str) {
        let now = now_ns();
        self.first_byte_ns.get_or_insert(now);
        self.last_data_ns = now;
        self.status = status;
        self.content_length = content_length;
        self.proto = Some(proto.to_string());
    }

    /// Body bytes delivered to the client.
    pub fn data(&mut self, chunk: &[u8]) {
        if chunk.is_empty() {
            return;
        }
        let now = now_ns();
        if self.first_byte_ns.is_some() {
            let gap = now - self.last_data_ns;
            self.stall_ns = Some(self.stall_ns.unwrap_or(0).max(gap));
            if gap >= MIN_GAP_NS {
                if self.gaps_ns.len() < MAX_GAPS {
                    self.gaps_ns.push([self.last_data_ns, now]);
                } else {
                    self.gaps_truncated = true;
                }
            }
        }
        self.last_data_ns = now;
        self.bytes += chunk.len() as u64;
        if let Some(h) = self.hasher.as_mut() {
            h.update(chunk);
        }
    }

    /// The response ended (its stream's FIN): checked against the manifest.
    pub fn finished(&mut self, manifest: Option<&Manifest>) {
        if self.done {
            return;
        }
        self.done = true;
        self.end_ns = now_ns();
        self.last_byte_ns = Some(self.end_ns);
        self.stall_ns.get_or_insert(0);
        let digest = self.hasher.take().map(|h| hex(&h.finalize()));
        let entry = manifest.and_then(|m| m.get(&self.path));
        if manifest.is_some() {
            self.sha256_ok = Some(matches!((entry, &digest), (Some((_, want)), Some(got)) if want == got));
        }
        self.error = if self.proto.as_deref() != Some("h3") {
            Some(format!("protocol mismatch: requested h3, got {}", self.proto.as_deref().unwrap_or("none")))
        } else if self.status != Some(200) {
            Some(format!("status {}", self.status.map(|s| s.to_string()).unwrap_or_else(|| "none".into())))
        } else if self.content_length.is_some_and(|n| n != self.bytes) {
            Some(format!("short body: got {} of {} bytes", self.bytes, self.content_length.unwrap_or(0)))
        } else if manifest.is_some() && entry.is_none() {
            Some(format!("manifest: no entry for {:?}", self.path.trim_start_matches('/')))
        } else if let Some((size, _)) = entry.filter(|(size, _)| *size != self.bytes) {
            Some(format!("manifest: size mismatch: got {} bytes, want {size}", self.bytes))
        } else if self.sha256_ok == Some(false) {
            Some("manifest: sha256 mismatch".into())
        } else {
            None
        };
    }

    /// The request failed before its response ended.
    pub fn failed(&mut self, error: impl Into<String>) {
        if self.done {
            return;
        }
        self.done = true;
        self.end_ns = now_ns();
        self.hasher = None;
        self.error = Some(error.into());
    }

    pub fn is_done(&self) -> bool {
        self.done
    }

    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "i": self.i, "path": self.path, "start_ns": self.start_ns,
            "connect_start_ns": self.connect_start_ns, "connect_done_ns": self.connect_done_ns,
            "tls_done_ns": self.tls_done_ns, "first_byte_ns": self.first_byte_ns,
            "last_byte_ns": self.last_byte_ns, "bytes": self.bytes, "status": self.status,
            "proto": self.proto, "conn_id": self.conn_id, "conn_reused": self.conn_reused,
            "sha256_ok": self.sha256_ok, "error": self.error, "resumed": null, "early_data": null,
            "stall_ns": if self.error.is_none() { self.stall_ns } else { None },
        });
        if !self.gaps_ns.is_empty() {
            v["gaps_ns"] = json!(self.gaps_ns);
        }
        if self.gaps_truncated {
            v["gaps_truncated"] = json!(true);
        }
        v
    }
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// CPU seconds (user, system) of this process so far.
pub fn rusage() -> (f64, f64) {
    // SAFETY: getrusage fills the struct it is given
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return (0.0, 0.0);
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (tv(ru.ru_utime), tv(ru.ru_stime))
}

/// What the scheduler counted of this process's threads so far: seconds runnable but waiting
/// for a CPU, and times put on a CPU (/proc/self/task/*/schedstat); None where the kernel does
/// not say.
pub fn run_queue() -> Option<(f64, i64)> {
    let mut ns: i64 = 0;
    let mut slices: i64 = 0;
    let mut ok = false;
    for t in fs::read_dir("/proc/self/task").ok()?.flatten() {
        let Ok(s) = fs::read_to_string(t.path().join("schedstat")) else { continue };
        let f: Vec<&str> = s.split_whitespace().collect();
        if let (Some(w), Some(n)) = (f.get(1).and_then(|x| x.parse::<i64>().ok()), f.get(2).and_then(|x| x.parse::<i64>().ok())) {
            ns += w;
            slices += n;
            ok = true;
        }
    }
    ok.then_some((ns as f64 / 1e9, slices))
}

/// The CPU a transfer cost: taken before and after it.
pub struct CpuMark {
    ru: (f64, f64),
    rq: Option<(f64, i64)>,
}

impl CpuMark {
    pub fn now() -> CpuMark {
        CpuMark { ru: rusage(), rq: run_queue() }
    }
}

/// The summary object (stdout), qb-load's fields; `process_cpu_s` is the whole process's CPU so
/// far (start-up included), what a lab on other hosts reads, as qb-load's.
pub fn summary(plan: &Plan, records: &[Record], connections: usize, before: &CpuMark, after: &CpuMark,
               versions: Value) -> Value {
    let mut negotiated: HashMap<String, usize> = HashMap::new();
    let (mut ok, mut failed, mut bytes) = (0, 0, 0u64);
    let mut errors = Vec::new();
    let (mut start, mut end) = (0i64, 0i64);
    for r in records {
        if let Some(p) = &r.proto {
            *negotiated.entry(p.clone()).or_default() += 1;
        }
        bytes += r.bytes;
        match &r.error {
            None => ok += 1,
            Some(e) => {
                failed += 1;
                if errors.len() < 10 {
                    errors.push(json!({"i": r.i, "error": e}));
                }
            }
        }
        if let Some(s) = r.start_ns {
            if start == 0 || s < start {
                start = s;
            }
        }
        end = end.max(r.end_ns);
    }
    let (duration, goodput, start_ns, end_ns) = if start != 0 && end >= start {
        let d = (end - start) as f64 / 1e9;
        (d, if d > 0.0 { bytes as f64 * 8.0 / d / 1e6 } else { 0.0 }, Some(start), Some(end))
    } else {
        (0.0, 0.0, None, None)
    };
    let (wait, slices) = match (before.rq, after.rq) {
        (Some((w0, n0)), Some((w1, n1))) => (Some((w1 - w0).max(0.0)), Some((n1 - n0).max(0))),
        _ => (None, None),
    };
    json!({
        "proto_requested": "h3", "connection_policy": plan.policy.name(), "protos_negotiated": negotiated,
        "requests": records.len(), "ok": ok, "failed": failed, "bytes": bytes, "start_ns": start_ns,
        "end_ns": end_ns, "duration_s": duration, "goodput_mbps": goodput, "connections": connections,
        "errors": errors, "cpu_user_s": after.ru.0 - before.ru.0, "cpu_sys_s": after.ru.1 - before.ru.1,
        "cpu_wait_s": wait, "cpu_slices": slices, "process_cpu_s": after.ru.0 + after.ru.1,
        "versions": versions,
    })
}

/// A client's main: parse, check, open the outputs, run the transfer, write records and summary.
/// `run` gets the plan and the manifest and returns every request's record (in order) and the
/// number of connections opened. Exit code: 0 all fetched, 1 some failed, 2 bad input.
pub fn main_with(name: &str, versions: Value, run: impl FnOnce(&Plan, Option<&Manifest>) -> Result<(Vec<Record>, usize), String>) -> i32 {
    let args = Args::parse();
    if args.version {
        println!("{versions}");
        return 0;
    }
    let plan = match args.plan() {
        Ok(p) => p,
        Err(Usage(e)) => {
            eprintln!("{name}: {e}");
            return 2;
        }
    };
    let manifest = match &args.manifest {
        Some(p) => match Manifest::load(p) {
            Ok(m) => Some(m),
            Err(e) => {
                eprintln!("{name}: --manifest: {e}");
                return 2;
            }
        },
        None => None,
    };
    if let Some(ca) = &plan.ca {
        if let Err(e) = fs::metadata(ca) {
            eprintln!("{name}: --ca {}: {e}", ca.display());
            return 2;
        }
    }
    let mut out = match &args.requests {
        Some(p) => match fs::File::create(p) {
            Ok(f) => Some(io::BufWriter::new(f)),
            Err(e) => {
                eprintln!("{name}: --requests {}: {e}", p.display());
                return 2;
            }
        },
        None => None,
    };
    if let Some(d) = &plan.qlog_dir {
        if let Err(e) = fs::create_dir_all(d) {
            eprintln!("{name}: --qlog-dir {}: {e}", d.display());
            return 2;
        }
    }
    let before = CpuMark::now();
    let (records, conns) = match run(&plan, manifest.as_ref()) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("{name}: {e}");
            return 2;
        }
    };
    let after = CpuMark::now();
    if let Some(out) = out.as_mut() {
        let written = records.iter().try_for_each(|r| writeln!(out, "{}", r.to_json())).and_then(|_| out.flush());
        if let Err(e) = written {
            eprintln!("{name}: --requests: {e}");
        }
    }
    let s = summary(&plan, &records, conns, &before, &after, versions);
    println!("{s}");
    if records.iter().any(|r| r.error.is_some()) { 1 } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_as_go_writes_them() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("1500ms").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2.5s").unwrap(), Duration::from_millis(2500));
        assert!(parse_duration("30").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("3h").is_err());
    }

    #[test]
    fn authorities() {
        assert_eq!(split_authority("lab.test"), Some(("lab.test".into(), 443)));
        assert_eq!(split_authority("lab.test:8443"), Some(("lab.test".into(), 8443)));
        assert_eq!(split_authority("[fd00::1]:8443"), Some(("fd00::1".into(), 8443)));
        assert_eq!(split_authority("[fd00::1]"), Some(("fd00::1".into(), 443)));
        assert_eq!(split_authority("fd00::1"), None);
        assert_eq!(split_authority("lab.test:x"), None);
    }

    fn args(extra: &[&str]) -> Args {
        let mut v = vec!["c", "--base-url", "https://lab.test:8443", "--connect", "10.0.0.1:8443",
                         "--path-template", "/1KB/obj-{i}.bin", "--count", "3"];
        v.extend_from_slice(extra);
        Args::parse_from(v)
    }

    #[test]
    fn plan_paths_and_refusals() {
        let p = args(&[]).plan().unwrap();
        assert_eq!(p.paths, vec!["/1KB/obj-1.bin", "/1KB/obj-2.bin", "/1KB/obj-3.bin"]);
        assert_eq!((p.host.as_str(), p.authority.as_str()), ("lab.test", "lab.test:8443"));
        assert_eq!(p.policy, Policy::Shared);
        assert_eq!(args(&["--connections", "per-object"]).plan().unwrap().policy, Policy::PerObject);
        for (bad, field) in [(&["--proto", "h2"][..], "--proto"), (&["--connections", "pool:2"], "--connections"),
                             (&["--resumption", "tickets"], "--resumption"), (&["--parallel", "0"], "--parallel")] {
            let Usage(e) = args(bad).plan().unwrap_err();
            assert!(e.contains(field) && e.contains("accepted"), "{e}");
        }
    }

    #[test]
    fn records_check_the_manifest() {
        let body = b"hello";
        let sha = hex(&Sha256::digest(body));
        let m = Manifest([("1KB/obj-1.bin".to_string(), (5, sha))].into_iter().collect());
        let mut ok = Record::new(1, "/1KB/obj-1.bin".into());
        ok.started(1, true);
        ok.headers(Some(200), Some(5), "h3");
        ok.data(body);
        ok.finished(Some(&m));
        assert_eq!((ok.error.as_deref(), ok.sha256_ok, ok.bytes), (None, Some(true), 5));
        let mut bad = Record::new(1, "/1KB/obj-1.bin".into());
        bad.headers(Some(200), None, "h3");
        bad.data(b"hellO");
        bad.finished(Some(&m));
        assert_eq!((bad.error.as_deref(), bad.sha256_ok), (Some("manifest: sha256 mismatch"), Some(false)));
        let mut short = Record::new(1, "/1KB/obj-1.bin".into());
        short.headers(Some(200), Some(5), "h3");
        short.data(b"hel");
        short.finished(Some(&m));
        assert_eq!(short.error.as_deref(), Some("short body: got 3 of 5 bytes"));
        let mut missing = Record::new(2, "/1KB/obj-2.bin".into());
        missing.headers(Some(404), None, "h3");
        missing.finished(Some(&m));
        assert_eq!(missing.error.as_deref(), Some("status 404"));
    }
}
