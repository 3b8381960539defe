//! What the quiche server and client share: qlog files, random bytes, hex.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// A qlog file still being written is `<name>.part`; it gets its final name when its connection
/// has closed, so a reader (run/recovery.py) waits for that and finds it whole.
pub const QLOG_OPEN_SUFFIX: &str = ".part";

/// A qlog file behind a buffer, shared between quiche (which writes an event per packet) and the
/// loop that flushes it when the connection closes.
#[derive(Clone)]
pub struct QlogFile(Arc<Mutex<BufWriter<File>>>);

impl QlogFile {
    pub fn create(path: &Path) -> io::Result<QlogFile> {
        Ok(QlogFile(Arc::new(Mutex::new(BufWriter::with_capacity(256 << 10, File::create(path)?)))))
    }

    pub fn flush_all(&self) -> io::Result<()> {
        self.0.lock().unwrap().flush()
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

/// n bytes from the kernel's random source (connection IDs).
pub fn random_bytes(n: usize) -> io::Result<Vec<u8>> {
    let mut b = vec![0u8; n];
    File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(b)
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
