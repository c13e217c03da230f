//! `kvw audit --out DIR` against `kvw serve --openai` on 127.0.0.1 writes a
//! signed audit bundle: `kvw verify DIR` accepts it, a second audit into
//! the same folder is refused before any request, and `kvw site build`
//! renders it as a report page (English at the site's root and under en/,
//! Italian under it/) whose findings rows name every gate, link its page
//! and say what to do, with neither tenant's key in any file of the site.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

use common::{KEYS, KVW};

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `<tr class="rp-finding" ...>` row of `gate` in `html`.
fn row<'a>(html: &'a str, gate: &str) -> &'a str {
    let at = html
        .find(&format!("data-gate=\"{gate}\""))
        .unwrap_or_else(|| panic!("no findings row for {gate}"));
    let start = html[..at].rfind("<tr").unwrap();
    let end = html[start..].find("</tr>").unwrap() + start;
    let row = &html[start..end];
    assert!(row.contains("rp-finding"), "{row}");
    row
}

#[test]
fn an_audit_bundle_verifies_and_renders_as_a_report_without_any_key() {
    let (work, signer, key) = common::signing_key();
    let public = work.path().join("trusted.pub.json");
    signer.public().save(&public).unwrap();
    let bundle = work.path().join("audit");

    // The pre-fix cluster with a cache shared across keys: findings to report.
    let server = common::serve_openai("none", "shared");
    let audit = |out: &Path| {
        common::audit_command(&server.url(), &KEYS)
            .args(["--json", "--pairs", "16", "--max-seconds", "120"])
            .arg("--out")
            .arg(out)
            .arg("--signing-key")
            .arg(&key)
            .output()
            .unwrap()
    };
    let o = audit(&bundle);
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(
        o.status.code(),
        Some(1),
        "{stdout} {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let gates: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v.get("gate").is_some())
        .collect();
    assert_eq!(gates.len(), kvw_evidence::audit::GATES.len());
    assert!(stdout.contains("\"bundle\""), "{stdout}");
    let result = |name: &str| {
        gates.iter().find(|g| g["gate"] == name).unwrap()["result"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(result("isolation"), "fail");
    assert_eq!(result("prefix-cache"), "fail");

    // The bundle rules of `kvw verify`, against the key we trust.
    for f in [
        "index.json",
        "manifest.json",
        "SHA256SUMS",
        "README.md",
        "kvw.pub.json",
    ] {
        assert!(bundle.join(f).is_file(), "no {f}");
    }
    let v = Command::new(KVW)
        .arg("verify")
        .arg(&bundle)
        .arg("--key")
        .arg(&public)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&v.stdout);
    assert!(v.status.success(), "kvw verify refused the bundle: {said}");
    assert!(said.contains("OK: 7 of 7 receipts ok"), "{said}");
    assert!(said.contains("receipts/isolation.receipt.json"), "{said}");

    // A second audit into the non-empty folder is refused before any request.
    let before = read(&bundle.join("SHA256SUMS"));
    let again = audit(&bundle);
    let err = String::from_utf8_lossy(&again.stderr);
    assert_eq!(again.status.code(), Some(2), "{err}");
    assert!(err.contains("already exists"), "{err}");
    assert!(
        again.stdout.is_empty(),
        "it sent nothing, so printed no plan"
    );
    assert_eq!(read(&bundle.join("SHA256SUMS")), before);
    drop(server);

    // The report.
    let site = work.path().join("site");
    let b = Command::new(KVW)
        .args(["site", "build", "--no-wasm", "--bundle"])
        .arg(&bundle)
        .arg("--out")
        .arg(&site)
        .output()
        .unwrap();
    assert!(
        b.status.success(),
        "kvw site build refused the audit bundle: {}",
        String::from_utf8_lossy(&b.stderr)
    );
    let index = read(&site.join("index.html"));
    assert!(index.contains("data-report=\"audit\""), "{index}");
    // Findings first: the table comes before the receipts' banners and the
    // quoted exchanges.
    let table = index.find("rp-findings").unwrap();
    assert!(table < index.find("id=\"kvw-trust-").unwrap());
    assert!(table < index.find("rp-details").unwrap());
    for g in &gates {
        let gate = g["gate"].as_str().unwrap();
        let r = row(&index, gate);
        assert!(
            r.contains(&format!(
                "data-result=\"{}\"",
                g["result"].as_str().unwrap()
            )),
            "{r}"
        );
        let page = format!("en/{gate}.receipt.html");
        assert!(r.contains(&format!("href=\"{page}\"")), "{r}");
        assert!(site.join(&page).is_file(), "no {page}");
        assert!(r.contains(&format!("href=\"#gate-{gate}\"")), "{r}");
        assert!(index.contains(&format!("id=\"gate-{gate}\"")), "{gate}");
        // The receipt's own reason is the evidence column (compared up to
        // the first character HTML escapes).
        let reason: String = g["reason"]
            .as_str()
            .unwrap()
            .chars()
            .take_while(|c| !"&<>\"'".contains(*c))
            .collect();
        assert!(r.contains(&reason), "{r}\n{reason}");
        // The browser checks each receipt the report shows.
        assert!(index.contains(&format!("id=\"kvw-trust-{gate}.receipt\"")));
    }
    assert!(row(&index, "prefix-cache").contains("cache_salt"));
    assert!(row(&index, "isolation").contains("#36988"));
    // Fails come first.
    assert!(
        index.find("data-gate=\"isolation\"").unwrap()
            < index.find("data-gate=\"version\"").unwrap()
    );
    assert!(
        index.contains("id=\"kvw-results\""),
        "the browser's check is on the page"
    );
    assert!(index.contains("href=\"./it/report.html\""));
    assert_eq!(
        read(&site.join("en/report.html"))
            .matches("rp-finding\"")
            .count(),
        7
    );

    let it = read(&site.join("it/report.html"));
    assert!(it.contains("<html lang=\"it\""));
    for words in ["Rapporto di audit", "Che cosa fare", "Risultati", "fallito"] {
        assert!(it.contains(words), "{words}");
    }
    assert!(row(&it, "prefix-cache").contains("sale di cache per tenant"));
    assert!(row(&it, "isolation").contains("href=\"isolation.receipt.html\""));
    assert!(site.join("it/isolation.receipt.html").is_file());
    assert!(it.contains("href=\"../en/report.html\""));

    // No tenant's key anywhere: not in the bundle, not in any file of the site.
    for f in files(&site).iter().chain(files(&bundle).iter()) {
        let bytes = std::fs::read(f).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        for k in KEYS {
            assert!(!text.contains(k), "key {k} appears in {}", f.display());
        }
    }
    // The exchanges are quoted, with the keys' labels where they were.
    assert!(index.contains("au-exchange"), "{index}");
}
