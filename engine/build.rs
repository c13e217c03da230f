//! Records the git commit the engine is built from, for receipts.
use std::process::Command;

fn main() {
    let commit = std::env::var("KVW_COMMIT").ok().or_else(|| {
        Command::new("git")
            .args(["rev-parse", "HEAD"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    });
    println!(
        "cargo:rustc-env=KVW_COMMIT={}",
        commit.unwrap_or_else(|| "unknown".into())
    );
    println!("cargo:rerun-if-env-changed=KVW_COMMIT");
    for dir in ["src", "../kernels/src", "../evidence/src"] {
        println!("cargo:rerun-if-changed={dir}");
    }
    if let Ok(out) = Command::new("git")
        .args(["rev-parse", "--git-dir"])
        .output()
    {
        let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !dir.is_empty() {
            println!("cargo:rerun-if-changed={dir}/HEAD");
            println!("cargo:rerun-if-changed={dir}/refs/heads");
            println!("cargo:rerun-if-changed={dir}/index");
        }
    }
}
