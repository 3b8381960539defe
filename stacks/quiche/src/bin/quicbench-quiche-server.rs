//! quicbench-quiche-server: serves a directory read-only over HTTP/3 on Cloudflare's quiche
//! (QUIC + HTTP/3, BoringSSL). One thread, one UDP socket, quiche's sans-I/O connections driven
//! by a mio event loop.
//!
//! What every quicbench server does alike (docs/servers.md): GET (and HEAD) of a regular file
//! under the root answers 200 with its bytes and Content-Length, streamed from the file; a
//! directory answers with its index.html, never a listing; `..` and links leaving the root are
//! refused; every response carries Go-Quick's no-cache headers. TLS 1.3, 0-RTT accepted, no
//! address-validation Retry (as Caddy's quic-go listener).
//!
//! The sender is quiche's: its loss detection and the congestion controller chosen with `--cc`
//! (cubic, its default; reno; bbr2, quiche's BBRv2 from google/quiche). quiche cannot say which
//! controller a connection runs, so the per-connection log line names the one configured. With
//! `--qlog-dir` each connection writes quiche's qlog (JSON-SEQ, `<odcid>_server.sqlog`, `.part`
//! appended while its connection is open).

#[path = "../../../../h3server/src/files.rs"]
mod files;
#[path = "../common.rs"]
mod common;

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use common::{QlogFile, QLOG_OPEN_SUFFIX, hex, random_bytes};
use files::{Lookup, Root, content_type};
use quiche::h3::NameValue;
use sha2::{Digest, Sha256};

const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (quiche ", env!("QB_VERSION_QUICHE"),
                              ", boring-sys ", env!("QB_VERSION_BORING_SYS"), ")");

/// Go-Quick's no-cache headers (servers/base.py NO_CACHE_HEADERS), on every response.
const NO_CACHE_HEADERS: [(&str, &str); 3] =
    [("cache-control", "no-cache, no-store, must-revalidate"), ("pragma", "no-cache"), ("expires", "0")];

// Flow control, as quicbench-h3server (quinn) and Caddy's quic-go: the client's window limits a
// download, never this server; what the server advertises (for requests) is quic-go's maxima.
const STREAM_WINDOW: u64 = 6 << 20;
const CONNECTION_WINDOW: u64 = 15 << 20;
/// Requests in flight per connection: quic-go's default (Caddy's).
const MAX_STREAMS: u64 = 100;
/// The largest UDP payload sent: 1350 bytes (quiche's example servers), inside a 1500-byte MTU.
const MAX_DATAGRAM: usize = 1350;
/// Idle timeout (ms), quic-go's default.
const IDLE_TIMEOUT_MS: u64 = 30_000;
/// A file is read in chunks of this size: never whole into memory.
const CHUNK: usize = 64 << 10;

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum Cc {
    /// quiche's default: CUBIC (RFC 9438, with HyStart++)
    Cubic,
    /// Reno (RFC 9002's NewReno), named as quicbench names ngtcp2's and quinn's
    #[value(alias = "newreno")]
    Reno,
    /// quiche's BBRv2 (its gcongestion port of google/quiche's)
    Bbr2,
}

impl Cc {
    fn name(self) -> &'static str {
        match self {
            Cc::Cubic => "cubic",
            Cc::Reno => "reno",
            Cc::Bbr2 => "bbr2",
        }
    }
}

#[derive(Parser, Debug)]
#[command(name = "quicbench-quiche-server", version = VERSION,
          about = "Serve a directory read-only over HTTP/3 (quiche), as quicbench's lab servers do")]
struct Args {
    /// UDP address to listen on, ADDRESS:PORT ([ADDRESS]:PORT for IPv6)
    #[arg(long, value_name = "ADDRESS:PORT")]
    listen: SocketAddr,
    /// PEM file: the certificate chain (leaf first)
    #[arg(long, value_name = "PEM")]
    cert: PathBuf,
    /// PEM file: the private key
    #[arg(long, value_name = "PEM")]
    key: PathBuf,
    /// directory to serve
    #[arg(long, value_name = "DIR")]
    root: PathBuf,
    /// congestion controller of every connection's sender
    #[arg(long, value_enum, default_value_t = Cc::Cubic)]
    cc: Cc,
    /// write one qlog per connection here (<odcid>_server.sqlog)
    #[arg(long, value_name = "DIR")]
    qlog_dir: Option<PathBuf>,
    /// a further directory that links under the root may point into (repeatable)
    #[arg(long = "allow-dir", value_name = "DIR")]
    allow_dirs: Vec<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match serve(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("quicbench-quiche-server: {e}");
            ExitCode::from(2)
        }
    }
}

fn setup_error(what: &str, path: &Path, e: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("{what} {}: {e}", path.display()))
}

fn config(args: &Args) -> io::Result<quiche::Config> {
    let err = |e: quiche::Error| io::Error::other(format!("quiche: {e}"));
    let mut c = quiche::Config::new(quiche::PROTOCOL_VERSION).map_err(err)?;
    let cert = args.cert.to_str().ok_or_else(|| setup_error("--cert", &args.cert, "not UTF-8"))?;
    let key = args.key.to_str().ok_or_else(|| setup_error("--key", &args.key, "not UTF-8"))?;
    c.load_cert_chain_from_pem_file(cert).map_err(|e| setup_error("--cert", &args.cert, e))?;
    c.load_priv_key_from_pem_file(key).map_err(|e| setup_error("--key", &args.key, e))?;
    c.set_application_protos(quiche::h3::APPLICATION_PROTOCOL).map_err(err)?;
    c.set_max_idle_timeout(IDLE_TIMEOUT_MS);
    c.set_max_recv_udp_payload_size(MAX_DATAGRAM);
    c.set_max_send_udp_payload_size(MAX_DATAGRAM);
    c.set_initial_max_data(CONNECTION_WINDOW);
    c.set_initial_max_stream_data_bidi_local(STREAM_WINDOW);
    c.set_initial_max_stream_data_bidi_remote(STREAM_WINDOW);
    c.set_initial_max_stream_data_uni(STREAM_WINDOW);
    c.set_initial_max_streams_bidi(MAX_STREAMS);
    c.set_initial_max_streams_uni(MAX_STREAMS);
    c.set_max_connection_window(CONNECTION_WINDOW);
    c.set_max_stream_window(STREAM_WINDOW);
    c.set_disable_active_migration(true);
    c.enable_early_data();
    c.set_cc_algorithm_name(args.cc.name()).map_err(err)?;
    Ok(c)
}

/// A response being sent: headers not yet taken by quiche, then the body from its file.
struct Response {
    headers: Option<Vec<quiche::h3::Header>>,
    body: Body,
}

enum Body {
    /// a short in-memory body (errors)
    Bytes(Vec<u8>, usize),
    /// a file: what is left to send of it, and the chunk read but not yet taken by quiche
    File { file: File, path: PathBuf, left: u64, chunk: Vec<u8>, taken: usize },
    None,
}

struct Client {
    conn: quiche::Connection,
    h3: Option<quiche::h3::Connection>,
    responses: HashMap<u64, Response>,
    odcid: String,
    qlog: Option<(QlogFile, PathBuf, PathBuf)>,
}

fn serve(args: Args) -> io::Result<()> {
    let root = Root::new(&args.root, &args.allow_dirs).map_err(|e| setup_error("--root", &args.root, e))?;
    if let Some(d) = &args.qlog_dir {
        std::fs::create_dir_all(d).map_err(|e| setup_error("--qlog-dir", d, e))?;
    }
    let mut config = config(&args)?;
    let h3_config = quiche::h3::Config::new().map_err(|e| io::Error::other(format!("quiche h3: {e}")))?;
    let mut poll = mio::Poll::new()?;
    let mut events = mio::Events::with_capacity(1024);
    let mut socket = mio::net::UdpSocket::bind(args.listen)
        .map_err(|e| io::Error::other(format!("--listen {}: {e}", args.listen)))?;
    poll.registry().register(&mut socket, mio::Token(0), mio::Interest::READABLE)?;
    let local = socket.local_addr()?;
    // connection IDs: sha256(seed, the client's first DCID), so a repeated Initial finds its
    // connection (as quiche's examples do with an HMAC)
    let seed = random_bytes(32)?;
    eprintln!("quicbench-quiche-server {VERSION} listening on {} (udp), congestion control {}, root {}",
              args.listen, args.cc.name(), args.root.display());

    let mut clients: HashMap<Vec<u8>, Client> = HashMap::new();
    let mut buf = vec![0u8; 65535];
    let mut out = vec![0u8; MAX_DATAGRAM];
    let mut blocked: Option<(Vec<u8>, SocketAddr)> = None;
    loop {
        let timeout = clients.values().filter_map(|c| c.conn.timeout()).min();
        match poll.poll(&mut events, timeout) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        loop {
            let (len, from) = match socket.recv_from(&mut buf) {
                Ok(v) => v,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            let pkt = &mut buf[..len];
            let Ok(hdr) = quiche::Header::from_slice(pkt, quiche::MAX_CONN_ID_LEN) else { continue };
            let derived: Vec<u8> = Sha256::new().chain_update(&seed).chain_update(&hdr.dcid[..]).finalize()
                [..quiche::MAX_CONN_ID_LEN].to_vec();
            let key = if clients.contains_key(&hdr.dcid[..]) {
                hdr.dcid.to_vec()
            } else if clients.contains_key(&derived) {
                derived
            } else {
                if hdr.ty != quiche::Type::Initial {
                    continue;
                }
                if !quiche::version_is_supported(hdr.version) {
                    if let Ok(n) = quiche::negotiate_version(&hdr.scid, &hdr.dcid, &mut out) {
                        let _ = socket.send_to(&out[..n], from);
                    }
                    continue;
                }
                let scid = quiche::ConnectionId::from_ref(&derived);
                let mut conn = match quiche::accept(&scid, None, local, from, &mut config) {
                    Ok(c) => c,
                    Err(e) => {
                        eprintln!("connection from {from} refused: {e}");
                        continue;
                    }
                };
                let odcid = hex(&hdr.dcid);
                let qlog = args.qlog_dir.as_ref().and_then(|dir| {
                    let done = dir.join(format!("{odcid}_server.sqlog"));
                    let open = dir.join(format!("{odcid}_server.sqlog{QLOG_OPEN_SUFFIX}"));
                    match QlogFile::create(&open) {
                        Ok(f) => {
                            conn.set_qlog(Box::new(f.clone()), format!("quicbench-quiche-server {VERSION}"),
                                          format!("congestion_control={}", args.cc.name()));
                            Some((f, open, done))
                        }
                        Err(e) => {
                            eprintln!("connection {odcid}: no qlog: {e}");
                            None
                        }
                    }
                });
                // one line per connection: the controller configured (quiche cannot say which runs)
                eprintln!("connection {odcid} from {from}: congestion control {}", args.cc.name());
                clients.insert(derived.clone(), Client { conn, h3: None, responses: HashMap::new(), odcid, qlog });
                derived
            };
            let client = clients.get_mut(&key).expect("looked up above");
            if let Err(e) = client.conn.recv(pkt, quiche::RecvInfo { from, to: local }) {
                if e != quiche::Error::Done {
                    eprintln!("connection {}: recv: {e}", client.odcid);
                }
                continue;
            }
            if client.h3.is_none() && (client.conn.is_in_early_data() || client.conn.is_established()) {
                match quiche::h3::Connection::with_transport(&mut client.conn, &h3_config) {
                    Ok(h3) => client.h3 = Some(h3),
                    Err(e) => {
                        eprintln!("connection {}: HTTP/3: {e}", client.odcid);
                        let _ = client.conn.close(true, 0x101, b"h3 setup");
                        continue;
                    }
                }
            }
            if client.h3.is_some() {
                handle_requests(client, &root);
            }
        }
        // a packet the socket could not take last time goes first; until it is out, quiche is
        // asked for no more (what it builds counts as sent)
        if let Some((pkt, to)) = &blocked {
            match socket.send_to(pkt, *to) {
                Ok(_) => {
                    blocked = None;
                    poll.registry().reregister(&mut socket, mio::Token(0), mio::Interest::READABLE)?;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => {
                    eprintln!("sendto {to}: {e}");
                    blocked = None;
                }
            }
        }
        for client in clients.values_mut() {
            client.conn.on_timeout();
            if client.h3.is_some() {
                // responses blocked on flow control or congestion go on as the stream has room
                let writable: Vec<u64> = client.conn.writable().collect();
                for sid in writable {
                    send_response(client, sid);
                }
            }
            while blocked.is_none() {
                let (n, info) = match client.conn.send(&mut out) {
                    Ok(v) => v,
                    Err(quiche::Error::Done) => break,
                    Err(e) => {
                        eprintln!("connection {}: send: {e}", client.odcid);
                        let _ = client.conn.close(false, 0x1, b"send failed");
                        break;
                    }
                };
                match socket.send_to(&out[..n], info.to) {
                    Ok(_) => {}
                    // the socket's buffer is full: the packet waits for it (not dropped, which
                    // quiche would count as a loss), and the loop wakes when it has room
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        blocked = Some((out[..n].to_vec(), info.to));
                        poll.registry().reregister(&mut socket, mio::Token(0),
                                                   mio::Interest::READABLE | mio::Interest::WRITABLE)?;
                    }
                    Err(e) => eprintln!("connection {}: sendto: {e}", client.odcid),
                }
            }
        }
        clients.retain(|_, c| {
            if !c.conn.is_closed() {
                return true;
            }
            if let Some((f, open, done)) = c.qlog.take() {
                if let Err(e) = f.flush_all().and_then(|_| std::fs::rename(&open, &done)) {
                    eprintln!("connection {}: qlog {}: {e}", c.odcid, open.display());
                }
            }
            false
        });
    }
}

fn header(name: &str, value: &str) -> quiche::h3::Header {
    quiche::h3::Header::new(name.as_bytes(), value.as_bytes())
}

/// Read the HTTP/3 events of a connection; a request's headers start its response.
fn handle_requests(client: &mut Client, root: &Root) {
    loop {
        let h3 = client.h3.as_mut().expect("checked by the caller");
        match h3.poll(&mut client.conn) {
            Ok((sid, quiche::h3::Event::Headers { list, .. })) => {
                let resp = build_response(&list, root);
                client.responses.insert(sid, resp);
                send_response(client, sid);
            }
            Ok((sid, quiche::h3::Event::Data)) => {
                // a request body (none is expected): read and dropped
                let mut sink = [0u8; 4096];
                while let Ok(n) = h3.recv_body(&mut client.conn, sid, &mut sink) {
                    if n == 0 {
                        break;
                    }
                }
            }
            Ok((sid, quiche::h3::Event::Reset(_))) => {
                client.responses.remove(&sid);
            }
            Ok(_) => {}
            Err(quiche::h3::Error::Done) => break,
            Err(e) => {
                eprintln!("connection {}: HTTP/3: {e}", client.odcid);
                break;
            }
        }
    }
}

fn build_response(request: &[quiche::h3::Header], root: &Root) -> Response {
    let (mut method, mut path) = ("", "");
    for h in request {
        match h.name() {
            b":method" => method = std::str::from_utf8(h.value()).unwrap_or(""),
            b":path" => path = std::str::from_utf8(h.value()).unwrap_or(""),
            _ => {}
        }
    }
    let path = path.split('?').next().unwrap_or("");
    let head = method == "HEAD";
    let found = if method == "GET" || head { root.lookup(path) } else { Lookup::BadRequest };
    let (status, file) = match found {
        Lookup::File(p) => match File::open(&p).and_then(|f| f.metadata().map(|m| (f, m.len()))) {
            Ok((f, len)) => (200, Some((f, p, len))),
            Err(_) => (403, None),
        },
        Lookup::NotFound => (404, None),
        Lookup::Forbidden => (403, None),
        Lookup::BadRequest if !(method == "GET" || head) => (405, None),
        Lookup::BadRequest => (400, None),
    };
    let mut headers = vec![header(":status", &status.to_string())];
    headers.extend(NO_CACHE_HEADERS.iter().map(|(k, v)| header(k, v)));
    let body = match file {
        Some((file, path, len)) => {
            headers.push(header("content-type", content_type(&path)));
            headers.push(header("content-length", &len.to_string()));
            if head {
                Body::None
            } else if len == 0 {
                Body::Bytes(Vec::new(), 0) // an empty body still ends with the stream's FIN
            } else {
                Body::File { file, path, left: len, chunk: Vec::new(), taken: 0 }
            }
        }
        None => {
            let reason = match status {
                404 => "Not Found",
                403 => "Forbidden",
                405 => "Method Not Allowed",
                _ => "Bad Request",
            };
            let text = format!("{reason}\n").into_bytes();
            headers.push(header("content-type", "text/plain; charset=utf-8"));
            headers.push(header("content-length", &text.len().to_string()));
            if status == 405 {
                headers.push(header("allow", "GET, HEAD"));
            }
            if head { Body::None } else { Body::Bytes(text, 0) }
        }
    };
    Response { headers: Some(headers), body }
}

/// Give quiche as much of a response as the stream takes now; the rest waits for `writable()`.
fn send_response(client: &mut Client, sid: u64) {
    let Some(h3) = client.h3.as_mut() else { return };
    let conn = &mut client.conn;
    let Some(resp) = client.responses.get_mut(&sid) else { return };
    if let Some(headers) = &resp.headers {
        let fin = matches!(resp.body, Body::None);
        match h3.send_response(conn, sid, headers, fin) {
            Ok(()) => resp.headers = None,
            Err(quiche::h3::Error::StreamBlocked) => return,
            Err(e) => {
                eprintln!("connection {}: stream {sid}: {e}", client.odcid);
                client.responses.remove(&sid);
                return;
            }
        }
    }
    let done = match &mut resp.body {
        Body::None => true,
        Body::Bytes(data, taken) => match h3.send_body(conn, sid, &data[*taken..], true) {
            Ok(n) => {
                *taken += n;
                *taken == data.len()
            }
            Err(quiche::h3::Error::Done) if data.is_empty() => false,
            Err(quiche::h3::Error::Done) => false,
            Err(_) => true,
        },
        Body::File { file, path, left, chunk, taken } => loop {
            if *taken == chunk.len() {
                if *left == 0 {
                    break true;
                }
                chunk.resize(CHUNK.min(*left as usize), 0);
                match file.read(chunk) {
                    Ok(n) if n > 0 => {
                        chunk.truncate(n);
                        *left -= n as u64;
                        *taken = 0;
                    }
                    _ => {
                        // the file shrank or failed under us: reset rather than end a short body
                        eprintln!("connection {}: {} shrank while being sent", client.odcid, path.display());
                        let _ = conn.stream_shutdown(sid, quiche::Shutdown::Write, 0x102);
                        break true;
                    }
                }
            }
            let fin = *left == 0;
            match h3.send_body(conn, sid, &chunk[*taken..], fin) {
                Ok(n) => {
                    *taken += n;
                    if *taken < chunk.len() {
                        break false; // the stream took what it could: wait for room
                    }
                    if fin {
                        break true;
                    }
                }
                Err(quiche::h3::Error::Done) => break false,
                Err(e) => {
                    eprintln!("connection {}: stream {sid}: {e}", client.odcid);
                    break true;
                }
            }
        },
    };
    if done {
        client.responses.remove(&sid);
    }
}
