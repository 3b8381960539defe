//! quicbench-quinn-client: fetches objects over HTTP/3 on quinn (QUIC) + h3 + rustls, the same
//! pinned crates as quicbench-h3server, speaking as quicbench's `qb-load` does (its command line,
//! per-request records, summary: stacks/qbfetch).
//!
//! One UDP endpoint, tokio on every core (as qb-load's Go runtime). `--connections shared`: one
//! connection, `--parallel` requests on it at once (the first one opens it, the others wait for
//! it, as qb-load's queue behind its handshake); `per-object`: a connection per request,
//! `--parallel` at once, each closed as soon as its response is in (Go-Quick's getFiles). The
//! server's certificate is verified against `--ca` and the base URL's host; ALPN h3 only, and
//! the negotiated protocol is read back from the handshake. With `--qlog-dir` each connection
//! writes quinn's qlog, named `<odcid>_client.sqlog` (the original destination connection ID,
//! read from the qlog's group_id) when the connection is over.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{Buf, Bytes};
use qbfetch::{Manifest, Plan, Policy, Record, now_ns};
use quinn::crypto::rustls::{HandshakeData, QuicClientConfig};
use quinn::{QlogConfig, TransportConfig, VarInt};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use serde_json::json;
use tokio::sync::OnceCell;

/// The client's receive windows: what quic-go's client (qb-load's) grows to, from the start.
const STREAM_RECEIVE_WINDOW: u32 = 6 << 20;
const CONNECTION_RECEIVE_WINDOW: u32 = 15 << 20;
/// H3_NO_ERROR: the application's close once its responses are in.
const H3_NO_ERROR: u32 = 0x100;
const QLOG_OPEN_SUFFIX: &str = ".part";

fn versions() -> serde_json::Value {
    json!({"quicbench_quinn_client": env!("CARGO_PKG_VERSION"), "quinn": env!("QB_VERSION_QUINN"),
           "quinn_proto": env!("QB_VERSION_QUINN_PROTO"), "h3": env!("QB_VERSION_H3"),
           "h3_quinn": env!("QB_VERSION_H3_QUINN"), "rustls": env!("QB_VERSION_RUSTLS")})
}

fn main() -> ExitCode {
    ExitCode::from(qbfetch::main_with("quicbench-quinn-client", versions(), run) as u8)
}

fn tls(plan: &Plan) -> Result<QuicClientConfig, String> {
    let mut roots = rustls::RootCertStore::empty();
    if let Some(ca) = &plan.ca {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(ca)
            .and_then(|it| it.collect::<Result<_, _>>())
            .map_err(|e| format!("--ca {}: {e}", ca.display()))?;
        for c in certs {
            roots.add(c).map_err(|e| format!("--ca {}: {e}", ca.display()))?;
        }
    }
    if roots.is_empty() {
        return Err("--ca: no CA certificate given (the server's certificate is always verified)".into());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut c = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    c.alpn_protocols = vec![b"h3".to_vec()];
    QuicClientConfig::try_from(c).map_err(|e| format!("TLS: {e}"))
}

fn transport(qlog: Option<quinn::QlogStream>) -> TransportConfig {
    let mut t = TransportConfig::default();
    t.stream_receive_window(VarInt::from_u32(STREAM_RECEIVE_WINDOW))
        .receive_window(VarInt::from_u32(CONNECTION_RECEIVE_WINDOW));
    t.qlog_stream(qlog);
    t
}

/// A qlog file behind a buffer, `conn-N_client.sqlog.part` while its connection is open.
#[derive(Clone)]
struct QlogFile(Arc<Mutex<BufWriter<File>>>);

impl Write for QlogFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.lock().unwrap().flush()
    }
}

/// The original destination connection ID quinn puts in every qlog event's group_id.
fn qlog_group_id(path: &Path) -> Option<String> {
    let mut head = vec![0u8; 64 << 10];
    let n = File::open(path).and_then(|mut f| f.read(&mut head)).ok()?;
    let text = String::from_utf8_lossy(&head[..n]);
    let at = text.find("\"group_id\":\"")? + "\"group_id\":\"".len();
    let id: String = text[at..].chars().take_while(|c| c.is_ascii_hexdigit()).collect();
    (!id.is_empty()).then_some(id)
}

struct Client {
    plan: Plan,
    endpoint: quinn::Endpoint,
    crypto: Arc<QuicClientConfig>,
    records: Mutex<Vec<Record>>,
    opened: AtomicUsize,
}

type Sender = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;

/// An open connection: its h3 request sender, its QUIC connection and qlog.
struct Opened {
    id: usize,
    send: Sender,
    conn: quinn::Connection,
    connect_start_ns: i64,
    handshake_ns: i64,
    proto: String,
    qlog: Option<(QlogFile, PathBuf)>,
}

impl Client {
    async fn open(&self) -> Result<Opened, String> {
        let id = self.opened.fetch_add(1, Ordering::SeqCst) + 1;
        let mut config = quinn::ClientConfig::new(self.crypto.clone());
        let mut qlog = None;
        if let Some(dir) = &self.plan.qlog_dir {
            let open = dir.join(format!("conn-{id}_client.sqlog{QLOG_OPEN_SUFFIX}"));
            let f = File::create(&open).map_err(|e| format!("qlog {}: {e}", open.display()))?;
            let f = QlogFile(Arc::new(Mutex::new(BufWriter::with_capacity(256 << 10, f))));
            let mut q = QlogConfig::default();
            q.writer(Box::new(f.clone())).title(Some(format!("quicbench-quinn-client {}", env!("CARGO_PKG_VERSION"))));
            config.transport_config(Arc::new(transport(q.into_stream())));
            qlog = Some((f, open));
        } else {
            config.transport_config(Arc::new(transport(None)));
        }
        let connect_start_ns = now_ns();
        let connected = match self.endpoint.connect_with(config, self.plan.connect, &self.plan.host) {
            Ok(connecting) => connecting.await.map_err(|e| format!("connect: {e}")),
            Err(e) => Err(format!("connect: {e}")),
        };
        let conn = match connected {
            Ok(c) => c,
            Err(e) => {
                if let Some((f, open)) = qlog {
                    finish_qlog(id, f, &open);
                }
                return Err(e);
            }
        };
        let handshake_ns = now_ns();
        let proto = conn.handshake_data()
            .and_then(|d| d.downcast::<HandshakeData>().ok())
            .and_then(|d| d.protocol)
            .map(|p| if p == b"h3" { "h3".to_string() } else { String::from_utf8_lossy(&p).into_owned() })
            .unwrap_or_else(|| "none".into());
        let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(conn.clone()))
            .await
            .map_err(|e| format!("HTTP/3: {e}"))?;
        tokio::spawn(async move {
            let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        Ok(Opened { id, send, conn, connect_start_ns, handshake_ns, proto, qlog })
    }

    /// One request on an open connection; its record is filled as the response comes in.
    async fn fetch(&self, k: usize, c: &Opened, first: bool, manifest: Option<&Manifest>) {
        let path = self.records.lock().unwrap()[k].path.clone();
        let uri = format!("https://{}{}", self.plan.authority, path);
        let result = async {
            let req = http::Request::get(&uri)
                .header("user-agent", "quicbench-quinn-client")
                .body(())
                .map_err(|e| format!("request: {e}"))?;
            let mut send = c.send.clone();
            let mut stream = send.send_request(req).await.map_err(|e| format!("sending the request: {e}"))?;
            stream.finish().await.map_err(|e| format!("sending the request: {e}"))?;
            let resp = stream.recv_response().await.map_err(|e| format!("response: {e}"))?;
            let length = resp.headers().get(http::header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok());
            self.records.lock().unwrap()[k].headers(Some(resp.status().as_u16()), length, &c.proto);
            while let Some(mut chunk) = stream.recv_data().await.map_err(|e| format!("reading body: {e}"))? {
                let mut recs = self.records.lock().unwrap();
                while chunk.has_remaining() {
                    let n = chunk.chunk().len();
                    recs[k].data(chunk.chunk());
                    chunk.advance(n);
                }
            }
            Ok::<(), String>(())
        }.await;
        let mut recs = self.records.lock().unwrap();
        let r = &mut recs[k];
        if first {
            r.connection_times(c.connect_start_ns, Some(c.handshake_ns));
        }
        match result {
            Ok(()) => r.finished(manifest),
            Err(e) => r.failed(e),
        }
    }

    /// Close a connection (its responses are in) and give its qlog its final name.
    fn close(c: Opened) {
        c.conn.close(VarInt::from_u32(H3_NO_ERROR), b"");
        if let Some((f, open)) = c.qlog {
            finish_qlog(c.id, f, &open);
        }
    }
}

/// Flush a connection's qlog and give it its final name, `<odcid>_client.sqlog` (quinn may
/// still log the connection's draining into it: the file stays open for that).
fn finish_qlog(id: usize, mut f: QlogFile, open: &Path) {
    let _ = f.flush();
    let name = qlog_group_id(open).unwrap_or_else(|| format!("conn-{id}"));
    let done = open.with_file_name(format!("{name}_client.sqlog"));
    if let Err(e) = std::fs::rename(open, &done) {
        eprintln!("connection {id}: qlog {}: {e}", open.display());
    }
}

fn run(plan: &Plan, manifest: Option<&Manifest>) -> Result<(Vec<Record>, usize), String> {
    let crypto = Arc::new(tls(plan)?);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| e.to_string())?;
    let bind: SocketAddr = if plan.connect.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse().expect("literal");
    let records = plan.paths.iter().enumerate().map(|(k, p)| Record::new(k + 1, p.clone())).collect();
    let manifest = manifest.map(|m| Arc::new(m.clone()));
    rt.block_on(async move {
        let endpoint = quinn::Endpoint::client(bind).map_err(|e| format!("UDP socket: {e}"))?;
        let client = Arc::new(Client { plan: plan.clone(), endpoint: endpoint.clone(), crypto, records: Mutex::new(records),
                                       opened: AtomicUsize::new(0) });
        let next = Arc::new(AtomicUsize::new(0));
        let shared: Arc<OnceCell<Result<Opened, String>>> = Arc::new(OnceCell::new());
        let mut workers = tokio::task::JoinSet::new();
        for _ in 0..plan.parallel.min(plan.paths.len()) {
            let (client, next, shared, manifest) = (client.clone(), next.clone(), shared.clone(), manifest.clone());
            workers.spawn(async move {
                loop {
                    let k = next.fetch_add(1, Ordering::SeqCst);
                    if k >= client.plan.paths.len() {
                        return;
                    }
                    let first = match client.plan.policy {
                        Policy::Shared => k == 0,
                        Policy::PerObject => true,
                    };
                    client.records.lock().unwrap()[k].begin();
                    match client.plan.policy {
                        Policy::Shared => {
                            let opened = shared.get_or_init(|| client.open()).await;
                            match opened {
                                Ok(c) => {
                                    client.records.lock().unwrap()[k].started(c.id, first);
                                    client.fetch(k, c, first, manifest.as_deref()).await;
                                }
                                Err(e) => {
                                    client.records.lock().unwrap()[k].failed(e.clone());
                                }
                            }
                        }
                        Policy::PerObject => match client.open().await {
                            Ok(c) => {
                                client.records.lock().unwrap()[k].started(c.id, true);
                                client.fetch(k, &c, true, manifest.as_deref()).await;
                                Client::close(c);
                            }
                            Err(e) => {
                                client.records.lock().unwrap()[k].failed(e);
                            }
                        },
                    }
                }
            });
        }
        let deadline = tokio::time::Instant::now() + plan.timeout;
        let timed_out = tokio::time::timeout_at(deadline, async { while workers.join_next().await.is_some() {} })
            .await
            .is_err();
        if timed_out {
            workers.abort_all();
        }
        while workers.join_next().await.is_some() {}
        if let Some(Ok(c)) = Arc::try_unwrap(shared).ok().and_then(|s| s.into_inner()) {
            Client::close(c);
        }
        // the CONNECTION_CLOSEs go out before the process ends
        endpoint.close(VarInt::from_u32(H3_NO_ERROR), b"");
        let _ = tokio::time::timeout(std::time::Duration::from_millis(200), endpoint.wait_idle()).await;
        let mut recs = std::mem::take(&mut *client.records.lock().unwrap());
        for r in recs.iter_mut().filter(|r| !r.is_done()) {
            r.failed(if timed_out { "timeout" } else { "not fetched" });
        }
        Ok((recs, client.opened.load(Ordering::SeqCst)))
    })
}
