//! Attacks on `kvw audit` by the server it audits: a hostile
//! OpenAI-compatible endpoint on 127.0.0.1, written here, that lies about
//! its sizes, sends part of an answer and stalls, sends bodies that never
//! end or drips them, and the real `kvw audit` binary against it. The audit
//! must never report a pass for an answer it did not read, must search what
//! did arrive, and must finish in bounded time and memory with one clear
//! line for what it refuses. Also: a signed audit receipt whose result
//! contradicts its evidence is refused by `kvw verify`.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::harness::{run_kvw_within, Sink};

/// Address-space cap of the audited `kvw` (KiB): a body the auditor
/// buffered whole (1 GiB, or an endless stream) does not fit.
const MEMORY_LIMIT_KIB: u64 = 1024 * 1024;
/// Longest one audit may run before it counts as a hang.
const TIME_LIMIT: Duration = Duration::from_secs(40);

/// How the hostile server answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lie {
    /// `max_model_len` of `/v1/models` (and nothing else odd).
    ModelLen(u64),
    /// `max_total_num_tokens` of `/get_server_info`.
    Pool(u64),
    /// Completions: 200 with a `Content-Length` longer than what is sent,
    /// which carries the other tenant's canary; then it stalls.
    PartialLeakThenStall,
    /// Completions: like [`Lie::PartialLeakThenStall`] without a canary.
    PartialThenStall,
    /// Completions: a 1 GiB body, sent as fast as loopback takes it.
    GiantBody,
    /// Completions: an endless SSE stream, as fast as loopback takes it.
    EndlessSse,
    /// Completions: an endless body, one byte every 200 ms.
    EndlessTrickle,
    /// Completions with `max_tokens` 2: the answer one byte a second.
    Drip,
}

/// The hostile endpoint; stops when dropped.
struct Hostile {
    port: u16,
    stop: Arc<AtomicBool>,
    /// Largest request body it was sent (declared length).
    largest_request: Arc<AtomicU64>,
}

impl Drop for Hostile {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Canaries seen so far, by the key that sent them.
type Seen = Arc<Mutex<BTreeMap<String, String>>>;

impl Hostile {
    fn start(lie: Lie) -> Hostile {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let largest = Arc::new(AtomicU64::new(0));
        let seen: Seen = Arc::default();
        let (stop2, largest2) = (stop.clone(), largest.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stop2.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let (stop, largest, seen) = (stop2.clone(), largest2.clone(), seen.clone());
                std::thread::spawn(move || {
                    let _ = serve(stream, lie, &stop, &largest, &seen);
                });
            }
        });
        Hostile {
            port,
            stop,
            largest_request: largest,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

/// One request: path, bearer key, body.
fn read_request(
    r: &mut BufReader<TcpStream>,
    largest: &AtomicU64,
) -> Option<(String, String, String)> {
    let mut line = String::new();
    if r.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let path = line.split_whitespace().nth(1)?.to_string();
    let (mut len, mut key) = (0u64, String::new());
    loop {
        let mut h = String::new();
        r.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (name, value) = h.split_once(':')?;
        match name.to_ascii_lowercase().as_str() {
            "content-length" => len = value.trim().parse().ok()?,
            "authorization" => key = value.trim().to_string(),
            _ => {}
        }
    }
    largest.fetch_max(len, Ordering::Relaxed);
    // Read at most 16 MiB of it; a larger one is recorded, then refused.
    if len > 16 << 20 {
        return Some((path, key, String::new()));
    }
    let mut body = vec![0; len as usize];
    r.read_exact(&mut body).ok()?;
    Some((path, key, String::from_utf8_lossy(&body).into_owned()))
}

fn head(status: u16, length: Option<u64>, kind: &str) -> String {
    let length = match length {
        Some(n) => format!("content-length: {n}\r\n"),
        None => "transfer-encoding: chunked\r\n".into(),
    };
    format!("HTTP/1.1 {status} X\r\ncontent-type: {kind}\r\n{length}\r\n")
}

fn json(w: &mut TcpStream, status: u16, body: &str) -> std::io::Result<()> {
    w.write_all(head(status, Some(body.len() as u64), "application/json").as_bytes())?;
    w.write_all(body.as_bytes())
}

/// The first canary in `text`.
fn canary(text: &str) -> Option<String> {
    let at = text.find("CANARY-")?;
    Some(
        text[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect(),
    )
}

/// Stall for a while (the client's timeout ends the exchange first).
fn stall(stop: &AtomicBool) {
    let start = Instant::now();
    while !stop.load(Ordering::Relaxed) && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn serve(
    stream: TcpStream,
    lie: Lie,
    stop: &AtomicBool,
    largest: &AtomicU64,
    seen: &Seen,
) -> std::io::Result<()> {
    let mut w = stream.try_clone()?;
    let mut r = BufReader::new(stream);
    while let Some((path, key, body)) = read_request(&mut r, largest) {
        match path.as_str() {
            "/v1/models" => {
                let len = match lie {
                    Lie::ModelLen(n) => n,
                    _ => 8192,
                };
                json(
                    &mut w,
                    200,
                    &format!(
                        r#"{{"object":"list","data":[{{"id":"m","object":"model","max_model_len":{len}}}]}}"#
                    ),
                )?;
                continue;
            }
            "/get_server_info" => {
                let pool = match lie {
                    Lie::Pool(n) => n,
                    _ => 4096,
                };
                json(
                    &mut w,
                    200,
                    &format!(r#"{{"max_total_num_tokens":{pool}}}"#),
                )?;
                continue;
            }
            "/v1/completions" => {}
            _ => {
                json(&mut w, 404, r#"{"error":{"message":"no"}}"#)?;
                continue;
            }
        }
        let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        let Some(prompt) = v["prompt"].as_str() else {
            json(&mut w, 400, r#"{"error":{"message":"bad request"}}"#)?;
            continue;
        };
        if v["max_tokens"].as_u64().is_none_or(|m| m > 4096) || prompt.len() > 8192 {
            json(&mut w, 400, r#"{"error":{"message":"too long"}}"#)?;
            continue;
        }
        let mine = canary(prompt);
        let theirs = {
            let mut seen = seen.lock().unwrap();
            if let Some(c) = &mine {
                seen.insert(key.clone(), c.clone());
            }
            seen.iter()
                .find(|(k, _)| **k != key)
                .map(|(_, c)| c.clone())
        };
        let honest = format!(
            r#"{{"choices":[{{"index":0,"text":"{}","finish_reason":"length"}}],"usage":{{"completion_tokens":2}}}}"#,
            mine.unwrap_or_else(|| "ok".into())
        );
        match lie {
            Lie::PartialLeakThenStall | Lie::PartialThenStall => {
                let leak = match (lie, theirs) {
                    (Lie::PartialLeakThenStall, Some(c)) => c,
                    _ => "nothing to see".into(),
                };
                let part = format!(r#"{{"choices":[{{"index":0,"text":"{leak}"#);
                w.write_all(head(200, Some(100_000), "application/json").as_bytes())?;
                w.write_all(part.as_bytes())?;
                w.flush()?;
                stall(stop);
                return Ok(());
            }
            Lie::GiantBody => {
                w.write_all(head(200, Some(1 << 30), "application/json").as_bytes())?;
                let chunk = vec![b'a'; 1 << 16];
                for _ in 0..(1 << 14) {
                    w.write_all(&chunk)?;
                }
                return Ok(());
            }
            Lie::EndlessSse | Lie::EndlessTrickle => {
                w.write_all(head(200, None, "text/event-stream").as_bytes())?;
                let event = format!("data: {honest}\n\n");
                let chunk = format!("{:x}\r\n{event}\r\n", event.len());
                let start = Instant::now();
                while !stop.load(Ordering::Relaxed) && start.elapsed() < Duration::from_secs(60) {
                    w.write_all(chunk.as_bytes())?;
                    if lie == Lie::EndlessTrickle {
                        std::thread::sleep(Duration::from_millis(200));
                    }
                }
                return Ok(());
            }
            Lie::Drip if v["max_tokens"] == 2 => {
                w.write_all(head(200, Some(honest.len() as u64), "application/json").as_bytes())?;
                for b in honest.bytes() {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    w.write_all(&[b])?;
                    w.flush()?;
                    std::thread::sleep(Duration::from_secs(1));
                }
                return Ok(());
            }
            _ => json(&mut w, 200, &honest)?,
        }
    }
    Ok(())
}

/// What one audit did.
#[derive(Debug)]
pub struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    timed_out: bool,
    /// Receipts written to the bundle `--out`.
    receipts: usize,
    /// `--out` exists afterwards.
    wrote: bool,
    largest_request: u64,
}

/// Run `kvw audit` against `h` under the time and memory caps.
fn audit(h: &Hostile, extra: &[&str]) -> Ran {
    let tmp = tempfile::tempdir().unwrap();
    let key = tmp.path().join("signing-key.json");
    kvw_evidence::Signer::generate().save(&key).unwrap();
    let out = tmp.path().join("audit");
    let mut args: Vec<OsString> = ["audit", "--endpoint"].map(Into::into).to_vec();
    args.push(h.url().into());
    for a in ["--key", "alpha", "--key", "beta", "--json", "--signing-key"] {
        args.push(a.into());
    }
    args.push(key.into());
    args.push("--out".into());
    args.push(out.clone().into());
    args.extend(extra.iter().map(OsString::from));
    let ran = run_kvw_within(&args, Sink::Pipe, &[], MEMORY_LIMIT_KIB, TIME_LIMIT);
    let receipts = std::fs::read_dir(out.join("receipts")).map_or(0, |d| d.count());
    Ran {
        code: ran.code,
        stdout: ran.stdout,
        stderr: ran.stderr,
        timed_out: ran.timed_out,
        receipts,
        wrote: out.exists(),
        largest_request: h.largest_request.load(Ordering::Relaxed),
    }
}

impl Ran {
    /// The JSON line of `gate`.
    fn gate(&self, gate: &str) -> Option<serde_json::Value> {
        self.stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|v| v["gate"] == gate)
    }

    fn result(&self, gate: &str) -> String {
        self.gate(gate)
            .and_then(|v| v["result"].as_str().map(str::to_string))
            .unwrap_or_default()
    }

    fn reason(&self, gate: &str) -> String {
        self.gate(gate)
            .and_then(|v| v["reason"].as_str().map(str::to_string))
            .unwrap_or_default()
    }
}

/// One attack: the server's lie, the audit's flags, what must come out.
pub struct AuditCase {
    pub name: &'static str,
    lie: Lie,
    flags: &'static [&'static str],
    expect: fn(&Ran) -> Result<(), String>,
}

fn want(ok: bool, why: impl FnOnce() -> String) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(why())
    }
}

/// A gate of the audit is `result` and its reason says `needle`.
fn gate_is(r: &Ran, gate: &str, result: &str, needle: &str) -> Result<(), String> {
    want(
        r.result(gate) == result && r.reason(gate).contains(needle),
        || {
            format!(
                "{gate}: {} '{}', expected {result} saying {needle:?}",
                r.result(gate),
                r.reason(gate)
            )
        },
    )
}

/// Exit 1 (a gate not passed) with every chosen gate's receipt written.
fn finished(r: &Ran, gates: usize) -> Result<(), String> {
    want(r.code == Some(1) && r.receipts == gates, || {
        format!(
            "exit {:?} with {} receipts, expected 1 with {gates}",
            r.code, r.receipts
        )
    })
}

/// A refusal: exit 2, one line on stderr saying `needle`, nothing written.
fn refused(r: &Ran, needle: &str) -> Result<(), String> {
    let lines: Vec<&str> = r.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    want(
        r.code == Some(2) && lines.len() == 1 && lines[0].contains(needle) && !r.wrote,
        || {
            format!("exit {:?}, stderr {lines:?}, {} receipts; expected 2 and one line saying {needle:?}", r.code, r.receipts)
        },
    )
}

/// The isolation gate ran and could not decide: answers did not arrive.
fn isolation_unanswered(r: &Ran) -> Result<(), String> {
    finished(r, 1)?;
    gate_is(r, "isolation", "inconclusive", "did not arrive in full")
}

/// One isolation round whose requests time out after a second.
const ISOLATION_1S: &[&str] = &[
    "--gates",
    "isolation",
    "--rounds",
    "1",
    "--request-timeout",
    "1",
];

/// Gates that need no timing pairs; one isolation round.
const FEW: &[&str] = &["--gates", "capacity,isolation,status", "--rounds", "1"];

/// Sizes the server made up: the capacity gate says it did not believe
/// them, the other gates still ran.
fn absurd(r: &Ran) -> Result<(), String> {
    finished(r, 3)?;
    gate_is(r, "capacity", "inconclusive", "not believed")
}

pub fn cases() -> Vec<AuditCase> {
    vec![
        AuditCase {
            name: "partial-body-carrying-the-other-canary-then-stall",
            lie: Lie::PartialLeakThenStall,
            flags: ISOLATION_1S,
            expect: |r| {
                finished(r, 1)?;
                gate_is(r, "isolation", "fail", "received tenant")
            },
        },
        AuditCase {
            name: "partial-body-then-stall-is-no-answer",
            lie: Lie::PartialThenStall,
            flags: ISOLATION_1S,
            expect: isolation_unanswered,
        },
        AuditCase {
            name: "max-model-len-1e12",
            lie: Lie::ModelLen(1_000_000_000_000),
            flags: FEW,
            expect: absurd,
        },
        AuditCase {
            name: "max-model-len-2^64-1",
            lie: Lie::ModelLen(u64::MAX),
            flags: FEW,
            expect: absurd,
        },
        AuditCase {
            name: "max-model-len-1e10-max-seconds-10",
            lie: Lie::ModelLen(10_000_000_000),
            flags: &[
                "--gates",
                "capacity,isolation,status",
                "--rounds",
                "1",
                "--max-seconds",
                "10",
            ],
            expect: absurd,
        },
        AuditCase {
            name: "max-model-len-2e8-builds-no-huge-request",
            lie: Lie::ModelLen(200_000_000),
            flags: FEW,
            expect: |r| {
                absurd(r)?;
                want(r.largest_request <= 8 << 20, || {
                    format!("sent a {}-byte request", r.largest_request)
                })
            },
        },
        AuditCase {
            name: "believable-context-beyond-the-request-cap",
            lie: Lie::ModelLen(16_000_000),
            flags: &[
                "--gates",
                "capacity,status",
                "--chars-per-token",
                "16",
                "--pool-tokens",
                "4096",
            ],
            expect: |r| {
                finished(r, 2)?;
                gate_is(r, "capacity", "inconclusive", "request cap")?;
                want(r.largest_request <= 8 << 20, || {
                    format!("sent a {}-byte request", r.largest_request)
                })
            },
        },
        AuditCase {
            name: "pool-2^64-1",
            lie: Lie::Pool(u64::MAX),
            flags: FEW,
            expect: |r| {
                finished(r, 3)?;
                gate_is(r, "capacity", "inconclusive", "not believed")
            },
        },
        AuditCase {
            name: "one-gib-body",
            lie: Lie::GiantBody,
            flags: &["--gates", "isolation", "--rounds", "1"],
            expect: isolation_unanswered,
        },
        AuditCase {
            name: "endless-sse-stream",
            lie: Lie::EndlessSse,
            flags: &[
                "--gates",
                "isolation",
                "--rounds",
                "1",
                "--request-timeout",
                "5",
            ],
            expect: isolation_unanswered,
        },
        AuditCase {
            name: "endless-body-max-seconds-5",
            lie: Lie::EndlessTrickle,
            flags: &[
                "--gates",
                "isolation",
                "--rounds",
                "1",
                "--max-seconds",
                "5",
                "--request-timeout",
                "60",
            ],
            expect: |r| refused(r, "5 s limit"),
        },
        AuditCase {
            name: "pool-tokens-flag-2^64-1",
            lie: Lie::ModelLen(8192),
            flags: &["--pool-tokens", "18446744073709551615"],
            expect: |r| refused(r, "not believed"),
        },
        AuditCase {
            name: "context-len-flag-0",
            lie: Lie::ModelLen(8192),
            flags: &["--context-len", "0"],
            expect: |r| refused(r, "0 tokens"),
        },
        AuditCase {
            name: "seventeen-tenants",
            lie: Lie::ModelLen(8192),
            flags: &[
                "--key", "k2", "--key", "k3", "--key", "k4", "--key", "k5", "--key", "k6", "--key",
                "k7", "--key", "k8", "--key", "k9", "--key", "k10", "--key", "k11", "--key", "k12",
                "--key", "k13", "--key", "k14", "--key", "k15", "--key", "k16",
            ],
            expect: |r| refused(r, "at most 16"),
        },
        AuditCase {
            name: "drip-is-no-finish-reason-finding",
            lie: Lie::Drip,
            flags: &["--gates", "status", "--request-timeout", "3"],
            expect: |r| {
                finished(r, 1)?;
                gate_is(r, "status", "inconclusive", "did not arrive in full")
            },
        },
    ]
}

/// Run every audit attack, four at a time; the failures.
pub fn run_all() -> Vec<String> {
    let cases = Arc::new(Mutex::new(cases()));
    let failures = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (cases, failures) = (cases.clone(), failures.clone());
            std::thread::spawn(move || loop {
                let Some(case) = cases.lock().unwrap().pop() else {
                    break;
                };
                let hostile = Hostile::start(case.lie);
                let ran = audit(&hostile, case.flags);
                let mut why = Vec::new();
                if ran.timed_out {
                    why.push(format!("did not finish within {TIME_LIMIT:?}"));
                } else if ran.code.is_none() {
                    why.push("killed by a signal (crash or allocation failure)".into());
                }
                if ran.stderr.contains("panicked") {
                    why.push("panicked".into());
                }
                if let Err(e) = (case.expect)(&ran) {
                    why.push(e);
                }
                if !why.is_empty() {
                    failures.lock().unwrap().push(format!(
                        "{}: {}\n  stdout: {:?}\n  stderr: {:?}",
                        case.name,
                        why.join("; "),
                        ran.stdout.chars().take(1500).collect::<String>(),
                        ran.stderr.chars().take(500).collect::<String>()
                    ));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let f = failures.lock().unwrap().clone();
    f
}

/// Forged audit receipts `kvw verify` must refuse: results their own
/// evidence contradicts, signed by the key the verifier trusts.
pub fn receipt_cases() -> Vec<crate::harness::Case> {
    use crate::harness::{args, case, refused, Cmd};
    let forged = |name: &'static str,
                  gate: &'static str,
                  result: &'static str,
                  evidence: serde_json::Value| {
        case(name, move |w| {
            let predicate = serde_json::json!({
                "gate": gate, "result": result, "endpoint": "http://127.0.0.1:1",
                "auditor_version": "0", "reason": "all good", "evidence": evidence,
                "prompts": [], "exchanges": [],
            });
            let statement = kvw_evidence::statement::Statement::for_predicate(
                &format!("{gate}.receipt.json"),
                kvw_evidence::audit::AUDIT_PREDICATE_TYPE,
                &predicate,
            )
            .unwrap();
            let payload = kvw_evidence::canonical::to_canonical_json(&statement).unwrap();
            let env = kvw_evidence::dsse::Envelope::sign(
                kvw_evidence::receipt::PAYLOAD_TYPE,
                &payload,
                &crate::harness::attacker(),
            );
            let path = w.at(&format!("{gate}.receipt.json"));
            std::fs::write(&path, env.to_json_pretty()).unwrap();
            Cmd::new(
                args([
                    OsString::from("verify"),
                    path.into(),
                    "--key".into(),
                    w.at("bundle.pub.json").into(),
                ]),
                refused(1, "inconsistent"),
            )
        })
    };
    vec![
        forged(
            "audit-pass-listing-a-leak",
            "isolation",
            "pass",
            serde_json::json!({"requests": 0, "leaks": [{"canary": "CANARY-t0-00000000", "receiver": "t1"}]}),
        ),
        forged(
            "audit-fail-without-a-leak",
            "isolation",
            "fail",
            serde_json::json!({"requests": 0, "leaks": []}),
        ),
        forged(
            "audit-status-pass-with-failures",
            "status",
            "pass",
            serde_json::json!({"failures": ["max_tokens -5 answered 200"]}),
        ),
        forged(
            "audit-timing-pass-below-alpha",
            "prefix-cache",
            "pass",
            serde_json::json!({"p_value": 0.0001, "alpha": 0.01}),
        ),
    ]
}
