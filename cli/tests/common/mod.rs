//! What the audit tests share: `kvw serve --openai` on 127.0.0.1 and a free
//! port, stopped when dropped (and by itself after five minutes).

#![allow(dead_code)]

use std::process::{Command, Stdio};

use kvw_testkit::served::Process;

pub const KVW: &str = env!("CARGO_BIN_EXE_kvw");

/// The keys the endpoint accepts, one tenant each.
pub const KEYS: [&str; 2] = ["alpha-key", "beta-key"];

/// `kvw serve --openai` with `keys`, `--fixes fixes`, `--prefix-cache cache`
/// and `extra` flags.
pub fn serve_openai_with(keys: &[&str], fixes: &str, cache: &str, extra: &[&str]) -> Process {
    let mut serve = Command::new(KVW);
    serve.args([
        "serve",
        "--openai",
        "--addr",
        "127.0.0.1:0",
        "--for-seconds",
        "300",
    ]);
    for k in keys {
        serve.args(["--key", k]);
    }
    serve
        .args(["--fixes", fixes, "--prefix-cache", cache])
        .args(extra)
        .stderr(Stdio::null());
    Process::spawn(serve)
}

/// A fresh signing key saved as `signing.key` in a new temporary folder
/// (removed when the folder is dropped).
pub fn signing_key() -> (tempfile::TempDir, kvw_evidence::Signer, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("signing.key");
    let signer = kvw_evidence::Signer::generate();
    signer.save(&key).unwrap();
    (dir, signer, key)
}

/// `kvw audit --endpoint url` with one `--key` per entry of `keys`.
pub fn audit_command(url: &str, keys: &[&str]) -> Command {
    let mut audit = Command::new(KVW);
    audit.args(["audit", "--endpoint", url]);
    for k in keys {
        audit.args(["--key", k]);
    }
    audit
}

/// `kvw serve --dir dir` (a static site) for at most `seconds`.
pub fn serve_dir(dir: &std::path::Path, seconds: u32) -> Process {
    let mut serve = Command::new(KVW);
    serve
        .args(["serve", "--addr", "127.0.0.1:0", "--for-seconds"])
        .arg(seconds.to_string())
        .arg("--dir")
        .arg(dir);
    Process::spawn(serve)
}

/// `kvw serve --openai` with [`KEYS`].
pub fn serve_openai(fixes: &str, cache: &str) -> Process {
    serve_openai_with(&KEYS, fixes, cache, &[])
}

/// The JSON objects among the lines `kvw audit --json` printed.
pub fn json_lines(stdout: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The JSON line of `gate` in an audit's output (a panic naming the output
/// when there is none).
pub fn gate_line(o: &std::process::Output, gate: &str) -> serde_json::Value {
    json_lines(&o.stdout)
        .into_iter()
        .find(|v| v["gate"] == gate)
        .unwrap_or_else(|| {
            panic!(
                "no {gate} line in {}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            )
        })
}
