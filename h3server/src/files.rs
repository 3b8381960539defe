//! Which file a request path names. Served: regular files under the root, and a directory's
//! `index.html`; never a listing. A symbolic link under the root is followed only if it resolves
//! inside the root or inside one of the allowed directories (quicbench's `live/<key>` links to
//! its live publishers); `..` is refused before the file system is asked.

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use percent_encoding::percent_decode_str;

/// The answer to a request path.
#[derive(Debug, PartialEq, Eq)]
pub enum Lookup {
    /// A regular file to serve (its resolved path).
    File(PathBuf),
    /// 404: nothing there, a directory without index.html, or not a regular file.
    NotFound,
    /// 403: a `..` segment, or a link that leaves the root and the allowed directories.
    Forbidden,
    /// 400: not an absolute path, or a NUL byte once percent-decoded.
    BadRequest,
}

/// The served directory, resolved once at start.
#[derive(Debug)]
pub struct Root {
    root: PathBuf,
    allowed: Vec<PathBuf>,
}

impl Root {
    /// `root` must be a directory; `allow` are further directories links may resolve into. They
    /// need not exist yet (a live publisher starts after the servers): each is resolved when a
    /// link leads out of the root.
    pub fn new(root: &Path, allow: &[PathBuf]) -> io::Result<Root> {
        let root = root.canonicalize()?;
        if !root.is_dir() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{} is not a directory", root.display())));
        }
        let allowed = allow.iter().map(|d| std::path::absolute(d)).collect::<io::Result<_>>()?;
        Ok(Root { root, allowed })
    }

    fn inside(&self, p: &Path) -> bool {
        p.starts_with(&self.root)
            || self.allowed.iter().any(|a| a.canonicalize().is_ok_and(|a| p.starts_with(a)))
    }

    /// The file a request's path (the URI's path, without query) names.
    pub fn lookup(&self, uri_path: &str) -> Lookup {
        if !uri_path.starts_with('/') {
            return Lookup::BadRequest;
        }
        let decoded: Vec<u8> = percent_decode_str(uri_path).collect();
        if decoded.contains(&0) {
            return Lookup::BadRequest;
        }
        let mut rel = PathBuf::new();
        for seg in decoded.split(|&b| b == b'/') {
            match seg {
                b"" | b"." => {}
                b".." => return Lookup::Forbidden,
                s => rel.push(OsStr::from_bytes(s)),
            }
        }
        let real = match self.root.join(&rel).canonicalize() {
            Ok(p) => p,
            Err(_) => return Lookup::NotFound, // missing, or a dangling link
        };
        if !self.inside(&real) {
            return Lookup::Forbidden;
        }
        if real.is_dir() {
            // a directory answers with its index.html, resolved and checked like any file
            return match real.join("index.html").canonicalize() {
                Ok(index) if !self.inside(&index) => Lookup::Forbidden,
                Ok(index) if index.is_file() => Lookup::File(index),
                _ => Lookup::NotFound,
            };
        }
        if real.is_file() { Lookup::File(real) } else { Lookup::NotFound }
    }
}

/// Content-Type by extension (what the lab's pages, players and objects use); else octet-stream.
pub fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(OsStr::to_str).unwrap_or("") {
        "html" | "htm" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript",
        "css" => "text/css",
        "json" => "application/json",
        "txt" => "text/plain; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "webp" => "image/webp",
        "m3u8" => "application/vnd.apple.mpegurl",
        "mpd" => "application/dash+xml",
        "mp4" | "m4s" | "m4v" => "video/mp4",
        "m4a" => "audio/mp4",
        "ts" => "video/mp2t",
        "webm" => "video/webm",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    /// root/ with a file, a subdirectory with index.html, one without; a secret outside; a
    /// live directory outside that is allowed.
    fn tree() -> (tempfile::TempDir, Root) {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("root");
        fs::create_dir_all(root.join("sub")).unwrap();
        fs::create_dir_all(root.join("bare")).unwrap();
        fs::write(root.join("index.html"), "<html>").unwrap();
        fs::write(root.join("obj-1.bin"), "12345").unwrap();
        fs::write(root.join("a b.bin"), "x").unwrap();
        fs::write(root.join("sub/index.html"), "sub").unwrap();
        fs::write(t.path().join("secret"), "secret").unwrap();
        // the live directory comes after the start, as a live publisher's does
        let r = Root::new(&root, &[t.path().join("live")]).unwrap();
        fs::create_dir_all(t.path().join("live")).unwrap();
        fs::write(t.path().join("live/seg.m4s"), "seg").unwrap();
        (t, r)
    }

    fn file(t: &tempfile::TempDir, rel: &str) -> Lookup {
        Lookup::File(t.path().join(rel).canonicalize().unwrap())
    }

    #[test]
    fn regular_files_and_indexes() {
        let (t, r) = tree();
        assert_eq!(r.lookup("/obj-1.bin"), file(&t, "root/obj-1.bin"));
        assert_eq!(r.lookup("//./obj-1.bin"), file(&t, "root/obj-1.bin"));
        assert_eq!(r.lookup("/a%20b.bin"), file(&t, "root/a b.bin"));
        assert_eq!(r.lookup("/"), file(&t, "root/index.html"));
        assert_eq!(r.lookup("/sub/"), file(&t, "root/sub/index.html"));
        assert_eq!(r.lookup("/sub"), file(&t, "root/sub/index.html"));
    }

    #[test]
    fn missing_and_unlisted() {
        let (_t, r) = tree();
        assert_eq!(r.lookup("/nope.bin"), Lookup::NotFound);
        assert_eq!(r.lookup("/obj-1.bin/x"), Lookup::NotFound);
        assert_eq!(r.lookup("/bare/"), Lookup::NotFound); // no index.html: no listing
    }

    #[test]
    fn dot_dot_is_refused_however_spelt() {
        let (_t, r) = tree();
        for p in ["/../secret", "/sub/../../secret", "/%2e%2e/secret", "/sub/%2E%2E/obj-1.bin", "/..%2fsecret"] {
            assert_eq!(r.lookup(p), Lookup::Forbidden, "{p}");
        }
    }

    #[test]
    fn bad_paths() {
        let (_t, r) = tree();
        assert_eq!(r.lookup("obj-1.bin"), Lookup::BadRequest);
        assert_eq!(r.lookup("/obj-1.bin%00.txt"), Lookup::BadRequest);
    }

    #[test]
    fn links_leaving_the_root_are_refused() {
        let (t, r) = tree();
        let root = t.path().join("root");
        symlink(t.path().join("secret"), root.join("s")).unwrap();
        symlink("/etc", root.join("etc")).unwrap();
        symlink(t.path(), root.join("up")).unwrap();
        assert_eq!(r.lookup("/s"), Lookup::Forbidden);
        assert_eq!(r.lookup("/etc/hostname"), Lookup::Forbidden);
        assert_eq!(r.lookup("/up/secret"), Lookup::Forbidden);
        // an index.html that is a link out of the root
        fs::create_dir(root.join("trap")).unwrap();
        symlink(t.path().join("secret"), root.join("trap/index.html")).unwrap();
        assert_eq!(r.lookup("/trap/"), Lookup::Forbidden);
    }

    #[test]
    fn links_inside_or_into_allowed_directories_are_followed() {
        let (t, r) = tree();
        let root = t.path().join("root");
        symlink(root.join("obj-1.bin"), root.join("alias.bin")).unwrap();
        fs::create_dir(root.join("live")).unwrap();
        symlink(t.path().join("live"), root.join("live/k")).unwrap();
        assert_eq!(r.lookup("/alias.bin"), file(&t, "root/obj-1.bin"));
        assert_eq!(r.lookup("/live/k/seg.m4s"), file(&t, "live/seg.m4s"));
        symlink(t.path().join("nowhere"), root.join("dangling")).unwrap();
        assert_eq!(r.lookup("/dangling"), Lookup::NotFound);
    }

    #[test]
    fn special_files_are_not_served() {
        let (t, r) = tree();
        let fifo = t.path().join("root/fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        assert_eq!(r.lookup("/fifo"), Lookup::NotFound);
    }

    #[test]
    fn content_types() {
        assert_eq!(content_type(Path::new("a/index.html")), "text/html; charset=utf-8");
        assert_eq!(content_type(Path::new("obj-1.bin")), "application/octet-stream");
        assert_eq!(content_type(Path::new("v/seg-1.m4s")), "video/mp4");
    }
}
