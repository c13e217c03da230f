//! The attack set: hostile bundles, requests and arguments against the real
//! `kvw` binary (`verify`, `site build`, `serve` over 127.0.0.1, `probe`,
//! `bundle`, `audit` against a hostile server). Each case builds its hostile input from a fresh genuine bundle
//! (forged receipts are signed with the bundle's test key, as an attacker
//! holding it would), runs the command under a time limit and an
//! address-space cap, and asserts the refusal: exit code, one error line
//! naming the reason, no panic, no crash, no raw control characters, no
//! secret from outside the bundle, and no file written.
//!
//! Each group prints `<group>: N attacks, M refused or neutralised`.

#[path = "attacks/audit.rs"]
mod audit;
#[path = "attacks/cli.rs"]
mod cli_cases;
#[path = "attacks/harness.rs"]
mod harness;
#[path = "attacks/serve.rs"]
mod serve;
#[path = "attacks/site.rs"]
mod site;
#[path = "attacks/verify.rs"]
mod verify;

use harness::run_all;

/// Total attacks across the groups (request and slow-client cases run
/// against one server).
fn total() -> usize {
    verify::cases().len()
        + site::cases().len()
        + serve::start_cases().len()
        + serve::request_cases().len()
        + serve::slow_cases().len()
        + serve::key_cases().len()
        + audit::cases().len()
        + audit::receipt_cases().len()
        + cli_cases::cases().len()
}

#[test]
fn the_attack_set_is_complete() {
    let n = total();
    println!("attack set: {n} attacks");
    // Exact: a case added or dropped changes this number on purpose.
    assert_eq!(n, 335, "the attack set has {n} cases, not 335");
}

#[test]
fn verify_refuses_every_attack() {
    run_all("verify", verify::cases());
}

#[test]
fn site_build_refuses_every_attack() {
    run_all("site build", site::cases());
}

#[test]
fn serve_refuses_every_attack() {
    run_all("serve (start)", serve::start_cases());
    let (n, failures) = serve::run_against_server();
    println!(
        "serve (requests): {n} attacks, {} refused",
        n - failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_keyed_endpoint_refuses_every_attack() {
    let (n, failures) = serve::run_keyed();
    println!("serve (keyed): {n} attacks, {} refused", n - failures.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn audit_withstands_a_hostile_server() {
    let n = audit::cases().len();
    let failures = audit::run_all();
    println!(
        "audit (hostile server): {n} attacks, {} withstood",
        n - failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn verify_refuses_inconsistent_audit_receipts() {
    run_all("audit receipts", audit::receipt_cases());
}

#[test]
fn cli_refuses_every_attack() {
    run_all("cli", cli_cases::cases());
}

/// The genuine bundle builds a site that escapes what it shows and carries
/// nothing from outside the bundle.
#[test]
fn a_genuine_site_has_no_unescaped_markup() {
    let w = harness::work();
    let ran = harness::run_kvw(&site::genuine_build(&w), harness::Sink::Pipe, &[]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let mut html = String::new();
    for entry in walk(&w.at("site")) {
        if entry.extension().is_some_and(|e| e == "html") {
            html.push_str(&std::fs::read_to_string(&entry).unwrap());
        }
        assert!(!entry.is_symlink(), "{}", entry.display());
    }
    assert!(html.contains("rel=\"alternate\""));
    assert!(!html.contains("SECRET-"));
    assert!(!html.contains("onerror"));
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}
