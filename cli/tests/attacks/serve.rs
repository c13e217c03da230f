//! Attacks on `kvw serve` over 127.0.0.1: leaving the root through links,
//! dotfiles, encoded traversal, absurd paths, slow and idle clients; roots
//! that must be refused; and against the keyed endpoint ([`key_cases`]):
//! probes and completions without a key or with two, bodies that never
//! arrive, a full server, one tenant's burst of rejected prompts, and the
//! prefix cache's `cached_tokens` across tenants.

use std::ffi::OsString;
use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kvw_testkit::http::{self, Response};
use kvw_testkit::served::Process;

use crate::harness::*;

/// Idle timeout given to the server under test (seconds).
const IDLE: u64 = 1;
/// Longest a connection may stay open against that timeout.
const CLOSE_WITHIN: Duration = Duration::from_secs(6);

/// A server on a site folder seeded with bait, stopped on drop.
pub struct Server {
    _process: Process,
    pub port: u16,
    pub _tmp: tempfile::TempDir,
}

impl Server {
    pub fn start() -> Server {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("site");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::create_dir_all(root.join("linked-index")).unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(root.join("index.html"), "<!DOCTYPE html><p>site</p>").unwrap();
        std::fs::write(root.join("sub/page.html"), "<p>page</p>").unwrap();
        std::fs::write(root.join(".git/config"), "[remote] url = SECRET-GIT").unwrap();
        std::fs::write(root.join(".env"), "TOKEN=SECRET-ENV").unwrap();
        std::fs::write(outside.join("shadow"), "root:SECRET-SHADOW").unwrap();
        std::fs::write(outside.join("index.html"), "SECRET-INDEX").unwrap();
        let link =
            |target: &Path, at: &str| std::os::unix::fs::symlink(target, root.join(at)).unwrap();
        link(&outside.join("shadow"), "leak.txt");
        link(&outside, "outside-dir");
        link(Path::new("/etc/passwd"), "passwd");
        link(&outside.join("index.html"), "linked-index/index.html");
        let mut a = args([
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--for-seconds",
            "120",
            "--idle-timeout",
        ]);
        a.push(IDLE.to_string().into());
        a.push("--dir".into());
        a.push(root.into());
        spawn_serve(&a, tmp)
    }

    /// `kvw serve` with an OpenAI endpoint: keys `alpha` and `beta`,
    /// `--fixes all`, the given extra flags.
    pub fn start_openai(extra: &[&str]) -> Server {
        let tmp = tempfile::tempdir().unwrap();
        let key = tmp.path().join("signing-key.json");
        kvw_evidence::Signer::generate().save(&key).unwrap();
        let mut a = args([
            "serve",
            "--openai",
            "--addr",
            "127.0.0.1:0",
            "--for-seconds",
            "300",
            "--key",
            "alpha",
            "--key",
            "beta",
            "--fixes",
            "all",
        ]);
        a.extend(extra.iter().map(OsString::from));
        a.push("--signing-key".into());
        a.push(key.into());
        spawn_serve(&a, tmp)
    }

    /// Send one raw request; the response (status 0 if the connection
    /// closed without one, or none came within 10 s).
    pub fn request(&self, raw: &[u8]) -> Response {
        http::exchange(self.port, raw, Duration::from_secs(10))
    }

    pub fn get(&self, target: &str) -> Response {
        self.request(&get_bytes(target))
    }

    /// Seconds until the server closes a connection that behaves like `f`.
    fn closes_within(&self, f: impl Fn(&mut TcpStream) -> bool) -> Result<Duration, String> {
        let mut s = http::connect(self.port, Duration::from_millis(200));
        let start = Instant::now();
        while start.elapsed() < CLOSE_WITHIN {
            if !f(&mut s) {
                return Ok(start.elapsed());
            }
            let mut b = [0u8; 256];
            match s.read(&mut b) {
                Ok(0) => return Ok(start.elapsed()),
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => return Ok(start.elapsed()),
            }
        }
        Err(format!("still open after {CLOSE_WITHIN:?}"))
    }
}

/// Start `kvw serve ARGS`, its folder kept with it; the port comes from
/// its first line.
fn spawn_serve(a: &[OsString], tmp: tempfile::TempDir) -> Server {
    let mut serve = Command::new(KVW);
    serve.args(a).stderr(Stdio::null());
    let process = Process::spawn(serve);
    Server {
        port: process.port,
        _process: process,
        _tmp: tmp,
    }
}

/// A request attack: the target and the statuses that count as refused.
pub struct RequestCase {
    pub name: &'static str,
    pub raw: Vec<u8>,
    pub allowed: &'static [u16],
}

/// `GET target` with no body and no length.
fn get_bytes(target: &str) -> Vec<u8> {
    format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").into_bytes()
}

fn get(name: &'static str, target: &str, allowed: &'static [u16]) -> RequestCase {
    RequestCase {
        name,
        raw: get_bytes(target),
        allowed,
    }
}

const NOT_FOUND: &[u16] = &[404];
const BAD: &[u16] = &[400, 404];
const TOO_LONG: &[u16] = &[414];

pub fn request_cases() -> Vec<RequestCase> {
    let a = |n: usize| "a".repeat(n);
    vec![
        get("link-to-outside-file", "/leak.txt", NOT_FOUND),
        get("link-to-etc-passwd", "/passwd", NOT_FOUND),
        get("link-to-outside-folder", "/outside-dir/shadow", NOT_FOUND),
        get("link-to-outside-folder-listing", "/outside-dir/", NOT_FOUND),
        get("folder-index-is-a-link", "/linked-index/", NOT_FOUND),
        get("folder-index-link-direct", "/linked-index/index.html", NOT_FOUND),
        get("dotfile-git-config", "/.git/config", NOT_FOUND),
        get("dotfile-env", "/.env", NOT_FOUND),
        get("dotfile-encoded", "/%2egit/config", NOT_FOUND),
        get("dotfile-encoded-fully", "/%2e%67%69%74/config", NOT_FOUND),
        get("traversal-raw", "/../outside/shadow", BAD),
        get("traversal-encoded-dots", "/%2e%2e/outside/shadow", BAD),
        get("traversal-encoded-slash", "/sub/..%2f..%2foutside%2fshadow", BAD),
        get("traversal-double-encoded", "/%252e%252e/outside/shadow", BAD),
        get("traversal-backslash", "/sub/..%5c..%5coutside%5cshadow", BAD),
        get("nul-byte", "/index.html%00.txt", BAD),
        get("invalid-utf8", "/%ff%fe", BAD),
        get("absolute-form-file-url", "file:///etc/passwd", &[400, 404]),
        get("path-256", &format!("/{}", a(256)), NOT_FOUND),
        get("path-1000-in-segments", &format!("/{}", vec![a(99); 10].join("/")), NOT_FOUND),
        get("segment-300", &format!("/sub/{}", a(300)), NOT_FOUND),
        get("path-4096", &format!("/{}", vec![a(200); 20].join("/")), TOO_LONG),
        get("path-65000", &format!("/{}", vec![a(250); 260].join("/")), TOO_LONG),
        get("query-65000", &format!("/index.html?{}", a(65_000)), TOO_LONG),
        RequestCase {
            name: "post-method",
            raw: b"POST /index.html HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec(),
            allowed: &[405],
        },
        RequestCase {
            name: "garbage-request-line",
            raw: b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n".to_vec(),
            allowed: &[0, 400],
        },
        RequestCase {
            name: "huge-header",
            raw: format!("GET / HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n", a(200_000)).into_bytes(),
            allowed: &[0, 400, 431],
        },
    ]
}

/// Slow and idle clients: each must be disconnected within [`CLOSE_WITHIN`].
/// A slow client: one step of its behaviour, false once the server is gone.
pub type SlowClient = fn(&mut TcpStream) -> bool;

pub fn slow_cases() -> Vec<(&'static str, SlowClient)> {
    vec![
        ("idle-connection", |_| true),
        ("trickled-headers", |s| s.write_all(b"G").is_ok()),
        ("trickled-after-request-line", |s| {
            thread_local!(static SENT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) });
            SENT.with(|sent| {
                let r = if sent.get() {
                    s.write_all(b"X")
                } else {
                    s.write_all(b"GET / HTTP/1.1\r\n")
                };
                sent.set(true);
                r.is_ok()
            })
        }),
        ("idle-after-keep-alive-request", |s| {
            thread_local!(static SENT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) });
            SENT.with(|sent| {
                if !sent.get() {
                    sent.set(true);
                    let _ = s.write_all(b"GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n");
                }
                true
            })
        }),
    ]
}

/// Roots `kvw serve` must refuse, and other start-up attacks.
pub fn start_cases() -> Vec<Case> {
    let serve = |dir: OsString| {
        args([
            OsString::from("serve"),
            "--addr".into(),
            "127.0.0.1:0".into(),
            "--for-seconds".into(),
            "2".into(),
            "--dir".into(),
            dir,
        ])
    };
    vec![
        case("serve-root-folder", move |_| {
            Cmd::new(serve("/".into()), refused(1, "file system root"))
        }),
        case("serve-root-via-dots", move |w| {
            let mut dots = w.root().to_path_buf();
            for _ in w.root().components().skip(1) {
                dots.push("..");
            }
            Cmd::new(serve(dots.into()), refused(1, "file system root"))
        }),
        case("serve-home-folder", move |w| {
            std::fs::create_dir_all(w.at("home/user")).unwrap();
            let mut cmd = Cmd::new(serve(w.at("home/user").into()), refused(1, "home folder"));
            cmd.env.push(("HOME", w.at("home/user").into()));
            cmd
        }),
        case("serve-folder-holding-home", move |w| {
            std::fs::create_dir_all(w.at("home/user")).unwrap();
            let mut cmd = Cmd::new(serve(w.at("home").into()), refused(1, "home folder"));
            cmd.env.push(("HOME", w.at("home/user").into()));
            cmd
        }),
        case("serve-home-through-link", move |w| {
            std::fs::create_dir_all(w.at("home/user")).unwrap();
            std::os::unix::fs::symlink(w.at("home/user"), w.at("innocent")).unwrap();
            let mut cmd = Cmd::new(serve(w.at("innocent").into()), refused(1, "home folder"));
            cmd.env.push(("HOME", w.at("home/user").into()));
            cmd
        }),
        case("serve-a-file", move |w| {
            Cmd::new(serve(w.p("index.json").into()), refused(1, "not a folder"))
        }),
        case("serve-a-fifo", move |w| {
            mkfifo(&w.at("f"));
            Cmd::new(serve(w.at("f").into()), refused(1, "not a folder"))
        }),
        case("serve-missing-folder", move |w| {
            Cmd::new(serve(w.at("nope").into()), refused(1, "cannot open"))
        }),
        case("serve-all-interfaces", move |w| {
            let mut a = serve(w.bundle.clone().into());
            a[2] = "0.0.0.0:0".into();
            Cmd::new(a, refused(1, "127.0.0.1 only"))
        }),
        case("serve-ipv6-any", move |w| {
            let mut a = serve(w.bundle.clone().into());
            a[2] = "[::]:0".into();
            Cmd::new(a, refused(1, "127.0.0.1 only"))
        }),
        case("serve-zero-idle-timeout", move |w| {
            let mut a = serve(w.bundle.clone().into());
            a.extend(args(["--idle-timeout", "0"]));
            Cmd::new(a, refused(2, "idle-timeout"))
        }),
    ]
}

/// Run every request and slow-client attack against one server; returns
/// (attacks, failures).
pub fn run_against_server() -> (usize, Vec<String>) {
    let server = Server::start();
    let mut failures = Vec::new();
    // The server works at all (not an attack).
    let r = server.get("/");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(server.get("/sub/page.html").status, 200);
    let requests = request_cases();
    let slow = slow_cases();
    for case in &requests {
        let r = server.request(&case.raw);
        let code = r.status;
        if !case.allowed.contains(&code) {
            failures.push(format!(
                "{}: status {code}, expected one of {:?}",
                case.name, case.allowed
            ));
        }
        if r.head.contains("SECRET-") || r.text().contains("SECRET-") {
            failures.push(format!("{}: served a secret", case.name));
        }
    }
    for (name, f) in &slow {
        if let Err(why) = server.closes_within(f) {
            failures.push(format!("{name}: {why}"));
        }
    }
    // Still serving after all of that.
    let code = server.get("/").status;
    if code != 200 {
        failures.push(format!("server stopped answering (status {code})"));
    }
    (requests.len() + slow.len(), failures)
}

/// One attack on the keyed endpoint: its name and its check.
pub type KeyCase = (&'static str, fn(&KeyedServers) -> Result<(), String>);

/// The servers the keyed attacks run against.
pub struct KeyedServers {
    /// `--prefix-cache per-tenant`, default limits.
    pub main: Server,
    /// `--prefix-cache shared`, `--max-connections 8`.
    pub small: Server,
}

/// A request with the given extra header lines and body, and
/// `Connection: close` (status 0 when no answer came within 15 s).
fn send(port: u16, line: &str, headers: &[&str], body: &str) -> Response {
    http::send(port, line, headers, body.as_bytes())
}

fn completion(prompt: &str) -> String {
    serde_json::json!({"model": "kvw-echo", "prompt": prompt, "max_tokens": 4}).to_string()
}

/// The body of `got` if its status is `want`.
fn expect(what: &str, got: Response, want: u16) -> Result<String, String> {
    if got.status == want {
        Ok(got.text())
    } else {
        Err(format!(
            "{what}: status {}, expected {want}: {:?}",
            got.status,
            got.text().chars().take(300).collect::<String>()
        ))
    }
}

/// Open a connection that sends a POST's headers (`Content-Length`
/// 1,000,000, or chunked) and the first byte of its body.
fn slow_body(port: u16, key: Option<&str>, chunked: bool) -> TcpStream {
    let mut s = http::connect(port, Duration::from_secs(30));
    let auth = key.map_or(String::new(), |k| format!("Authorization: Bearer {k}\r\n"));
    let length = if chunked {
        "Transfer-Encoding: chunked\r\n\r\n1\r\n{\r\n"
    } else {
        "Content-Length: 1000000\r\n\r\n{"
    };
    let head = format!(
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{auth}{length}"
    );
    let _ = s.write_all(head.as_bytes());
    s
}

/// Keep `conns` dripping one byte each until each has an answer or the
/// guard passes; the statuses.
fn drip_until_answered(mut conns: Vec<TcpStream>, chunked: bool) -> Vec<u16> {
    for s in &conns {
        s.set_nonblocking(true).unwrap();
    }
    let mut answers: Vec<Option<Vec<u8>>> = vec![None; conns.len()];
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) && answers.iter().any(Option::is_none) {
        for (s, a) in conns.iter_mut().zip(answers.iter_mut()) {
            if a.is_some() {
                continue;
            }
            let mut b = [0u8; 4096];
            match s.read(&mut b) {
                Ok(n) if n > 0 => *a = Some(b[..n].to_vec()),
                Ok(_) => *a = Some(Vec::new()),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    let byte: &[u8] = if chunked { b"1\r\n \r\n" } else { b" " };
                    let _ = s.write_all(byte);
                }
                Err(_) => *a = Some(Vec::new()),
            }
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    answers
        .into_iter()
        .map(|a| {
            a.and_then(|b| {
                String::from_utf8_lossy(&b)
                    .split_whitespace()
                    .nth(1)
                    .and_then(|c| c.parse().ok())
            })
            .unwrap_or(0)
        })
        .collect()
}

const PROBE: &str = r#"{"fixes":"all","seed":7}"#;

pub fn key_cases() -> Vec<KeyCase> {
    vec![
        ("probe-without-key", |s| {
            expect(
                "POST /api/probe without a key",
                send(s.main.port, "POST /api/probe", &[], PROBE),
                401,
            )
            .map(drop)
        }),
        ("probe-with-an-unknown-key", |s| {
            let h = ["Authorization: Bearer mallory"];
            expect(
                "POST /api/probe, unknown key",
                send(s.main.port, "POST /api/probe", &h, PROBE),
                401,
            )
            .map(drop)
        }),
        ("probe-with-two-authorization-headers", |s| {
            let h = ["Authorization: Bearer alpha", "Authorization: Bearer beta"];
            expect(
                "POST /api/probe, two keys",
                send(s.main.port, "POST /api/probe", &h, PROBE),
                400,
            )
            .map(drop)
        }),
        ("completion-with-two-authorization-headers", |s| {
            let h = ["Authorization: Bearer alpha", "Authorization: Bearer beta"];
            let r = send(
                s.main.port,
                "POST /v1/completions",
                &h,
                &completion("^hello"),
            );
            expect("completion, two keys", r, 400).map(drop)
        }),
        ("unauthenticated-slow-bodies-refused-from-headers", |s| {
            let conns: Vec<_> = (0..64)
                .map(|_| slow_body(s.main.port, None, false))
                .collect();
            let statuses = drip_until_answered(conns, false);
            let bad: Vec<_> = statuses.iter().filter(|&&c| c != 401).collect();
            if bad.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "{} of 64 keyless slow bodies not refused with 401: {bad:?}",
                    bad.len()
                ))
            }
        }),
        (
            "slow-bodies-cut-and-a-legitimate-request-served-meanwhile",
            |s| {
                let conns: Vec<_> = (0..64)
                    .map(|_| slow_body(s.main.port, Some("alpha"), false))
                    .collect();
                let h = ["Authorization: Bearer beta"];
                let served = send(
                    s.main.port,
                    "POST /v1/completions",
                    &h,
                    &completion("^meanwhile"),
                );
                let statuses = drip_until_answered(conns, false);
                expect("a request while 64 slow bodies are held", served, 200)?;
                let bad: Vec<_> = statuses.iter().filter(|&&c| c != 408).collect();
                if bad.is_empty() {
                    Ok(())
                } else {
                    Err(format!(
                        "{} of 64 slow bodies not cut with 408: {bad:?}",
                        bad.len()
                    ))
                }
            },
        ),
        ("chunked-body-that-never-ends", |s| {
            let conns: Vec<_> = (0..8)
                .map(|_| slow_body(s.main.port, Some("alpha"), true))
                .collect();
            let statuses = drip_until_answered(conns, true);
            if statuses.iter().all(|&c| c == 408) {
                Ok(())
            } else {
                Err(format!(
                    "endless chunked bodies answered {statuses:?}, expected 408"
                ))
            }
        }),
        ("a-full-server-answers-503", |s| {
            let held: Vec<_> = (0..8)
                .map(|_| slow_body(s.small.port, Some("alpha"), false))
                .collect();
            std::thread::sleep(Duration::from_millis(300));
            let r = send(s.small.port, "GET /healthz", &[], "");
            drop(held);
            expect("a connection past --max-connections 8", r, 503).map(drop)
        }),
        (
            "a-burst-of-rejected-prompts-does-not-starve-another-tenant",
            |s| {
                let over_pool = completion(&format!("^{}", "CANARY-alpha-burst ".repeat(315)));
                let burst: Vec<_> = (0..8)
                    .map(|_| {
                        let body = over_pool.clone();
                        let port = s.main.port;
                        std::thread::spawn(move || {
                            (0..25)
                                .map(|_| {
                                    send(
                                        port,
                                        "POST /v1/completions",
                                        &["Authorization: Bearer alpha"],
                                        &body,
                                    )
                                    .status
                                })
                                .collect::<Vec<u16>>()
                        })
                    })
                    .collect();
                let codes: Vec<u16> = burst.into_iter().flat_map(|t| t.join().unwrap()).collect();
                if let Some(c) = codes.iter().find(|&&c| c != 400) {
                    return Err(format!("an over-pool prompt answered {c}, not 400"));
                }
                for k in 0..20 {
                    let r = send(
                        s.main.port,
                        "POST /v1/completions",
                        &["Authorization: Bearer beta"],
                        &completion(&format!("^beta request {k}")),
                    );
                    expect(
                        &format!("beta's request {k} after alpha's 200 rejected prompts"),
                        r,
                        200,
                    )?;
                }
                Ok(())
            },
        ),
        ("per-tenant-prefix-cache-reports-no-foreign-match", |s| {
            let prompt = format!("^{}", "a shared system prompt ".repeat(40));
            let cached = |server: &Server, key: &str| -> Result<u64, String> {
                let h = [format!("Authorization: Bearer {key}")];
                let body = expect(
                    "completion",
                    send(
                        server.port,
                        "POST /v1/completions",
                        &[h[0].as_str()],
                        &completion(&prompt),
                    ),
                    200,
                )?;
                let v: serde_json::Value =
                    serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
                v["usage"]["prompt_tokens_details"]["cached_tokens"]
                    .as_u64()
                    .ok_or_else(|| body.to_string())
            };
            // Per-tenant: beta sees nothing of alpha's prefix; alpha sees its own.
            cached(&s.main, "alpha")?;
            let foreign = cached(&s.main, "beta")?;
            let own = cached(&s.main, "alpha")?;
            // Shared (the demonstration): beta's count shows alpha's prefix.
            cached(&s.small, "alpha")?;
            let shared = cached(&s.small, "beta")?;
            if foreign == 0 && own > 0 && shared > 0 {
                Ok(())
            } else {
                Err(format!("cached_tokens: per-tenant foreign {foreign}, own {own}; shared foreign {shared}"))
            }
        }),
    ]
}

/// Run every keyed attack; (attacks, failures).
pub fn run_keyed() -> (usize, Vec<String>) {
    let servers = KeyedServers {
        main: Server::start_openai(&["--prefix-cache", "per-tenant"]),
        small: Server::start_openai(&["--prefix-cache", "shared", "--max-connections", "8"]),
    };
    let cases = key_cases();
    let failures = cases
        .iter()
        .filter_map(|(name, f)| f(&servers).err().map(|e| format!("{name}: {e}")))
        .collect();
    (cases.len(), failures)
}
