//! `kvw audit` against `kvw serve --openai` on 127.0.0.1 when refusals are
//! slow or the server goes away: the admission gate times a refusal and
//! fails one past `--refusal-bound` or past the request timeout, and a
//! server that dies or stops answering mid-audit is a finding naming the
//! request, never a hang. Every server here stops when dropped.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kvw_testkit::served::Process;
use serde_json::Value;

fn audit(url: &str, extra: &[&str]) -> (Option<i32>, Vec<Value>, String) {
    let o = common::audit_command(url, &common::KEYS)
        .args(["--json", "--max-seconds", "120"])
        .args(extra)
        .output()
        .unwrap();
    let gates = common::json_lines(&o.stdout)
        .into_iter()
        .filter(|v| v.get("gate").is_some())
        .collect();
    (
        o.status.code(),
        gates,
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn gate<'a>(gates: &'a [Value], name: &str) -> &'a Value {
    gates
        .iter()
        .find(|g| g["gate"] == name)
        .unwrap_or_else(|| panic!("no {name} gate in {gates:?}"))
}

#[test]
fn a_refusal_is_timed_and_a_slow_or_missing_one_is_a_finding() {
    // Post-fix the over-pool prompt is refused with 400 at once.
    let post = common::serve_openai("all", "per-tenant");
    let (code, gates, err) = audit(&post.url(), &["--gates", "admission"]);
    assert_eq!(code, Some(0), "{gates:?} {err}");
    let g = gate(&gates, "admission");
    assert_eq!(g["result"], "pass", "{g}");
    assert_eq!(g["evidence"]["status"], 400, "{g}");
    assert_eq!(g["evidence"]["limit"], "pool", "{g}");
    drop(post);

    // Before #38935, under upstream's router (no early reject), the
    // rejected prompt waits for decode's waiting timeout and gets its 500.
    let pre = common::serve_openai_with(
        &common::KEYS,
        "retire-aborted-prefill-result",
        "per-tenant",
        &["--early-reject", "off", "--waiting-timeout", "2"],
    );
    let only = ["--gates", "admission", "--refusal-bound", "1"];
    let (code, gates, err) = audit(&pre.url(), &only);
    assert_eq!(code, Some(1), "{gates:?} {err}");
    let g = gate(&gates, "admission");
    assert_eq!(g["result"], "fail", "{g}");
    let status = g["evidence"]["status"].as_u64().unwrap();
    assert!(status >= 500, "{g}");
    assert!(
        g["reason"]
            .as_str()
            .unwrap()
            .contains("not its original 4xx"),
        "{g}"
    );
    // A request timeout shorter than decode's wait: no answer is a finding,
    // and the wait ends at the timeout.
    let (code, gates, err) = audit(
        &pre.url(),
        &[&only[..], &["--request-timeout", "1"]].concat(),
    );
    assert_eq!(code, Some(1), "{gates:?} {err}");
    let g = gate(&gates, "admission");
    assert_eq!(g["result"], "fail", "{g}");
    assert_eq!(g["evidence"]["status"], 0, "{g}");
    assert!(
        g["reason"]
            .as_str()
            .unwrap()
            .contains("no answer within the request timeout (1 s)"),
        "{g}"
    );
}

/// What the relay does once it has seen `after` completion requests.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Then {
    /// Kill the server.
    Die,
    /// Keep every connection open and relay nothing more.
    Stall,
}

/// A TCP relay on 127.0.0.1 in front of `backend` that counts the
/// completion requests passing through and, at the `after`-th, kills the
/// server or stalls. Stops after 120 s or on drop.
struct Relay {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Relay {
    fn start(backend: Process, after: usize, then: Then) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let to = backend.port;
        let backend = Arc::new(Mutex::new(Some(backend)));
        let seen = Arc::new(AtomicUsize::new(0));
        let cut = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let until = Instant::now() + Duration::from_secs(120);
            let mut held = Vec::new();
            while !stopped.load(Ordering::SeqCst) && Instant::now() < until {
                let Ok((client, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                };
                if cut.load(Ordering::SeqCst) {
                    // A dead server refuses; a stalled one holds.
                    if then == Then::Stall {
                        held.push(client);
                    }
                    continue;
                }
                let _ = client.set_nonblocking(false);
                let Ok(server) = TcpStream::connect(("127.0.0.1", to)) else {
                    continue;
                };
                let (mut c_in, mut s_out) =
                    (client.try_clone().unwrap(), server.try_clone().unwrap());
                let (mut s_in, mut c_out) = (server, client);
                let (seen, cut, backend) = (seen.clone(), cut.clone(), backend.clone());
                std::thread::spawn(move || {
                    let mut buf = vec![0u8; 64 * 1024];
                    let mut tail: Vec<u8> = Vec::new();
                    loop {
                        let n = match c_in.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        let mut window = std::mem::take(&mut tail);
                        window.extend_from_slice(&buf[..n]);
                        let hits = window
                            .windows(b"POST /v1/completions".len())
                            .filter(|w| *w == b"POST /v1/completions")
                            .count();
                        tail = window[window.len().saturating_sub(24)..].to_vec();
                        if hits > 0 && seen.fetch_add(hits, Ordering::SeqCst) + hits >= after {
                            cut.store(true, Ordering::SeqCst);
                            if then == Then::Die {
                                backend.lock().unwrap().take();
                            }
                        }
                        if cut.load(Ordering::SeqCst) {
                            if then == Then::Stall {
                                // Read on, answer nothing.
                                continue;
                            }
                            break;
                        }
                        if s_out.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = s_out.shutdown(std::net::Shutdown::Write);
                });
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut s_in, &mut c_out);
                });
            }
        });
        Relay {
            port,
            stop,
            thread: Some(thread),
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn a_server_that_dies_or_stalls_mid_audit_is_a_finding_naming_the_request() {
    for then in [Then::Die, Then::Stall] {
        let server = common::serve_openai("all", "per-tenant");
        let relay = Relay::start(server, 3, then);
        let (code, gates, err) = audit(
            &relay.url(),
            &[
                "--gates",
                "isolation,status",
                "--rounds",
                "1",
                "--request-timeout",
                "2",
            ],
        );
        assert_eq!(code, Some(1), "{gates:?} {err}");
        assert_eq!(gates.len(), 2, "{gates:?} {err}");
        for g in &gates {
            assert_ne!(g["result"], "pass", "{g}");
        }
        let iso = gate(&gates, "isolation");
        assert_eq!(iso["result"], "inconclusive", "{iso}");
        // The first request without a response is named. The gate sends
        // its documents concurrently, so one the relay let through before
        // the cut may still be answered after it: either wording names it.
        let reason = iso["reason"].as_str().unwrap();
        assert!(reason.contains("got no response"), "{reason}");
        assert!(reason.contains("POST /v1/completions"), "{reason}");
        assert!(
            reason.contains("the server stopped answering at exchange")
                || reason.contains("later ones were answered"),
            "{reason}"
        );
        drop(relay);
    }
}
