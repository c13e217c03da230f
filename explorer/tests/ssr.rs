//! The static pages alone must tell the whole story: every step, the
//! request's state at each door and the response are in the HTML that the
//! site builder writes, with no script involved. A tampered receipt must not
//! be replayed, and an incident-scale pool must not become 10⁴ elements.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

mod support;

use base64::Engine as _;
use kvw_evidence::receipt::verify_receipt;
use kvw_evidence::signing::PublicKey;
use kvw_explorer::sample::write_sample_bundle;
use kvw_explorer::site::{build_site, SiteOptions};
use kvw_words::probe;

/// Text as Leptos escapes it in HTML.
fn escaped(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn build(bundle: &Path, out: &Path) -> kvw_explorer::site::SiteReport {
    let mut opts = SiteOptions::new(bundle, out);
    opts.wasm_dir = None;
    build_site(&opts).expect("site builds")
}

/// The sample bundle and its site without a browser build, as the tests
/// that only read them share it.
struct SampleSite {
    bundle: PathBuf,
    out: PathBuf,
    report: kvw_explorer::site::SiteReport,
}

/// Built once per test binary, on first use, into this binary's temporary
/// folder under the target directory (replaced by the next run).
fn sample_site() -> &'static SampleSite {
    static SITE: LazyLock<SampleSite> = LazyLock::new(|| {
        let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("explorer-ssr");
        if root.exists() {
            fs::remove_dir_all(&root).unwrap();
        }
        fs::create_dir_all(&root).unwrap();
        let (bundle, out) = (root.join("bundle"), root.join("site"));
        write_sample_bundle(&bundle).unwrap();
        let report = build(&bundle, &out);
        SampleSite {
            bundle,
            out,
            report,
        }
    });
    &SITE
}

#[test]
fn every_step_state_and_response_is_in_the_static_html() {
    let SampleSite {
        bundle,
        out,
        report,
    } = sample_site();
    assert!(report.notes.is_empty(), "{:?}", report.notes);
    let key = PublicKey::load(bundle.join("kvw.pub.json")).unwrap();

    for stem in &report.verified {
        let envelope = fs::read(bundle.join("receipts").join(format!("{stem}.json"))).unwrap();
        let predicate = verify_receipt(&envelope, &key).unwrap().predicate;
        let html = fs::read_to_string(out.join("en").join(format!("{stem}.html"))).unwrap();
        assert!(
            !html.contains("kvw_explorer.js"),
            "no wasm was given, so no script"
        );
        assert_eq!(predicate.steps.len(), 7);
        // The tab names what the page is, then the run and its outcome.
        assert!(
            html.contains("<title>SGLang PD KV-cache leak, signed replay: "),
            "{stem}: title"
        );
        // The page holds `text` (escaped), or the assertion names `what`.
        let has = |text: &str, what: &str, step: u8| {
            assert!(
                html.contains(&escaped(text)),
                "{stem}: {what} of step {step}"
            )
        };
        for step in &predicate.steps {
            assert!(
                html.contains(&format!("id=\"step-{}\"", step.step)),
                "{stem}: step {} missing",
                step.step
            );
            has(
                probe::step_name(step.step, probe::Lang::En),
                "name",
                step.step,
            );
            for sentence in probe::step_sentences(step, probe::Lang::En) {
                has(&sentence, "a sentence", step.step);
            }
            if let Some(state) = &step.state {
                has(probe::door_name(state.door), "door", step.step);
                has(
                    probe::decision(state.decision, probe::Lang::En),
                    "decision",
                    step.step,
                );
                if let Some(to_finish) = &state.to_finish {
                    has(&probe::finish_reason(to_finish), "to_finish", step.step);
                }
                let lengths = format!("{} → {}", state.original_prompt_len, state.origin_input_len);
                has(&lengths, "prompt lengths", step.step);
            }
        }
        let verdict = &predicate.verdict;
        assert!(html.contains(&format!("HTTP {}", verdict.http_status)));
        assert!(html.contains(&escaped(&probe::outcome_line(&predicate, probe::Lang::En))));
        for canary in &verdict.canaries_leaked {
            assert!(
                html.contains(&format!(
                    "<mark class=\"canary\">{}</mark>",
                    escaped(canary)
                )),
                "{stem}: canary {canary} not marked"
            );
            for plain in verdict
                .response_text
                .split(canary.as_str())
                .filter(|p| !p.is_empty())
            {
                assert!(
                    html.contains(&escaped(plain)),
                    "{stem}: response text missing"
                );
            }
        }
        if verdict.canaries_leaked.is_empty() {
            assert!(
                html.contains(&escaped(&verdict.response_text)),
                "{stem}: response text missing"
            );
        }
        // Italian page: same receipt, Italian interface and narrative.
        let it = fs::read_to_string(out.join("it").join(format!("{stem}.html"))).unwrap();
        assert!(
            it.contains("<html lang=\"it\"")
                && it.contains("Passo 2/7")
                && it.contains("finished_reason")
        );
    }
    assert!(out.join("index.html").is_file());
    assert!(out.join("kvw.pub.json").is_file());
}

#[test]
fn incident_scale_pools_are_drawn_as_runs_not_cells() {
    let out = &sample_site().out;
    let html = fs::read_to_string(out.join("en/incident-incident-none.html")).unwrap();
    assert!(html.contains("class=\"bars\""));
    let cells = html.matches("class=\"pg ").count();
    assert!(cells < 100, "{cells} page cells drawn at incident scale");
}

#[test]
fn a_tampered_bundle_is_refused_and_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let (bundle, out) = (tmp.path().join("bundle"), tmp.path().join("site"));
    write_sample_bundle(&bundle).unwrap();
    let path = bundle.join("receipts/incident-walkthrough-none.json");
    let mut envelope: serde_json::Value =
        serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD;
    let payload =
        String::from_utf8(b64.decode(envelope["payload"].as_str().unwrap()).unwrap()).unwrap();
    let forged = payload.replacen("\"http_status\":200", "\"http_status\":400", 1);
    assert_ne!(payload, forged, "the sample leaks with HTTP 200");
    envelope["payload"] = b64.encode(forged).into();
    fs::write(&path, serde_json::to_vec_pretty(&envelope).unwrap()).unwrap();

    let mut opts = SiteOptions::new(&bundle, &out);
    opts.wasm_dir = None;
    let err = build_site(&opts).expect_err("a tampered bundle is refused");
    assert!(err.to_string().contains("sha256 mismatch"), "{err}");
    assert!(!out.exists(), "nothing is written on refusal");
    let names: Vec<_> = fs::read_dir(tmp.path()).unwrap().collect();
    assert_eq!(names.len(), 1, "no temporary folder left behind");
}

#[test]
fn a_receipt_under_another_name_is_not_shown_as_verified() {
    // The browser's check: a genuine receipt fetched as another file.
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("bundle");
    write_sample_bundle(&bundle).unwrap();
    let envelope =
        fs::read_to_string(bundle.join("receipts/incident-walkthrough-none.json")).unwrap();
    let key = fs::read_to_string(bundle.join("kvw.pub.json")).unwrap();
    let shown = kvw_explorer::trust::check("incident-walkthrough-none", &envelope, &key);
    assert!(shown.predicate().is_some());
    let other = kvw_explorer::trust::check("incident-walkthrough-kv-checksum", &envelope, &key);
    assert!(other.predicate().is_none(), "{other:?}");
    let hostile = kvw_explorer::trust::check("a\"><img src=x>", &envelope, &key);
    assert!(hostile.predicate().is_none(), "{hostile:?}");
}

#[test]
fn compare_pages_mark_the_first_divergent_step() {
    let SampleSite { bundle, out, .. } = sample_site();
    let key = PublicKey::load(bundle.join("kvw.pub.json")).unwrap();
    let predicate = |stem: &str| {
        let bytes = fs::read(bundle.join("receipts").join(format!("{stem}.json"))).unwrap();
        verify_receipt(&bytes, &key).unwrap().predicate
    };
    let (base, fixed) = (
        "incident-walkthrough-none",
        "incident-walkthrough-retire-unadmitted-reject",
    );
    let first = kvw_explorer::diverge::first_divergence(&predicate(base), &predicate(fixed))
        .expect("the fix changes something");
    let html = fs::read_to_string(out.join(format!("en/compare-{fixed}.html"))).unwrap();
    assert!(
        html.contains(&format!("The runs first differ at step {first}")),
        "banner"
    );
    assert!(
        html.contains(&format!("id=\"cmp-step-{first}\" class=\"diverge first\"")),
        "row highlighted"
    );
    assert_eq!(html.matches("diverge first").count(), 1);
    let page = fs::read_to_string(out.join(format!("en/{fixed}.html"))).unwrap();
    assert!(
        page.contains(&format!("compare-{fixed}.html")),
        "the replay links to its comparison"
    );
}

#[test]
fn compare_pages_overlay_both_runs_coverage_and_the_picker_opens_on_runs_that_differ() {
    let SampleSite { bundle, out, .. } = sample_site();
    let key = PublicKey::load(bundle.join("kvw.pub.json")).unwrap();
    // What decode attention read, straight from the receipt's typed facts.
    let read = |stem: &str| {
        let bytes = fs::read(bundle.join("receipts").join(format!("{stem}.json"))).unwrap();
        let p = verify_receipt(&bytes, &key).unwrap().predicate;
        p.steps
            .iter()
            .flat_map(|s| &s.facts)
            .filter_map(|f| match f.claim {
                kvw_evidence::Claim::Attended {
                    positions,
                    foreign_pages,
                    ..
                } => Some((positions, foreign_pages * u64::from(p.config.page_size))),
                _ => None,
            })
            .next_back()
    };
    let (base, fixed) = (
        "incident-walkthrough-none",
        "incident-walkthrough-retire-unadmitted-reject",
    );
    let html = fs::read_to_string(out.join(format!("en/compare-{fixed}.html"))).unwrap();
    let overlay = html
        .split("id=\"kvw-overlay\"")
        .nth(1)
        .and_then(|rest| rest.split("</figure>").next())
        .expect("the compare page overlays the two runs");
    let (positions, foreign) = read(base).expect("the leaking run reads");
    assert!(foreign > 0, "the leaking run reads another tenant's pages");
    let b = read(fixed).map_or("0".to_string(), |(n, _)| n.to_string());
    assert!(
        overlay.contains(&format!(
            "A {positions} ({} another tenant&#x27;s) · B {b}",
            foreign.min(positions)
        )) || overlay.contains(&format!(
            "A {positions} ({} another tenant's) · B {b}",
            foreign.min(positions)
        )),
        "decode's reads of both runs on one axis: {overlay}"
    );
    assert_eq!(
        overlay.matches("class=\"rb-bar\"").count(),
        8,
        "two bars per figure"
    );
    assert!(
        overlay.contains("rb-foreign"),
        "the foreign reads are hatched"
    );

    // The picker's own page opens on the run without fixes against one whose
    // answer differs. A static page's picker lists the two runs it shows,
    // grouped (the browser lists them all, from catalog.json).
    let picker = fs::read_to_string(out.join("en/compare.html")).unwrap();
    assert!(
        picker.contains("<optgroup label=\"walkthrough · no fix\">"),
        "grouped"
    );
    assert_eq!(
        picker.matches("<option ").count(),
        4,
        "two runs in each select"
    );
    let pair = picker
        .split("id=\"kvw-compare\"")
        .nth(1)
        .and_then(|rest| rest.split("</script>").next())
        .unwrap();
    assert!(pair.contains(&format!("\"left\":\"{base}\"")), "{pair}");
    assert!(!pair.contains(&format!("\"right\":\"{base}\"")), "{pair}");
    // The two runs of the default pair answer differently, by the catalog.
    let catalog: serde_json::Value =
        serde_json::from_slice(&fs::read(out.join("catalog.json")).unwrap()).unwrap();
    let pair: serde_json::Value = serde_json::from_str(pair.trim_start_matches('>')).unwrap();
    let answer = |side: &str| {
        let stem = pair[side].as_str().unwrap();
        let entries = catalog
            .as_array()
            .or_else(|| catalog["entries"].as_array())
            .unwrap();
        let e = entries.iter().find(|e| e["stem"] == stem).unwrap();
        (e["http_status"].clone(), e["leak"].clone())
    };
    assert_ne!(
        answer("left"),
        answer("right"),
        "the default pair differs in its answer"
    );
    assert!(
        picker.contains("first divergence"),
        "and the page marks where"
    );
}

#[test]
fn pages_embed_the_receipt_digest_not_the_receipt_and_share_one_catalog() {
    let SampleSite {
        bundle,
        out,
        report,
    } = sample_site();
    let sums = fs::read_to_string(bundle.join("SHA256SUMS")).unwrap();
    let catalog = fs::read(out.join("catalog.json")).unwrap();
    let catalog_sha = kvw_evidence::canonical::sha256_hex(&catalog);
    for stem in &report.verified {
        let html = fs::read_to_string(out.join("en").join(format!("{stem}.html"))).unwrap();
        let json = html
            .split("id=\"kvw-page\">")
            .nth(1)
            .and_then(|t| t.split("</script>").next())
            .unwrap();
        let data: kvw_explorer::PageData = serde_json::from_str(json).unwrap();
        // The digest the browser checks the fetched file against is the
        // bundle's own SHA256SUMS line for that file.
        let line = format!("{}  receipts/{stem}.json", data.receipt_sha256);
        assert!(sums.lines().any(|l| l == line), "{stem}: {line}");
        assert_eq!(data.catalog_sha256, catalog_sha);
        assert!(
            !json.contains("\"payload\""),
            "{stem}: the envelope is fetched, not embedded"
        );
        assert!(
            !json.contains("\"catalog\""),
            "{stem}: the catalog is fetched, not embedded"
        );
        let copy = fs::read(out.join("receipts").join(format!("{stem}.json"))).unwrap();
        assert_eq!(
            kvw_evidence::canonical::sha256_hex(&copy),
            data.receipt_sha256
        );
    }
    // Every text file has smaller gzip and brotli copies next to it.
    for name in ["index.html", "catalog.json", "style.css", "embed.js"] {
        let raw = fs::metadata(out.join(name)).unwrap().len();
        for ext in ["gz", "br"] {
            let packed = fs::metadata(out.join(format!("{name}.{ext}")))
                .unwrap()
                .len();
            assert!(packed < raw, "{name}.{ext}: {packed} ≥ {raw}");
        }
    }
    assert!(report.compressed.files > 0 && report.compressed.brotli < report.compressed.raw);
}

/// Each language's pages load that language's browser build (pkg/ for
/// English, pkg/it/ for Italian); a wasm folder missing one is refused.
#[test]
fn each_language_loads_its_own_browser_build() {
    use kvw_explorer::site::{SiteError, WASM_BIN, WASM_JS};
    let tmp = tempfile::tempdir().unwrap();
    let (bundle, wasm) = (tmp.path().join("bundle"), tmp.path().join("pkg"));
    write_sample_bundle(&bundle).unwrap();
    // The builder copies the build as it is; these bytes only mark which is which.
    fs::create_dir_all(wasm.join("it")).unwrap();
    for (dir, mark) in [(wasm.clone(), "en"), (wasm.join("it"), "it")] {
        fs::write(dir.join(WASM_JS), format!("// {mark}")).unwrap();
        fs::write(dir.join(WASM_BIN), mark).unwrap();
    }
    let out = tmp.path().join("site");
    let mut opts = SiteOptions::new(&bundle, &out);
    opts.wasm_dir = Some(wasm.clone());
    let report = build_site(&opts).expect("site builds");
    assert!(report.wasm);
    let stem = &report.verified[0];
    let page =
        |lang: &str| fs::read_to_string(out.join(lang).join(format!("{stem}.html"))).unwrap();
    assert!(page("en").contains("from \"../pkg/kvw_explorer.js\""));
    assert!(page("en").contains("\"../pkg/kvw_explorer_bg.wasm\""));
    assert!(page("it").contains("from \"../pkg/it/kvw_explorer.js\""));
    assert!(page("it").contains("\"../pkg/it/kvw_explorer_bg.wasm\""));
    assert_eq!(
        fs::read_to_string(out.join("pkg/it").join(WASM_BIN)).unwrap(),
        "it"
    );
    assert_eq!(
        fs::read_to_string(out.join("pkg").join(WASM_BIN)).unwrap(),
        "en"
    );

    fs::remove_file(wasm.join("it").join(WASM_BIN)).unwrap();
    let out = tmp.path().join("site2");
    let mut opts = SiteOptions::new(&bundle, &out);
    opts.wasm_dir = Some(wasm);
    let err = build_site(&opts).unwrap_err();
    assert!(matches!(err, SiteError::NoWasm(_)), "{err}");
    assert!(!out.exists(), "nothing written");
}

/// Every page of a site carries the Content-Security-Policy first in its
/// `<head>`, and every inline script and style of every page is one the
/// policy admits by hash: a site with every page kind (replays, index,
/// compare pages, receipts indexes, model check, randomized runs, audit,
/// embed example) and the browser build.
#[test]
fn every_page_carries_the_policy_and_admits_its_inline_code() {
    use kvw_evidence::bundle::write_bundle_with_others;
    use kvw_evidence::signing::Signer;
    use kvw_explorer::csp::{policy, source_hash};
    use kvw_explorer::sample::{sample_receipts, SAMPLE_SEED};
    use kvw_explorer::site::{WASM_BIN, WASM_JS};

    let tmp = tempfile::tempdir().unwrap();
    let (bundle, wasm, out) = (
        tmp.path().join("bundle"),
        tmp.path().join("pkg"),
        tmp.path().join("site"),
    );
    let signer = Signer::from_seed(&SAMPLE_SEED);
    let (name, envelope, _) = support::model_check_receipt(&[], "model-check-none-1", &signer);
    let audit = kvw_evidence::audit::AuditPredicate {
        gate: "status".into(),
        result: kvw_evidence::audit::GateResult::Pass,
        endpoint: "http://127.0.0.1:9/v1".into(),
        auditor_version: "0.1.0".into(),
        reason: "an over-long prompt was answered 400".into(),
        evidence: serde_json::json!({ "status": 400 }),
        exchanges: vec![],
        prompts: vec![],
    };
    let audit = (
        "audit-status.json".to_string(),
        kvw_evidence::receipt::sign_statement("audit-status.json", &audit, &signer).unwrap(),
    );
    let others = vec![(name, envelope), support::fuzz_receipt(&signer), audit];
    write_bundle_with_others(&bundle, sample_receipts(&signer).unwrap(), others, &signer).unwrap();
    fs::create_dir_all(wasm.join("it")).unwrap();
    for dir in [wasm.clone(), wasm.join("it")] {
        fs::write(dir.join(WASM_JS), "//").unwrap();
        fs::write(dir.join(WASM_BIN), "").unwrap();
    }
    let mut opts = SiteOptions::new(&bundle, &out);
    opts.wasm_dir = Some(wasm);
    let report = build_site(&opts).expect("site builds");
    assert!(report.kinds.contains(&("audit", 1)), "{:?}", report.kinds);

    let meta = format!(
        "<meta charset=\"utf-8\">\n<meta http-equiv=\"Content-Security-Policy\" content=\"{}\">",
        policy()
    );
    let mut pages = 0;
    let mut inline = 0;
    let mut stack = vec![out.clone()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "html") {
                continue;
            }
            let html = fs::read_to_string(&path).unwrap();
            pages += 1;
            let head_start = html.find("<head>").unwrap() + "<head>".len();
            assert!(
                html[head_start..].trim_start().starts_with(&meta),
                "{}: the policy does not open <head>",
                path.display()
            );
            for (tag, open) in [("script", "<script"), ("style", "<style")] {
                for (at, _) in html.match_indices(open) {
                    let rest = &html[at..];
                    let open_end = rest.find('>').unwrap();
                    let attrs = &rest[..open_end];
                    if attrs.contains(" src=") || attrs.contains("application/json") {
                        continue;
                    }
                    let close = rest.find(&format!("</{tag}>")).unwrap();
                    let body = &rest[open_end + 1..close];
                    inline += 1;
                    assert!(
                        policy().contains(&source_hash(body)),
                        "{}: an inline {tag} the policy does not admit: {}",
                        path.display(),
                        &body[..body.len().min(80)]
                    );
                }
            }
        }
    }
    assert_eq!(pages, report.pages + 1, "every page and the embed example");
    assert!(inline > pages, "{inline} inline scripts and styles");
    for lang in ["en", "it"] {
        let audit = fs::read_to_string(out.join(lang).join("audit-status.html")).unwrap();
        assert!(audit.contains("data-result=\"pass\""), "{lang}");
    }
}

/// The answer class the fix matrix must give a verified run, worked out
/// here from the receipt's verdict on its own.
fn expected_answer(v: &kvw_evidence::Verdict) -> &'static str {
    use kvw_evidence::Outcome;
    match v.outcome {
        Outcome::Leak => "a-leak",
        Outcome::WrongAnswer => "a-wrong",
        Outcome::Correct => "a-right",
        Outcome::Refused if v.latency_us >= 1_000_000 => "a-slow",
        Outcome::Refused if v.http_status < 500 => "a-right",
        Outcome::Refused => "a-error",
    }
}

#[test]
fn every_replay_page_opens_on_the_card_and_a_matrix_read_from_the_receipts() {
    let SampleSite {
        bundle,
        out,
        report,
    } = sample_site();
    let key = PublicKey::load(bundle.join("kvw.pub.json")).unwrap();
    for stem in &report.verified {
        let html = fs::read_to_string(out.join("en").join(format!("{stem}.html"))).unwrap();
        let body = &html[html.find("<body>").unwrap()..];
        let (intro, matrix, replay) = (
            body.find("id=\"kvw-intro\"").expect("card"),
            body.find("id=\"kvw-matrix\"").expect("matrix"),
            body.find("id=\"replay\"").expect("replay"),
        );
        assert!(
            intro < matrix && matrix < replay,
            "{stem}: card, matrix, replay"
        );
        let card = &body[intro..matrix];
        // A combination the matrix does not list gets the card in one
        // sentence, linked to the whole card and matrix.
        let short = card.contains("intro-short");
        for fact in ["Cloudflare Workers AI", "GLM-5.3", "155 responses"] {
            assert!(card.contains(fact), "{stem}: the card says {fact}");
        }
        assert!(short || card.contains("kvw verify"), "{stem}: how to check");
        assert_eq!(short, body.contains("id=\"kvw-whole-matrix\""), "{stem}");
        // Each row that names a run gives that run's own answer.
        let mut rows = 0;
        for row in body[matrix..replay].split("<tr data-stem=\"").skip(1) {
            let (run, rest) = row.split_once('"').unwrap();
            let envelope = fs::read(bundle.join("receipts").join(format!("{run}.json"))).unwrap();
            let verdict = verify_receipt(&envelope, &key).unwrap().predicate.verdict;
            let class = format!("answer {}", expected_answer(&verdict));
            assert!(
                rest[..rest.find("</tr>").unwrap()].contains(&class),
                "{stem}: the row of {run} should say {class}"
            );
            rows += 1;
        }
        assert!(rows >= if short { 1 } else { 2 }, "{stem}: {rows} rows");
        // Each pool's sentence names the side that reserved the pages, and
        // a drawn grid numbers the request's pages in page-table order.
        assert_eq!(
            body.matches("<figcaption>Prefill pool").count(),
            body.matches("Prefill reserved ").count(),
            "{stem}: prefill pools"
        );
        assert_eq!(
            body.matches("<figcaption>Decode pool").count(),
            body.matches("Decode reserved ").count(),
            "{stem}: decode pools"
        );
        // Every step the request reached with pages reserved carries the
        // coverage ribbon; a run that leaks shows the foreign reads on it.
        let verdict = {
            let envelope = fs::read(bundle.join("receipts").join(format!("{stem}.json"))).unwrap();
            verify_receipt(&envelope, &key).unwrap().predicate.verdict
        };
        if verdict.leak && verdict.foreign_pages_read > 0 {
            assert!(body.contains("<figure class=\"ribbon\">"), "{stem}: ribbon");
            assert!(
                body.contains("on another tenant's pages)"),
                "{stem}: foreign reads on the ribbon"
            );
        }
        if body.contains("<div class=\"grid\"") {
            assert!(body.contains("data-slot=\"1\""), "{stem}: page-table order");
        }
        assert!(
            body[matrix..replay]
                .contains(&format!("<tr data-stem=\"{stem}\" aria-current=\"page\"")),
            "{stem}: the matrix marks its own run"
        );
    }
}
