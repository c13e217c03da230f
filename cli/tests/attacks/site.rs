//! Attacks on `kvw site build`: the layout rules of verify before anything
//! is read or written, names and markup, name binding, bundle-level lies,
//! output folders and `--source-base`; then receipts that verify but would
//! harm the site: a receipt named after a page of the site, a `javascript:`
//! address in a signed scenario, a receipt too large to draw in full, and an
//! audit receipt, which gets its page. Every refusal writes nothing.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use kvw_evidence::audit::{AuditPredicate, GateResult};
use kvw_evidence::bundle::OtherEntry;
use kvw_evidence::receipt::{sign_statement, verify_statement, PredicateKind};
use kvw_evidence::scenario::{events_sha256, EventPages, ScenarioPredicate};
use kvw_evidence::{Envelope, PageRun, WriterClass};
use serde_json::json;

use kvw_testkit::hostile;

use crate::harness::*;

fn build(w: &Work) -> Vec<OsString> {
    build_with(w, ["--no-wasm".into()])
}

/// `kvw site build` of the work bundle into `site/`, with `extra` flags.
pub fn build_with(w: &Work, extra: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut a = args([
        OsString::from("site"),
        "build".into(),
        "--bundle".into(),
        w.bundle.clone().into(),
        "--out".into(),
        w.at("site").into(),
    ]);
    a.extend(extra);
    a
}

/// `kvw site build` after `setup`: refused, `site/` never created.
fn s(name: &str, needle: &'static str, setup: impl Fn(&Work) + Send + Sync + 'static) -> Case {
    case(&format!("site-{name}"), move |w| {
        setup(w);
        let mut cmd = Cmd::new(build(w), refused(1, needle));
        cmd.must_not_exist = Some(w.at("site"));
        cmd
    })
}

/// Same, with extra arguments and no must-not-exist check (the output may
/// exist before, and must be left as it was).
fn sx(
    name: &str,
    needle: &'static str,
    setup: impl Fn(&Work) -> Vec<OsString> + Send + Sync + 'static,
) -> Case {
    case(&format!("site-{name}"), move |w| {
        let extra = setup(w);
        let mut a = build(w);
        a.extend(extra);
        Cmd::new(a, refused(1, needle))
    })
}

fn source_base(base: &'static str) -> impl Fn(&Work) -> Vec<OsString> + Send + Sync {
    move |_| args(["--source-base", base])
}

pub fn cases() -> Vec<Case> {
    // The hostile bundles verify refuses too, from the testkit's one list.
    let mut c: Vec<Case> = hostile::bundles()
        .into_iter()
        .map(|h| s(h.name, h.needle, h.setup))
        .collect();
    c.push(s("sums-links-to-secret", "symbolic link", |w| {
        w.symlink("SHA256SUMS", &w.at("outside/shadow"));
    }));
    c.push(sx("bundle-path-is-a-link", "symbolic link", |w| {
        std::fs::rename(&w.bundle, w.at("real")).unwrap();
        std::os::unix::fs::symlink(w.at("real"), &w.bundle).unwrap();
        vec![]
    }));
    c.push(s("readme-is-a-fifo", "FIFO", |w| w.fifo("README.md")));
    c.push(sx("bundle-path-is-a-fifo", "FIFO", |w| {
        std::fs::remove_dir_all(&w.bundle).unwrap();
        mkfifo(&w.bundle);
        vec![]
    }));
    c.push(s("empty-folder-in-bundle", "unexpected folder", |w| {
        std::fs::create_dir(w.p("receipts/empty")).unwrap();
    }));
    c.push(s("dotfile-in-bundle", "not listed", |w| {
        w.write(".htaccess", "x")
    }));
    c.push(s("oversized-public-key", "limit", |w| {
        w.write("kvw.pub.json", vec![b' '; 17 * 1024 * 1024]);
        w.reseal_sums();
    }));
    c.push(s(
        "markup-in-receipt-name-copied",
        "may hold only letters",
        |w| {
            std::fs::copy(
                w.p(LEAK),
                w.p("receipts/a\"><img src=x onerror=alert(1)>.json"),
            )
            .unwrap();
            w.reseal_sums();
        },
    ));
    c.push(s("script-in-receipt-name", "may hold only letters", |w| {
        std::fs::copy(w.p(LEAK), w.p("receipts/<script>alert(1)<!--.json")).unwrap();
        w.reseal_sums();
    }));
    c.push(s("ansi-escape-in-receipt-name", "control character", |w| {
        std::fs::copy(w.p(LEAK), w.p("receipts/\u{1b}[31mred.json")).unwrap();
        w.reseal_sums();
    }));
    c.push(s("tampered-receipt-resealed", "signed manifest", |w| {
        let mut bytes = w.read(LEAK);
        let n = bytes.len() / 2;
        bytes[n] ^= 1;
        w.write(LEAK, bytes);
        w.reseal_sums();
    }));
    c.push(s(
        "readme-says-no-leak",
        "README.md does not state what index.json says",
        |w| {
            w.write("README.md", "# No leak\n");
            w.reseal_sums();
        },
    ));
    c.push(s("manifest-missing", "no manifest.json", |w| {
        w.remove("manifest.json");
        w.reseal_sums();
    }));
    c.push(s("index-lies-about-verdict", "differs in: verdict", |w| {
        w.edit_index(|i| i["receipts"][0]["verdict"]["http_status"] = json!(299));
        w.reseal_keep_index();
    }));
    c.push(sx(
        "out-is-an-unrelated-folder",
        "not a kvwitness site",
        |w| {
            std::fs::create_dir(w.at("site")).unwrap();
            std::fs::write(w.at("site/thesis.tex"), b"years of work").unwrap();
            vec![]
        },
    ));
    c.push(sx("out-is-home-like-folder", "not a kvwitness site", |w| {
        std::fs::create_dir_all(w.at("site/.ssh")).unwrap();
        std::fs::write(w.at("site/index.html"), b"mine").unwrap();
        vec![]
    }));
    c.push(sx("out-is-a-file", "not a folder", |w| {
        std::fs::write(w.at("site"), b"a file").unwrap();
        vec![]
    }));
    c.push(sx("out-is-a-link", "not a folder", |w| {
        std::os::unix::fs::symlink(w.at("outside"), w.at("site")).unwrap();
        vec![]
    }));
    c.push(sx(
        "source-base-javascript",
        "not a plain http(s) URL",
        source_base("javascript:alert(1)//"),
    ));
    c.push(sx(
        "source-base-data-url",
        "not a plain http(s) URL",
        source_base("data:text/html,<script>alert(1)</script>"),
    ));
    c.push(sx(
        "source-base-attribute-break",
        "not a plain http(s) URL",
        source_base("https://x.example/\" onmouseover=\"alert(1)"),
    ));
    c.push(sx(
        "source-base-vbscript",
        "not a plain http(s) URL",
        source_base("vbscript:msgbox"),
    ));
    c.push(sx(
        "source-base-relative",
        "not a plain http(s) URL",
        source_base("//evil.example"),
    ));
    c.push(sx(
        "source-base-empty",
        "not a plain http(s) URL",
        source_base(""),
    ));
    c.push(sx(
        "source-base-control-char",
        "not a plain http(s) URL",
        source_base("https://x\u{1b}[2J"),
    ));
    c.extend(hostile_receipts());
    c
}

/// A published scenario receipt with an upstream test, as the attacker
/// starts from it.
const SCENARIO: &str = "scenario-test_aborted_final_result_releases_hybrid_cache-fixes-none.json";

/// The predicate of the published scenario receipt [`SCENARIO`].
fn published_scenario() -> ScenarioPredicate {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../evidence/bundles/incident/receipts")
        .join(SCENARIO);
    let payload = Envelope::from_json(&std::fs::read(path).unwrap())
        .unwrap()
        .payload_bytes()
        .unwrap();
    let statement: serde_json::Value = serde_json::from_slice(&payload).unwrap();
    serde_json::from_value(statement["predicate"].clone()).unwrap()
}

/// Add `predicate` to the bundle as `receipts/<name>`, signed with the
/// bundle key, listed in the index's `others`, manifest and sums resealed:
/// a receipt `kvw verify` accepts.
fn add_other<P: PredicateKind>(w: &Work, name: &str, predicate: &P) {
    let rel = format!("receipts/{name}");
    let envelope = sign_statement(name, predicate, &attacker()).unwrap();
    w.write(&rel, envelope.to_json_pretty());
    let statement = verify_statement(&w.read(&rel), &attacker().public()).unwrap();
    let entry = OtherEntry::for_statement(&rel, &statement).unwrap();
    w.edit_index(|i| {
        let others = i
            .as_object_mut()
            .unwrap()
            .entry("others")
            .or_insert_with(|| json!([]));
        others
            .as_array_mut()
            .unwrap()
            .push(serde_json::to_value(entry).unwrap());
    });
    w.reseal_keep_index();
}

/// The leak receipt signed again under `name` and added beside it.
fn probe_named(w: &Work, name: &str) {
    let rel = format!("receipts/{name}");
    std::fs::copy(w.p(LEAK), w.p(&rel)).unwrap();
    w.forge_predicate(&rel, name, |_| {});
    w.reseal_all();
}

/// A scenario whose signed upstream address is script.
pub fn javascript_upstream(w: &Work) {
    let mut p = published_scenario();
    let upstream = p.scenario.upstream.as_mut().expect("an upstream test");
    upstream.url = "javascript:alert(document.domain)".into();
    add_other(w, "scenario-hostile-link.json", &p);
}

/// A 1.5 MB scenario receipt: 4,000 events, each with a picture of a
/// 1,024-page pool.
pub fn huge_scenario(w: &Work) {
    let mut p = published_scenario();
    let event = p.events[0].clone();
    let mut view = p.pages[0].view.clone();
    view.pages_total = 1024;
    view.runs = vec![PageRun {
        first: 0,
        count: 1024,
        class: WriterClass::NeverWritten,
        writer: None,
    }];
    view.reserved.clear();
    view.transferred.clear();
    view.read.clear();
    p.events = vec![event; 4000];
    p.pages = (0..4000)
        .map(|i| EventPages {
            event: i,
            view: view.clone(),
        })
        .collect();
    p.trace_sha256 = events_sha256(&p.events);
    add_other(w, "scenario-huge.json", &p);
}

/// A genuine-looking audit receipt: the isolation gate failed, one canary
/// leaked.
pub fn audit_receipt(w: &Work) {
    let p = AuditPredicate {
        gate: "isolation".into(),
        result: GateResult::Fail,
        endpoint: "http://127.0.0.1:9/v1".into(),
        auditor_version: "0.1.0".into(),
        reason: "t1 read t0's canary".into(),
        evidence: json!({ "leaks": ["CANARY-t0-1"] }),
        exchanges: vec![],
        prompts: vec![],
    };
    add_other(w, "audit-isolation.json", &p);
}

/// `kvw site build` into `site/`: exit 0 and `needle` on stdout.
fn built(name: &str, needle: &'static str, setup: impl Fn(&Work) + Send + Sync + 'static) -> Case {
    case(&format!("site-{name}"), move |w| {
        setup(w);
        Cmd::new(build(w), Expect::Harmless { needle })
    })
}

/// Receipts that verify and would harm the site, or be lost from it.
fn hostile_receipts() -> Vec<Case> {
    let taken = "taken by the site's own page";
    vec![
        s("receipt-named-gates", taken, |w| {
            probe_named(w, "gates.json")
        }),
        s("receipt-named-receipts", taken, |w| {
            probe_named(w, "receipts.json")
        }),
        s("receipt-named-compare", taken, |w| {
            probe_named(w, "compare.json")
        }),
        s("receipt-named-like-a-compare-page", taken, |w| {
            probe_named(w, "compare-incident-walkthrough-fixes-kv-checksum.json")
        }),
        built(
            "scenario-upstream-javascript",
            "is not a plain http(s) URL; shown as text",
            javascript_upstream,
        ),
        built(
            "scenario-4000-events-1024-page-pictures",
            "4000 steps, of which the first 200 are drawn",
            huge_scenario,
        ),
        built("audit-receipt-gets-a-page", "1 × audit", audit_receipt),
    ]
}

/// A site built from a genuine bundle carries nothing from outside it and
/// no unescaped markup; checked by the caller after a successful build.
pub fn genuine_build(w: &Work) -> Vec<OsString> {
    build(w)
}

/// Every file under `dir`.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out
}

/// The pages of a site built from the hostile receipts that verify: no
/// `javascript:` link anywhere, the huge scenario drawn within the limits
/// with the note saying so, the audit receipt on its own page in each
/// language and nowhere "not verified".
#[test]
fn site_build_of_receipts_that_verify_but_would_harm_the_site() {
    let w = work();
    javascript_upstream(&w);
    huge_scenario(&w);
    audit_receipt(&w);
    let ran = run_kvw(&build(&w), Sink::Pipe, &[]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(!ran.stderr.contains("NOT VERIFIED"), "{}", ran.stderr);
    let site = w.at("site");
    let mut html_bytes = 0;
    for path in files(&site) {
        if path.extension().is_none_or(|e| e != "html") {
            continue;
        }
        let html = std::fs::read_to_string(&path).unwrap();
        html_bytes += html.len();
        let lower = html.to_ascii_lowercase();
        assert!(
            !lower.contains("href=\"javascript:"),
            "{} links script",
            path.display()
        );
        assert!(
            lower.contains("<meta http-equiv=\"content-security-policy\""),
            "{} has no policy",
            path.display()
        );
    }
    for lang in ["en", "it"] {
        let hostile =
            std::fs::read_to_string(site.join(lang).join("scenario-hostile-link.html")).unwrap();
        assert!(hostile
            .contains("<code class=\"sc-unlinked\">javascript:alert(document.domain)</code>"));
        let huge = std::fs::read_to_string(site.join(lang).join("scenario-huge.html")).unwrap();
        assert!(huge.contains("class=\"kvw-limit\""), "{lang}: no note");
        assert_eq!(huge.matches("class=\"sc-step\"").count(), 200, "{lang}");
        let audit = std::fs::read_to_string(site.join(lang).join("audit-isolation.html")).unwrap();
        assert!(audit.contains("data-result=\"fail\"") && audit.contains("CANARY-t0-1"));
    }
    assert!(site.join("receipts/audit-isolation.json").is_file());
    // 601 MB before the limits; a bound, not a measurement.
    assert!(html_bytes < 64 * 1024 * 1024, "{html_bytes} bytes of HTML");
}
