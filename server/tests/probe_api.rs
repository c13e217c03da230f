//! `POST /api/probe` over loopback HTTP: a pre-fix probe's signed receipt
//! shows the leak, a post-fix one does not, and bad bodies get 4xx.

use std::sync::Arc;

use kvw_evidence::{ProbePredicate, Signer};
use kvw_server::probe_api::{router, ProbeApi};
use kvw_testkit::http;
use kvw_testkit::served::App;

fn post(port: u16, body: &[u8]) -> (u16, String) {
    let r = http::post_json(port, "/api/probe", None, body);
    (r.status, r.text())
}

#[test]
fn probes_come_back_signed_and_bad_bodies_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("k.json");
    let signer = Signer::generate();
    signer.save(&key).unwrap();
    let app = App::start(router(Arc::new(ProbeApi::new(Some(key)))));
    let port = app.port;

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
