//! quicbench-quiche-client: fetches objects over HTTP/3 on Cloudflare's quiche, speaking as
//! quicbench's `qb-load` does (its command line, per-request records, summary: stacks/qbfetch).
//!
//! One thread drives every connection (each its own UDP socket, connected to the server) with a
//! mio event loop. `--connections shared`: one connection, at most `--parallel` requests on it
//! at once; `per-object`: one connection per request, at most `--parallel` connections at once,
//! each closed as soon as its response is in (Go-Quick's getFiles). The server's certificate is
//! verified against `--ca` and the base URL's host. With `--qlog-dir` each connection writes
//! quiche's qlog (`<odcid>_client.sqlog`).

#[path = "../common.rs"]
mod common;

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use common::{QlogFile, QLOG_OPEN_SUFFIX, hex, random_bytes};
use qbfetch::{Manifest, Plan, Policy, Record, now_ns};
use quiche::h3::NameValue;
use serde_json::json;

/// The client's receive windows: what quic-go's client (qb-load's) grows to, from the start.
const STREAM_WINDOW: u64 = 6 << 20;
const CONNECTION_WINDOW: u64 = 15 << 20;
const MAX_DATAGRAM: usize = 1350;
const IDLE_TIMEOUT_MS: u64 = 30_000;
/// H3_NO_ERROR: the application's close once its responses are in.
const H3_NO_ERROR: u64 = 0x100;

fn versions() -> serde_json::Value {
    json!({"quicbench_quiche_client": env!("CARGO_PKG_VERSION"), "quiche": env!("QB_VERSION_QUICHE"),
           "boring_sys": env!("QB_VERSION_BORING_SYS")})
}

fn main() -> ExitCode {
    ExitCode::from(qbfetch::main_with("quicbench-quiche-client", versions(), run) as u8)
}

fn config(plan: &Plan) -> Result<quiche::Config, String> {
    let err = |e: quiche::Error| format!("quiche: {e}");
    let mut c = quiche::Config::new(quiche::PROTOCOL_VERSION).map_err(err)?;
    c.set_application_protos(quiche::h3::APPLICATION_PROTOCOL).map_err(err)?;
    match &plan.ca {
        Some(ca) => {
            let p = ca.to_str().ok_or("--ca: not UTF-8")?;
            c.load_verify_locations_from_file(p).map_err(|e| format!("--ca {p}: {e}"))?;
            c.verify_peer(true);
        }
        None => c.verify_peer(true), // the system's roots
    }
    c.set_max_idle_timeout(IDLE_TIMEOUT_MS);
    c.set_max_recv_udp_payload_size(MAX_DATAGRAM);
    c.set_max_send_udp_payload_size(MAX_DATAGRAM);
    c.set_initial_max_data(CONNECTION_WINDOW);
    c.set_initial_max_stream_data_bidi_local(STREAM_WINDOW);
    c.set_initial_max_stream_data_bidi_remote(STREAM_WINDOW);
    c.set_initial_max_stream_data_uni(STREAM_WINDOW);
    c.set_initial_max_streams_bidi(100);
    c.set_initial_max_streams_uni(100);
    c.set_max_connection_window(CONNECTION_WINDOW);
    c.set_max_stream_window(STREAM_WINDOW);
    c.set_disable_active_migration(true);
    Ok(c)
}

/// One QUIC connection and the requests on it.
struct Conn {
    id: usize,
    socket: mio::net::UdpSocket,
    local: SocketAddr,
    conn: quiche::Connection,
    h3: Option<quiche::h3::Connection>,
    odcid: String,
    qlog: Option<(QlogFile, PathBuf, PathBuf)>,
    connect_start_ns: i64,
    handshake_ns: Option<i64>,
    /// requests (record indexes) waiting to be sent
    queued: VecDeque<usize>,
    /// stream id -> record index
    streams: HashMap<u64, usize>,
    /// requests put on this connection so far
    assigned: usize,
    /// closed by us (its responses are in): dropped once the CONNECTION_CLOSE is sent
    closing: bool,
    /// a packet its socket could not take yet (sent before quiche is asked for more)
    blocked: Option<Vec<u8>>,
}

impl Conn {
    fn open(id: usize, plan: &Plan, config: &mut quiche::Config, poll: &mio::Poll) -> io::Result<Conn> {
        let bind: SocketAddr = if plan.connect.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse().expect("literal");
        let mut socket = mio::net::UdpSocket::bind(bind)?;
        socket.connect(plan.connect)?;
        poll.registry().register(&mut socket, mio::Token(id), mio::Interest::READABLE)?;
        let local = socket.local_addr()?;
        let scid = random_bytes(quiche::MAX_CONN_ID_LEN)?;
        let connect_start_ns = now_ns();
        let mut conn = quiche::connect(Some(&plan.host), &quiche::ConnectionId::from_ref(&scid), local, plan.connect, config)
            .map_err(|e| io::Error::other(format!("quiche connect: {e}")))?;
        let odcid = hex(conn.destination_id().as_ref());
        let qlog = match &plan.qlog_dir {
            Some(dir) => {
                let done = dir.join(format!("{odcid}_client.sqlog"));
                let open = dir.join(format!("{odcid}_client.sqlog{QLOG_OPEN_SUFFIX}"));
                let f = QlogFile::create(&open)?;
                conn.set_qlog(Box::new(f.clone()), format!("quicbench-quiche-client {}", env!("CARGO_PKG_VERSION")),
                              format!("connection {id}"));
                Some((f, open, done))
            }
            None => None,
        };
        Ok(Conn { id, socket, local, conn, h3: None, odcid, qlog, connect_start_ns, handshake_ns: None,
                  queued: VecDeque::new(), streams: HashMap::new(), assigned: 0, closing: false, blocked: None })
    }

    fn in_flight(&self) -> usize {
        self.queued.len() + self.streams.len()
    }

    /// Put request `k` on this connection (sent once HTTP/3 is up and a stream is free).
    fn assign(&mut self, k: usize, rec: &mut Record) {
        rec.started(self.id, self.assigned == 0);
        self.assigned += 1;
        self.queued.push_back(k);
    }

    /// Its qlog, whole on disk under its final name.
    fn finish_qlog(&mut self) {
        if let Some((f, open, done)) = self.qlog.take() {
            if let Err(e) = f.flush_all().and_then(|_| std::fs::rename(&open, &done)) {
                eprintln!("connection {}: qlog {}: {e}", self.odcid, open.display());
            }
        }
    }

    /// Why the connection ended, for the requests it leaves unanswered.
    fn close_reason(&self) -> String {
        if self.conn.is_timed_out() {
            return "connection idle timeout".into();
        }
        if let Some(e) = self.conn.peer_error() {
            return format!("connection closed by the server: code {:#x} {}", e.error_code, String::from_utf8_lossy(&e.reason));
        }
        if let Some(e) = self.conn.local_error() {
            return format!("connection closed: code {:#x} {}", e.error_code, String::from_utf8_lossy(&e.reason));
        }
        "connection closed".into()
    }
}

fn run(plan: &Plan, manifest: Option<&Manifest>) -> Result<(Vec<Record>, usize), String> {
    let mut config = config(plan)?;
    let h3_config = quiche::h3::Config::new().map_err(|e| format!("quiche h3: {e}"))?;
    let mut poll = mio::Poll::new().map_err(|e| e.to_string())?;
    let mut events = mio::Events::with_capacity(1024);
    let mut records: Vec<Record> = plan.paths.iter().enumerate().map(|(k, p)| Record::new(k + 1, p.clone())).collect();
    let deadline = Instant::now() + plan.timeout;
    let mut next = 0usize; // the next request not yet put on a connection
    let mut conns: Vec<Conn> = Vec::new();
    let mut opened = 0usize;
    let mut buf = vec![0u8; 65535];
    let mut out = vec![0u8; MAX_DATAGRAM];

    loop {
        // put waiting requests on connections, opening them as the policy says
        match plan.policy {
            Policy::Shared => {
                if conns.is_empty() && opened == 0 {
                    records[next].begin(); // the first request opens the connection
                    opened += 1;
                    let c = Conn::open(opened, plan, &mut config, &poll).map_err(|e| format!("connection: {e}"))?;
                    conns.push(c);
                }
                if let Some(c) = conns.iter_mut().find(|c| !c.closing) {
                    while next < records.len() && c.in_flight() < plan.parallel {
                        c.assign(next, &mut records[next]);
                        next += 1;
                    }
                }
            }
            Policy::PerObject => {
                while next < records.len() && conns.iter().filter(|c| !c.closing).count() < plan.parallel {
                    records[next].begin();
                    opened += 1;
                    match Conn::open(opened, plan, &mut config, &poll) {
                        Ok(mut c) => {
                            c.assign(next, &mut records[next]);
                            conns.push(c);
                        }
                        Err(e) => records[next].failed(format!("connection: {e}")),
                    }
                    next += 1;
                }
            }
        }
        if next == records.len() && conns.is_empty() {
            break;
        }
        let now = Instant::now();
        if now >= deadline {
            for r in records.iter_mut() {
                r.failed("timeout");
            }
            for c in conns.iter_mut() {
                let _ = c.conn.close(true, H3_NO_ERROR, b"deadline");
                flush(c, &mut out, &poll);
                c.finish_qlog();
            }
            break;
        }
        // what is ready goes out before the wait: a new connection's Initial, requests just put on
        // an open connection
        for c in conns.iter_mut() {
            if c.h3.is_some() {
                send_requests(c, plan, &mut records);
            }
            flush(c, &mut out, &poll);
        }
        let timeout = conns.iter().filter_map(|c| c.conn.timeout()).min().unwrap_or(Duration::from_secs(1));
        match poll.poll(&mut events, Some(timeout.min(deadline - now))) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("poll: {e}")),
        }
        for c in conns.iter_mut() {
            loop {
                let (n, from) = match c.socket.recv_from(&mut buf) {
                    Ok(v) => v,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    // e.g. ICMP port unreachable: quiche's timers decide the connection's end
                    Err(_) => break,
                };
                if let Err(e) = c.conn.recv(&mut buf[..n], quiche::RecvInfo { from, to: c.local }) {
                    if e != quiche::Error::Done {
                        eprintln!("connection {}: recv: {e}", c.odcid);
                    }
                }
            }
            c.conn.on_timeout();
            if c.handshake_ns.is_none() && c.conn.is_established() {
                c.handshake_ns = Some(now_ns());
            }
            if c.h3.is_none() && c.conn.is_established() && !c.closing {
                match quiche::h3::Connection::with_transport(&mut c.conn, &h3_config) {
                    Ok(h3) => c.h3 = Some(h3),
                    Err(e) => {
                        let _ = c.conn.close(true, 0x101, b"h3 setup");
                        eprintln!("connection {}: HTTP/3: {e}", c.odcid);
                    }
                }
            }
            if c.h3.is_some() {
                send_requests(c, plan, &mut records);
                read_responses(c, &mut records, manifest, &mut buf);
            }
            // per-object: the connection's one response is in; shared: every response is in
            let all_in = next == records.len() || plan.policy == Policy::PerObject;
            if !c.closing && c.in_flight() == 0 && c.assigned > 0 && all_in {
                let _ = c.conn.close(true, H3_NO_ERROR, b"");
                c.closing = true;
            }
            flush(c, &mut out, &poll);
            if c.conn.is_closed() || c.closing {
                let reason = c.close_reason();
                for k in c.queued.drain(..).chain(c.streams.drain().map(|(_, k)| k)) {
                    records[k].connection_times(c.connect_start_ns, c.handshake_ns);
                    records[k].failed(reason.clone());
                }
            }
        }
        conns.retain_mut(|c| {
            if c.conn.is_closed() || c.closing {
                c.finish_qlog();
                false
            } else {
                true
            }
        });
        if plan.policy == Policy::Shared && conns.is_empty() && next < records.len() {
            // the shared connection ended early: the requests not yet put on it cannot be made
            for r in &mut records[next..] {
                r.failed("connection closed before the request could be sent");
            }
            next = records.len();
        }
    }
    Ok((records, opened))
}

/// Send what quiche has for the connection. A packet the socket cannot take waits for room (not
/// dropped, which quiche would count as a loss) and quiche is asked for no more until it is out.
fn flush(c: &mut Conn, out: &mut [u8], poll: &mio::Poll) {
    if let Some(pkt) = &c.blocked {
        match c.socket.send(pkt) {
            Ok(_) => {
                c.blocked = None;
                let _ = poll.registry().reregister(&mut c.socket, mio::Token(c.id), mio::Interest::READABLE);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(_) => c.blocked = None,
        }
    }
    loop {
        let (n, _) = match c.conn.send(out) {
            Ok(v) => v,
            Err(quiche::Error::Done) => break,
            Err(e) => {
                eprintln!("connection {}: send: {e}", c.odcid);
                let _ = c.conn.close(false, 0x1, b"send failed");
                break;
            }
        };
        match c.socket.send(&out[..n]) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                c.blocked = Some(out[..n].to_vec());
                let _ = poll.registry().reregister(&mut c.socket, mio::Token(c.id),
                                                   mio::Interest::READABLE | mio::Interest::WRITABLE);
                break;
            }
            Err(_) => break,
        }
    }
}

fn send_requests(c: &mut Conn, plan: &Plan, records: &mut [Record]) {
    let h3 = c.h3.as_mut().expect("checked by the caller");
    while let Some(&k) = c.queued.front() {
        let req = [
            quiche::h3::Header::new(b":method", b"GET"),
            quiche::h3::Header::new(b":scheme", b"https"),
            quiche::h3::Header::new(b":authority", plan.authority.as_bytes()),
            quiche::h3::Header::new(b":path", records[k].path.as_bytes()),
            quiche::h3::Header::new(b"user-agent", b"quicbench-quiche-client"),
        ];
        match h3.send_request(&mut c.conn, &req, true) {
            Ok(sid) => {
                c.queued.pop_front();
                c.streams.insert(sid, k);
            }
            // no stream credit or room yet: the rest wait
            Err(quiche::h3::Error::StreamBlocked) | Err(quiche::h3::Error::TransportError(quiche::Error::StreamLimit))
            | Err(quiche::h3::Error::Done) => break,
            Err(e) => {
                c.queued.pop_front();
                records[k].failed(format!("sending the request: {e}"));
            }
        }
    }
}

fn read_responses(c: &mut Conn, records: &mut [Record], manifest: Option<&Manifest>, buf: &mut [u8]) {
    let h3 = c.h3.as_mut().expect("checked by the caller");
    let proto = if c.conn.application_proto() == b"h3" { "h3" } else { "other" };
    loop {
        match h3.poll(&mut c.conn) {
            Ok((sid, quiche::h3::Event::Headers { list, .. })) => {
                let Some(&k) = c.streams.get(&sid) else { continue };
                let value = |name: &[u8]| {
                    list.iter().find(|h| h.name() == name).and_then(|h| std::str::from_utf8(h.value()).ok())
                        .and_then(|v| v.parse().ok())
                };
                records[k].headers(value(b":status").map(|v: u64| v as u16), value(b"content-length"), proto);
            }
            Ok((sid, quiche::h3::Event::Data)) => {
                let k = c.streams.get(&sid).copied();
                while let Ok(n) = h3.recv_body(&mut c.conn, sid, buf) {
                    if let Some(k) = k {
                        records[k].data(&buf[..n]);
                    }
                }
            }
            Ok((sid, quiche::h3::Event::Finished)) => {
                if let Some(k) = c.streams.remove(&sid) {
                    records[k].connection_times(c.connect_start_ns, c.handshake_ns);
                    records[k].finished(manifest);
                }
            }
            Ok((sid, quiche::h3::Event::Reset(code))) => {
                if let Some(k) = c.streams.remove(&sid) {
                    records[k].connection_times(c.connect_start_ns, c.handshake_ns);
                    records[k].failed(format!("response reset by the server: code {code:#x}"));
                }
            }
            Ok(_) => {}
            Err(quiche::h3::Error::Done) => break,
            Err(e) => {
                eprintln!("connection {}: HTTP/3: {e}", c.odcid);
                let _ = c.conn.close(true, 0x101, b"h3 error");
                break;
            }
        }
    }
}
