//! Puts the versions of the QUIC/HTTP/3/TLS crates these binaries are built with (from
//! Cargo.lock) into `--version`: a result names the stack it was measured with.
use std::{env, fs, path::Path};

const CRATES: [&str; 2] = ["quiche", "boring-sys"];

fn main() {
    let lock = Path::new(&env::var("CARGO_MANIFEST_DIR").unwrap()).join("Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    let text = fs::read_to_string(&lock).unwrap_or_default();
    for name in CRATES {
        // [[package]] entries: `name = "quiche"` followed by `version = "0.30.0"`
        let version = text
            .split("[[package]]")
            .find(|p| p.lines().any(|l| l.trim() == format!("name = \"{name}\"")))
            .and_then(|p| p.lines().find_map(|l| l.trim().strip_prefix("version = \"")))
            .map(|v| v.trim_end_matches('"').to_string())
            .unwrap_or_else(|| "unknown".into());
        let var = format!("QB_VERSION_{}", name.to_uppercase().replace('-', "_"));
        println!("cargo:rustc-env={var}={version}");
    }
}
