//! `POST /api/probe` over loopback HTTP: a pre-fix probe's signed receipt
//! shows the leak, a post-fix one does not, and bad bodies get 4xx.

mod common;

use std::sync::Arc;

use kvw_evidence::{ProbePredicate, Signer};
use kvw_server::probe_api::{router, ProbeApi};

fn post(port: u16, body: &[u8]) -> (u16, String) {
    common::raw(
        port,
        "POST /api/probe HTTP/1.1\r\nContent-Type: application/json",
        body,
    )
}

#[test]
fn probes_come_back_signed_and_bad_bodies_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("k.json");
    let signer = Signer::generate();
    signer.save(&key).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let app = router(Arc::new(ProbeApi::new(Some(key))));
    rt.spawn(async move { axum::serve(listener, app).await });

    for (fixes, leak) in [("none", true), ("all", false)] {
        let (status, body) = post(
            port,
            format!(r#"{{"fixes":"{fixes}","seed":7}}"#).as_bytes(),
        );
        assert_eq!(status, 200, "{body}");
        let v = kvw_evidence::verify_statement(body.as_bytes(), &signer.public()).unwrap();
        let p: ProbePredicate = v.parse().unwrap();
        assert_eq!(p.verdict.leak, leak, "{fixes}");
        assert_eq!(p.config.seed, 7);
    }
    for (body, want) in [
        (br#"{"fixes":"bogus"}"#.to_vec(), 400),
        (br#"{"scale":"incident"}"#.to_vec(), 400),
        (br#"{"fixes":"none","extra":1}"#.to_vec(), 400),
        (br#"{"seed":-1}"#.to_vec(), 400),
        (b"not json".to_vec(), 400),
        (vec![b' '; 64 * 1024], 413),
    ] {
        let (status, text) = post(port, &body);
        assert_eq!(status, want, "{text}");
        assert!(text.contains("\"error\""), "{text}");
    }
}
