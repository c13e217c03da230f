//! `kvw audit` over https: a TLS front on 127.0.0.1 with a certificate
//! made here (rcgen: a CA and a leaf for 127.0.0.1 and localhost) relays to
//! `kvw serve --openai`. With `--cacert` the audit passes; without it, or
//! with another CA, it stops with one line and exit 2; a redirect is
//! reported, never followed; and no key given with `--key` appears in what
//! the audit prints or signs, even from a server that echoes it. Every
//! server here listens on 127.0.0.1 and stops when dropped.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Output;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{any, get, post};
use axum::{Json, Router};
use kvw_evidence::audit::{AuditPredicate, GateResult};
use kvw_testkit::served::{App, Process, APP_LIFETIME};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::{json, Value};

mod common;

const KEYS: [&str; 2] = ["alpha-secret-key-1", "beta-secret-key-2"];

/// A CA made for the test.
struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        Ca { issuer }
    }

    /// Write the CA's certificate as PEM into `dir`.
    fn pem_file(&self, dir: &Path, name: &str) -> std::path::PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, self.issuer.pem()).unwrap();
        path
    }

    /// A leaf certificate for 127.0.0.1 and localhost, and its key.
    fn leaf(&self) -> (CertificateDer<'static>, PrivateKeyDer<'static>) {
        let key = KeyPair::generate().unwrap();
        let params =
            CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let der = PrivatePkcs8KeyDer::from(key.serialize_der());
        (cert.der().clone(), der.into())
    }
}

/// A TLS front on 127.0.0.1: each connection is decrypted and relayed to
/// `backend` as plain TCP. Stops on drop or after [`APP_LIFETIME`].
struct TlsFront(App);

impl TlsFront {
    fn start(ca: &Ca, backend: u16) -> TlsFront {
        let (cert, key) = ca.leaf();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert], key)
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        TlsFront(App::run(move |listener, mut stopped| async move {
            let end = tokio::time::sleep(APP_LIFETIME);
            tokio::pin!(end);
            loop {
                let (tcp, _) = tokio::select! {
                    _ = &mut end => break,
                    _ = &mut stopped => break,
                    a = listener.accept() => match a { Ok(a) => a, Err(_) => continue },
                };
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    // A client that refuses the certificate ends here.
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let to = SocketAddr::from(([127, 0, 0, 1], backend));
                    let Ok(mut plain) = tokio::net::TcpStream::connect(to).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        }))
    }

    fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.0.port)
    }
}

/// `kvw serve --openai --fixes all` with the two keys.
fn serve_openai() -> Process {
    common::serve_openai_with(&KEYS, "all", "per-tenant", &[])
}

/// What one audit printed and signed.
struct Audited {
    out: Output,
    /// Each receipt's bytes and its verified predicate.
    receipts: Vec<(Vec<u8>, Value)>,
}

impl Audited {
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }

    /// Everything the audit printed or wrote, as text.
    fn everything(&self) -> String {
        let mut all = String::from_utf8_lossy(&self.out.stdout).into_owned();
        all.push_str(&self.stderr());
        // The signed payload is base64 inside the envelope: its decoded
        // predicate counts too.
        for (bytes, predicate) in &self.receipts {
            all.push_str(&String::from_utf8_lossy(bytes));
            all.push_str(&predicate.to_string());
        }
        all
    }

    /// One error line on stderr and exit 2.
    fn one_line_error(&self) -> String {
        let err = self.stderr();
        assert_eq!(self.out.status.code(), Some(2), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(self.receipts.is_empty());
        err
    }
}

fn audit(url: &str, extra: &[&str]) -> Audited {
    let (dir, signer, key) = common::signing_key();
    let out_dir = dir.path().join("audit");
    let out = common::audit_command(url, &[KEYS[0], KEYS[1]])
        .args(["--json", "--max-seconds", "120"])
        .arg("--out")
        .arg(&out_dir)
        .arg("--signing-key")
        .arg(&key)
        .args(extra)
        .output()
        .unwrap();
    let mut receipts = Vec::new();
    if let Ok(entries) = std::fs::read_dir(out_dir.join("receipts")) {
        for e in entries {
            let bytes = std::fs::read(e.unwrap().path()).unwrap();
            let v = kvw_evidence::verify_statement(&bytes, &signer.public()).unwrap();
            receipts.push((bytes, v.predicate));
        }
    }
    Audited { out, receipts }
}

fn assert_no_key(a: &Audited) {
    let all = a.everything();
    for k in KEYS {
        assert!(!all.contains(k), "key {k} appears in the audit's output");
    }
}

#[test]
fn https_with_the_private_ca_passes_and_without_it_stops_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("kvw test CA");
    let ca_pem = ca.pem_file(dir.path(), "ca.pem");
    let other_pem = Ca::new("another CA").pem_file(dir.path(), "other.pem");
    let server = serve_openai();
    let front = TlsFront::start(&ca, server.port);

    let gates = ["--gates", "capacity,isolation,status", "--rounds", "1"];
    let ca_arg = ca_pem.to_str().unwrap();
    let a = audit(&front.url(), &[&gates[..], &["--cacert", ca_arg]].concat());
    assert_eq!(a.out.status.code(), Some(0), "{}", a.stderr());
    let lines: Vec<Value> = String::from_utf8_lossy(&a.out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|v: &Value| v.get("gate").is_some())
        .collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines.iter().all(|g| g["result"] == "pass"), "{lines:?}");
    assert_eq!(a.receipts.len(), 3);
    for (_, predicate) in &a.receipts {
        let p: AuditPredicate = serde_json::from_value(predicate.clone()).unwrap();
        assert_eq!(p.result, GateResult::Pass);
        assert!(p.endpoint.starts_with("https://"));
        assert!(!p.exchanges.is_empty());
    }
    assert_no_key(&a);

    // The public roots do not know the test's CA.
    let a = audit(&front.url(), &["--gates", "status"]);
    let err = a.one_line_error();
    assert!(err.contains("TLS with https://127.0.0.1"), "{err}");
    assert!(err.contains("UnknownIssuer"), "{err}");
    assert!(err.contains("--cacert"), "{err}");

    // Another CA is no better.
    let other = other_pem.to_str().unwrap();
    let a = audit(&front.url(), &["--gates", "status", "--cacert", other]);
    let err = a.one_line_error();
    assert!(err.contains("UnknownIssuer"), "{err}");

    // Neither is a file that holds no certificate, nor --cacert over http.
    let junk = dir.path().join("junk.pem");
    std::fs::write(&junk, "hello\n").unwrap();
    let a = audit(&front.url(), &["--cacert", junk.to_str().unwrap()]);
    let err = a.one_line_error();
    assert!(err.contains("holds no PEM certificate"), "{err}");
    // Credentials in the URL are refused without repeating them.
    let with_secret = front.url().replace("https://", "https://user:hunter2@");
    let a = audit(&with_secret, &["--cacert", ca_arg]);
    let err = a.one_line_error();
    assert!(
        err.contains("carries credentials") && !err.contains("hunter2"),
        "{err}"
    );
    let plain = server.url();
    let a = audit(&plain, &["--cacert", ca_arg]);
    let err = a.one_line_error();
    assert!(err.contains("plain http"), "{err}");
}

#[test]
fn a_redirect_is_reported_and_never_followed() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("kvw test CA");
    let ca_pem = ca.pem_file(dir.path(), "ca.pem");
    // Where the redirect points: it counts every request it gets.
    let hits = Arc::new(AtomicUsize::new(0));
    let count = |State(h): State<Arc<AtomicUsize>>| async move {
        h.fetch_add(1, Ordering::SeqCst);
        Json(json!({"object": "list", "data": [{"id": "elsewhere"}]}))
    };
    let elsewhere = App::start(Router::new().fallback(count).with_state(hits.clone()));
    let target = format!("{}/v1/models", elsewhere.url());
    let location = target.clone();
    let redirecting = App::start(Router::new().fallback(any(move || {
        let to = location.clone();
        async move { (StatusCode::TEMPORARY_REDIRECT, [("location", to)], "moved") }
    })));
    let front = TlsFront::start(&ca, redirecting.port);
    let a = audit(&front.url(), &["--cacert", ca_pem.to_str().unwrap()]);
    let err = a.one_line_error();
    assert!(err.contains("307"), "{err}");
    assert!(err.contains(&format!("redirecting to {target}")), "{err}");
    assert!(err.contains("follows no redirect"), "{err}");
    assert_eq!(hits.load(Ordering::SeqCst), 0, "the redirect was followed");
}

/// A server that echoes the caller's `Authorization` header in every answer.
fn echoing() -> Router {
    async fn models(h: HeaderMap) -> Json<Value> {
        let auth = h["authorization"].to_str().unwrap_or_default().to_string();
        Json(
            json!({"object": "list", "data": [{"id": format!("echo {auth}"), "max_model_len": 512}]}),
        )
    }
    async fn completions(h: HeaderMap, body: String) -> axum::response::Response {
        let auth = h["authorization"].to_str().unwrap_or_default().to_string();
        let Ok(v) = serde_json::from_str::<Value>(&body) else {
            return (StatusCode::BAD_REQUEST, format!("bad JSON from {auth}")).into_response();
        };
        let prompt = v["prompt"].as_str().unwrap_or_default();
        let n = prompt.chars().count() as u64;
        if n > 512 || v["max_tokens"].as_i64().unwrap_or(0) < 1 {
            return (StatusCode::BAD_REQUEST, format!("refused for {auth}")).into_response();
        }
        Json(json!({
            "choices": [{"text": format!("you are {auth}"), "finish_reason": "length"}],
            "usage": {"prompt_tokens": n, "completion_tokens": 2},
        }))
        .into_response()
    }
    Router::new()
        .route("/v1/models", get(models))
        .route("/v1/completions", post(completions))
}

#[test]
fn keys_a_server_echoes_are_masked_in_output_and_receipts() {
    let app = App::start(echoing());
    let a = audit(
        &app.url(),
        &["--gates", "status,isolation", "--rounds", "1"],
    );
    assert!(
        a.out.status.code().is_some_and(|c| c <= 1),
        "{}",
        a.stderr()
    );
    assert_eq!(a.receipts.len(), 2, "{}", a.stderr());
    let all = a.everything();
    assert!(all.contains("[key of t0]"), "the echo was not recorded");
    assert_no_key(&a);
}

#[test]
fn a_server_that_never_answers_the_handshake_is_one_line_in_bounded_time() {
    // Accepts connections and says nothing, for at most 60 s.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopped = stop.clone();
    let tarpit = std::thread::spawn(move || {
        let mut held = Vec::new();
        let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !stopped.load(Ordering::SeqCst) && std::time::Instant::now() < until {
            if let Ok((s, _)) = listener.accept() {
                held.push(s);
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    });
    let url = format!("https://127.0.0.1:{port}");
    let a = audit(&url, &["--request-timeout", "2"]);
    stop.store(true, Ordering::SeqCst);
    tarpit.join().unwrap();
    let err = a.one_line_error();
    assert!(err.contains("gave no answer"), "{err}");
    assert!(err.contains("within the request timeout"), "{err}");
}
