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

/// `kvw serve --openai` with [`KEYS`].
pub fn serve_openai(fixes: &str, cache: &str) -> Process {
    serve_openai_with(&KEYS, fixes, cache, &[])
}
