//! `kvw serve --dir` answers precompressed twins to clients that accept
//! them, with cache headers and the site's Content-Security-Policy, and
//! keeps `/healthz` and `/api/probe` beside the site.

mod common;

use std::process::Command;

use kvw_testkit::http;

/// `GET path` with `extra` headers: the head, lowercased, and the body.
fn get(port: u16, path: &str, extra: &[&str]) -> (String, Vec<u8>) {
    let r = http::get(port, path, extra);
    (r.head.to_lowercase(), r.body)
}

#[test]
fn precompressed_twins_and_cache_headers() {
    let site = tempfile::tempdir().unwrap();
    std::fs::write(site.path().join("index.html"), "<p>hi</p>").unwrap();
    let js = "console.log('kvw');".repeat(50);
    std::fs::write(site.path().join("app.js"), &js).unwrap();
    let gz = Command::new("gzip")
        .arg("-c")
        .arg(site.path().join("app.js"))
        .output()
        .unwrap();
    assert!(gz.status.success());
    std::fs::write(site.path().join("app.js.gz"), &gz.stdout).unwrap();
    let server = common::serve_dir(site.path(), 30);
    let port = server.port;

    let (head, body) = get(port, "/app.js", &["Accept-Encoding: gzip"]);
    assert!(head.contains("content-encoding: gzip"), "{head}");
    assert_eq!(body, gz.stdout);
    assert!(
        head.contains("cache-control: public, max-age=300"),
        "{head}"
    );
    assert!(head.contains("vary: accept-encoding"), "{head}");
    let (head, body) = get(port, "/app.js", &[]);
    assert!(!head.contains("content-encoding"), "{head}");
    assert_eq!(body, js.as_bytes());
    let (head, _) = get(port, "/", &[]);
    assert!(head.contains("cache-control: no-cache"), "{head}");
    // The policy every page also states in its <meta> element.
    let policy = kvw_explorer::csp::policy().to_lowercase();
    assert!(
        head.contains(&format!("content-security-policy: {policy}\r\n")),
        "{head}"
    );
    let (head, body) = get(port, "/healthz", &[]);
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert_eq!(body, b"ok\n");
}

#[test]
fn a_file_changed_after_its_twin_is_served_as_it_is() {
    let site = tempfile::tempdir().unwrap();
    std::fs::write(site.path().join("index.html"), "<p>hi</p>").unwrap();
    let file = site.path().join("receipt.json");
    std::fs::write(&file, "{\"leak\":true}").unwrap();
    let gz = Command::new("gzip").arg("-c").arg(&file).output().unwrap();
    assert!(gz.status.success());
    std::fs::write(site.path().join("receipt.json.gz"), &gz.stdout).unwrap();
    // A twin that is a link is never followed.
    std::fs::write(site.path().join("other.json"), "{\"other\":1}").unwrap();
    std::fs::write(site.path().join("elsewhere.gz"), &gz.stdout).unwrap();
    std::os::unix::fs::symlink(
        site.path().join("elsewhere.gz"),
        site.path().join("other.json.gz"),
    )
    .unwrap();
    let server = common::serve_dir(site.path(), 30);
    let port = server.port;

    // Up to date: the twin is answered.
    let (head, body) = get(port, "/receipt.json", &["Accept-Encoding: gzip"]);
    assert!(head.contains("content-encoding: gzip"), "{head}");
    assert_eq!(body, gz.stdout);
    // Edited after the build: the file itself, whatever the client accepts.
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(&file, "{\"leak\":false}").unwrap();
    let (head, body) = get(port, "/receipt.json", &["Accept-Encoding: gzip, br"]);
    assert!(!head.contains("content-encoding"), "{head}");
    assert_eq!(body, b"{\"leak\":false}");
    let (head, body) = get(port, "/other.json", &["Accept-Encoding: gzip"]);
    assert!(!head.contains("content-encoding"), "{head}");
    assert_eq!(body, b"{\"other\":1}");
}
