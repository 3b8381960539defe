//! CLI behaviour that does not need network namespaces.
use std::process::Command;

fn linkem() -> Command {
    Command::new(env!("CARGO_BIN_EXE_linkem"))
}

fn tmp(name: &str, text: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("linkem-cli-{}-{}", std::process::id(), name));
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn bad_config_exits_2_with_field_name() {
    let p = tmp("bad.json", r#"{"up": {"loss": {"model": "random", "pct": 120}}}"#);
    let out = linkem().args(["--config", p.to_str().unwrap(), "--check"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim(), "config: up.loss.pct: must be between 0 and 100, got 120");
    // same for a real run (config is validated before touching interfaces)
    let out = linkem()
        .args(["--iface-a", "nonexist0", "--a-peer-mac", "02:00:00:00:00:01", "--iface-b", "nonexist1",
               "--b-peer-mac", "02:00:00:00:00:02", "--config", p.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let _ = std::fs::remove_file(p);
}

#[test]
fn good_config_checks_ok() {
    let p = tmp("good.json", r#"{"up": {"delay_ms": 10, "rate_mbit": 40}, "down": {"delay_ms": 10}}"#);
    let out = linkem().args(["--config", p.to_str().unwrap(), "--check"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let _ = std::fs::remove_file(p);
}

#[test]
fn bad_mac_exits_2() {
    let out = linkem()
        .args(["--iface-a", "x", "--a-peer-mac", "zz:00:00:00:00:01", "--iface-b", "y", "--b-peer-mac", "02:00:00:00:00:02"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--a-peer-mac"));
}

#[test]
fn ctl_without_server_fails_cleanly() {
    let out = linkem().args(["ctl", "--control", "/nonexistent/linkem.sock", "stats"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
}
