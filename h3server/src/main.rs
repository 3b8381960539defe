//! quicbench-h3server: serves a directory read-only over HTTP/3 on quinn (QUIC) + h3, the
//! Rust stack beside Caddy's quic-go. One process, tokio on every core (as Caddy's Go runtime).
//!
//! What every quicbench server does alike (docs/servers.md): GET (and HEAD) of a regular file
//! under the root answers 200 with its bytes and Content-Length, streamed from the file; a
//! directory answers with its index.html, never a listing; `..` and links leaving the root are
//! refused; every response carries Go-Quick's no-cache headers. TLS 1.3 (QUIC has no other),
//! with session resumption and 0-RTT accepted, as Caddy's quic-go listener does.
//!
//! The sender is quinn's: its loss detection (RFC 9002's fixed thresholds: 3 packets, 9/8 RTT)
//! and the congestion controller chosen with `--cc`. With `--qlog-dir` each connection writes
//! quinn's qlog (JSON-SEQ, `<odcid>_server.sqlog`, as quic-go names them; `.part` appended while
//! its connection is open).

mod files;

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use clap::{Parser, ValueEnum};
use files::{Lookup, Root, content_type};
use http::{HeaderValue, Method, Response, StatusCode, header};
use quinn::congestion::{Bbr, BbrConfig, Cubic, CubicConfig, NewReno, NewRenoConfig};
use quinn::crypto::rustls::QuicServerConfig;
use quinn::{QlogConfig, TransportConfig, VarInt};
use rustls::server::{ServerSessionMemoryCache, StoresServerSessions};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::AsyncReadExt;

/// `--version`: the program and the stack it is built on (Cargo.lock's versions, by build.rs).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (quinn ",
    env!("QB_VERSION_QUINN"),
    ", quinn-proto ",
    env!("QB_VERSION_QUINN_PROTO"),
    ", h3 ",
    env!("QB_VERSION_H3"),
    ", h3-quinn ",
    env!("QB_VERSION_H3_QUINN"),
    ", rustls ",
    env!("QB_VERSION_RUSTLS"),
    ")"
);

/// Go-Quick's no-cache headers (servers/base.py NO_CACHE_HEADERS), on every response.
const NO_CACHE_HEADERS: [(&str, &str); 3] =
    [("cache-control", "no-cache, no-store, must-revalidate"), ("pragma", "no-cache"), ("expires", "0")];

// Flow-control windows. The server is the sender of a download: what limits its bytes in
// flight is the client's receive window (quic-go and Chromium auto-tune theirs up to 6 MiB per
// stream and 15 MiB per connection) and the congestion controller, never this server. So:
// - the windows it advertises (what a client may send it: requests) are those same maxima, as
//   Caddy's quic-go advertises them (quinn's defaults: 1.25 MB per stream, unlimited in total);
// - its send window (bytes sent and not yet acknowledged, plus buffered, over all streams) is
//   32 MiB, twice the largest client window: quinn's default (10 MB) would cap goodput below
//   what the client allows past 10 MB of BDP (800 Mbit/s at 100 ms).
const STREAM_RECEIVE_WINDOW: u32 = 6 << 20;
const CONNECTION_RECEIVE_WINDOW: u32 = 15 << 20;
const SEND_WINDOW: u64 = 32 << 20;
/// Requests in flight per connection: quic-go's default (Caddy's), and quinn's.
const MAX_STREAMS: u32 = 100;
/// A file is sent in chunks of this size: never read whole into memory.
const CHUNK: usize = 64 << 10;

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum Cc {
    /// quinn's default: CUBIC (RFC 9438)
    Cubic,
    /// NewReno, RFC 9002's reference controller (named as quicbench names ngtcp2's and quic-go's)
    #[value(alias = "newreno")]
    Reno,
    /// quinn's BBR (version 1, marked experimental by quinn)
    Bbr,
}

impl Cc {
    fn name(self) -> &'static str {
        match self {
            Cc::Cubic => "cubic",
            Cc::Reno => "reno",
            Cc::Bbr => "bbr",
        }
    }
}

#[derive(Parser, Debug)]
#[command(name = "quicbench-h3server", version = VERSION,
          about = "Serve a directory read-only over HTTP/3 (quinn + h3), as quicbench's lab servers do")]
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
            eprintln!("quicbench-h3server: {e}");
            ExitCode::from(2)
        }
    }
}

/// Everything that can be wrong before the first packet, with what it was about.
fn setup_error(what: &str, path: &Path, e: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("{what} {}: {e}", path.display()))
}

fn tls_config(cert: &Path, key: &Path) -> io::Result<QuicServerConfig> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<Result<_, _>>())
        .map_err(|e| setup_error("--cert", cert, e))?;
    if certs.is_empty() {
        return Err(setup_error("--cert", cert, "no certificate in it"));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| setup_error("--key", key, e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .and_then(|b| b.with_no_client_auth().with_single_cert(certs, key))
        .map_err(|e| io::Error::other(format!("TLS: {e}")))?;
    tls.alpn_protocols = vec![b"h3".to_vec()];
    tls.max_early_data_size = u32::MAX; // 0-RTT accepted (quinn requires 0 or u32::MAX), as Caddy does
    tls.session_storage = Arc::new(ReusableTickets(ServerSessionMemoryCache::new(TICKETS_KEPT)));
    QuicServerConfig::try_from(tls).map_err(|e| io::Error::other(format!("TLS: {e}")))
}

/// Session tickets kept (each connection gets two).
const TICKETS_KEPT: usize = 4096;

/// Session tickets usable more than once, as Caddy's (quic-go's) are. rustls accepts 0-RTT only
/// with tickets it stores itself, and by default spends each on its first use (RFC 8446 §8.1
/// anti-replay); a quic-go client hands its one cached ticket to every connection it opens at
/// once, so all but the first would resume without 0-RTT, or not at all. In a lab replayed GETs
/// are harmless; a workload's resumption mode (tickets, 0rtt) then means the same on both servers.
#[derive(Debug)]
struct ReusableTickets(Arc<ServerSessionMemoryCache>);

impl StoresServerSessions for ReusableTickets {
    fn put(&self, id: Vec<u8>, value: Vec<u8>) -> bool {
        self.0.put(id, value)
    }
    fn get(&self, id: &[u8]) -> Option<Vec<u8>> {
        self.0.get(id)
    }
    fn take(&self, id: &[u8]) -> Option<Vec<u8>> {
        self.0.get(id)
    }
    fn can_cache(&self) -> bool {
        true
    }
}

/// A connection's transport: the windows above, the chosen congestion controller, its qlog.
fn transport(cc: Cc, qlog: Option<quinn::QlogStream>) -> TransportConfig {
    let mut t = TransportConfig::default();
    t.stream_receive_window(VarInt::from_u32(STREAM_RECEIVE_WINDOW))
        .receive_window(VarInt::from_u32(CONNECTION_RECEIVE_WINDOW))
        .send_window(SEND_WINDOW)
        .max_concurrent_bidi_streams(VarInt::from_u32(MAX_STREAMS));
    match cc {
        Cc::Cubic => t.congestion_controller_factory(Arc::new(CubicConfig::default())),
        Cc::Reno => t.congestion_controller_factory(Arc::new(NewRenoConfig::default())),
        Cc::Bbr => t.congestion_controller_factory(Arc::new(BbrConfig::default())),
    };
    t.qlog_stream(qlog);
    t
}

/// The congestion controller a connection really runs, read back from quinn (not from the flag).
fn running_cc(conn: &quinn::Connection) -> &'static str {
    let any = conn.congestion_state().into_any();
    if any.is::<Cubic>() {
        "cubic"
    } else if any.is::<NewReno>() {
        "reno"
    } else if any.is::<Bbr>() {
        "bbr"
    } else {
        "unknown"
    }
}

/// A qlog file behind a buffer (quinn writes an event per packet). While its connection is open
/// it is `<odcid>_server.sqlog.part`, flushed every FLUSH_EVERY; when the connection has closed
/// it is flushed and renamed `<odcid>_server.sqlog`: a reader waits for that (quicbench's trial
/// does, run/recovery.py) and so finds it whole.
#[derive(Clone)]
struct QlogFile(Arc<Mutex<BufWriter<File>>>);

const FLUSH_EVERY: Duration = Duration::from_millis(50);
const QLOG_OPEN_SUFFIX: &str = ".part";

impl QlogFile {
    fn create(path: &Path) -> io::Result<QlogFile> {
        let f = File::create(path)?;
        Ok(QlogFile(Arc::new(Mutex::new(BufWriter::with_capacity(256 << 10, f)))))
    }
}

impl Write for QlogFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.lock().unwrap().flush()
    }
}

fn serve(args: Args) -> io::Result<()> {
    let root = Root::new(&args.root, &args.allow_dirs).map_err(|e| setup_error("--root", &args.root, e))?;
    if let Some(d) = &args.qlog_dir {
        std::fs::create_dir_all(d).map_err(|e| setup_error("--qlog-dir", d, e))?;
    }
    let crypto = Arc::new(tls_config(&args.cert, &args.key)?);
    let mut base = quinn::ServerConfig::with_crypto(crypto);
    base.transport_config(Arc::new(transport(args.cc, None)));
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async move {
        let endpoint = quinn::Endpoint::server(base.clone(), args.listen)
            .map_err(|e| io::Error::other(format!("--listen {}: {e}", args.listen)))?;
        eprintln!("quicbench-h3server {VERSION} listening on {} (udp), congestion control {}, root {}",
                  args.listen, args.cc.name(), args.root.display());
        let root = Arc::new(root);
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        loop {
            let incoming = tokio::select! {
                i = endpoint.accept() => match i { Some(i) => i, None => break },
                _ = term.recv() => break,
                _ = tokio::signal::ctrl_c() => break,
            };
            // a fresh transport per connection: its own qlog file
            let odcid = incoming.orig_dst_cid().to_string();
            let mut qlog_file = None;
            let mut config = base.clone();
            if let Some(dir) = &args.qlog_dir {
                let done = dir.join(format!("{odcid}_server.sqlog"));
                let open = dir.join(format!("{odcid}_server.sqlog{QLOG_OPEN_SUFFIX}"));
                match QlogFile::create(&open) {
                    Ok(f) => {
                        let mut q = QlogConfig::default();
                        q.writer(Box::new(f.clone()))
                            .title(Some(format!("quicbench-h3server {VERSION}")))
                            .description(Some(format!("congestion_control={}", args.cc.name())));
                        config.transport_config(Arc::new(transport(args.cc, q.into_stream())));
                        qlog_file = Some((f, open, done));
                    }
                    Err(e) => eprintln!("connection {odcid}: no qlog: {e}"),
                }
            }
            let root = root.clone();
            tokio::spawn(async move {
                let remote = incoming.remote_address();
                // true if a connection was made (not, e.g., for a late Initial packet whose
                // connection ID quinn has retired: it looks like a new connection and fails)
                let serve = async {
                    match incoming.accept_with(Arc::new(config)) {
                        Ok(connecting) => {
                            if let Err(e) = connection(connecting, &odcid, remote, root).await {
                                eprintln!("connection {odcid} from {remote} ended: {e}");
                            }
                            true
                        }
                        Err(e) => {
                            eprintln!("connection {odcid} from {remote} refused: {e}");
                            false
                        }
                    }
                };
                let Some((mut f, open, done)) = qlog_file else {
                    serve.await;
                    return;
                };
                tokio::pin!(serve);
                let mut tick = tokio::time::interval(FLUSH_EVERY);
                let made = loop {
                    tokio::select! {
                        made = &mut serve => break made,
                        _ = tick.tick() => { let _ = f.flush(); }
                    }
                };
                // closed: whole on disk, under its final name (quinn may still log its
                // draining); no qlog of a connection never made
                let kept = if made { f.flush().and_then(|_| std::fs::rename(&open, &done)) } else { std::fs::remove_file(&open) };
                if let Err(e) = kept {
                    eprintln!("connection {odcid}: qlog {}: {e}", open.display());
                }
            });
        }
        endpoint.close(VarInt::from_u32(0x100), b"server stopping"); // H3_NO_ERROR
        let _ = tokio::time::timeout(Duration::from_secs(1), endpoint.wait_idle()).await;
        Ok(())
    })
}

async fn connection(connecting: quinn::Connecting, odcid: &str, remote: SocketAddr, root: Arc<Root>)
                    -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    // 0.5-RTT: a request that came in 0-RTT is answered at once, as quic-go's early listener does.
    // Only once the ClientHello is processed (handshake data known): taken at once, about 1
    // connection in 5 was never answered (no stream data from the server at all, not even h3's
    // control stream; the client's peer transport parameters are applied with the ClientHello).
    let mut connecting = connecting;
    connecting.handshake_data().await?;
    let conn = match connecting.into_0rtt() {
        Ok((conn, _)) => conn,
        Err(connecting) => connecting.await?,
    };
    // one line per connection, naming the congestion controller quinn runs for it
    eprintln!("connection {odcid} from {remote}: congestion control {}", running_cc(&conn));
    let mut h3 = h3::server::builder().build(h3_quinn::Connection::new(conn)).await?;
    loop {
        match h3.accept().await {
            Ok(Some(resolver)) => {
                let root = root.clone();
                tokio::spawn(async move {
                    if let Ok((req, stream)) = resolver.resolve_request().await {
                        let _ = respond(req, stream, &root).await;
                    }
                });
            }
            Ok(None) => return Ok(()),
            Err(e) if e.is_h3_no_error() => return Ok(()),
            Err(e) => return Err(e.into()),
        }
    }
}

type Stream = h3::server::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

async fn respond(req: http::Request<()>, mut stream: Stream, root: &Root)
                 -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let method = req.method().clone();
    let found = if method == Method::GET || method == Method::HEAD {
        root.lookup(req.uri().path())
    } else {
        Lookup::BadRequest
    };
    let (status, file) = match found {
        Lookup::File(p) => match tokio::fs::File::open(&p).await {
            Ok(f) => (StatusCode::OK, Some((f, p))),
            Err(_) => (StatusCode::FORBIDDEN, None),
        },
        Lookup::NotFound => (StatusCode::NOT_FOUND, None),
        Lookup::Forbidden => (StatusCode::FORBIDDEN, None),
        Lookup::BadRequest if method != Method::GET && method != Method::HEAD => (StatusCode::METHOD_NOT_ALLOWED, None),
        Lookup::BadRequest => (StatusCode::BAD_REQUEST, None),
    };
    let mut resp = Response::builder().status(status);
    for (k, v) in NO_CACHE_HEADERS {
        resp = resp.header(k, v);
    }
    let Some((mut file, path)) = file else {
        let body = Bytes::from(format!("{}\n", status.canonical_reason().unwrap_or("error")));
        let mut resp = resp
            .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
            .header(header::CONTENT_LENGTH, body.len());
        if status == StatusCode::METHOD_NOT_ALLOWED {
            resp = resp.header(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        }
        stream.send_response(resp.body(())?).await?;
        if method != Method::HEAD {
            stream.send_data(body).await?;
        }
        stream.finish().await?;
        return drain_request(&mut stream).await;
    };
    let len = file.metadata().await?.len();
    let resp = resp.header(header::CONTENT_TYPE, content_type(&path)).header(header::CONTENT_LENGTH, len);
    stream.send_response(resp.body(())?).await?;
    if method == Method::GET {
        // streamed: one chunk read while quinn sends the previous ones (its send window bounds
        // what is buffered)
        let mut left = len;
        while left > 0 {
            let mut buf = BytesMut::with_capacity(CHUNK.min(left as usize));
            let n = file.read_buf(&mut buf).await?;
            if n == 0 {
                // the file shrank under us: reset the stream rather than end a short body
                stream.stop_stream(h3::error::Code::H3_INTERNAL_ERROR);
                return Err(format!("{} shrank while being sent", path.display()).into());
            }
            left = left.saturating_sub(n as u64);
            stream.send_data(buf.freeze()).await?;
        }
    }
    stream.finish().await?;
    drain_request(&mut stream).await
}

/// Read the request to its end (a GET's FIN). Dropping a stream whose receive side is not read
/// to its end makes quinn send STOP_SENDING, which clients report as the response reset.
async fn drain_request(stream: &mut Stream) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    while stream.recv_data().await?.is_some() {}
    Ok(())
}
