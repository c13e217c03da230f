//! A model-check receipt in a bundle becomes a static page that replays its
//! counterexample step by step: the checker's own shortest path for the
//! pre-fix model with one request, signed, bundled, built into a site and
//! read back as HTML, where the incident's shape must be visible without
//! any script. With `retire-aborted-prefill-result` on, the same page has
//! no path to replay.

use std::fs;

mod support;

use kvw_evidence::bundle::{
    verify_bundle, write_bundle_with_model_checks, OtherFacts, ReceiptFacts, VerifyOptions,
};
use kvw_evidence::signing::Signer;
use kvw_evidence::Fix;
use kvw_explorer::sample::{sample_receipts, SAMPLE_SEED};
use kvw_explorer::site::{build_site, SiteOptions};

/// The site of a bundle holding the sample probe receipts and the model
/// check of `fixes` with one request, as (English page, Italian page,
/// steps in the path).
fn model_check_site(fixes: &[Fix], stem: &str) -> (String, String, usize) {
    let signer = Signer::from_seed(&SAMPLE_SEED);
    let (name, envelope, steps) = support::model_check_receipt(fixes, stem, &signer);
    let probes = sample_receipts(&signer).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let (bundle, out) = (tmp.path().join("bundle"), tmp.path().join("site"));
    write_bundle_with_model_checks(&bundle, probes, vec![(name, envelope)], &signer)
        .expect("a bundle may carry a model-check receipt");
    // `kvw verify` accepts the bundle and checks the model-check receipt too.
    let verified = verify_bundle(&bundle, &VerifyOptions::default()).expect("the bundle verifies");
    assert!(verified.ok(), "{}", verified.summary());
    let line = verified
        .receipts
        .iter()
        .find(|l| l.file == format!("receipts/{stem}.json"))
        .expect("a line for the model check");
    assert!(line
        .result
        .as_ref()
        .is_ok_and(|ok| matches!(ok.facts, ReceiptFacts::Other(OtherFacts::ModelCheck { .. }))));
    let mut opts = SiteOptions::new(&bundle, &out);
    opts.wasm_dir = None;
    build_site(&opts).expect("the site builds");
    let html = fs::read_to_string(out.join("en").join(format!("{stem}.html")))
        .expect("a page for the model-check receipt");
    let it = fs::read_to_string(out.join("it").join(format!("{stem}.html")))
        .expect("an Italian page for the model-check receipt");
    assert!(out.join("receipts").join(format!("{stem}.json")).is_file());
    (html, it, steps)
}

/// The `<li>` of step `n`.
fn step(html: &str, n: usize) -> &str {
    let start = html
        .find(&format!("id=\"step-{n}\""))
        .unwrap_or_else(|| panic!("step {n} has no anchor"));
    let end = html[start..]
        .find("</li><li id=\"step-")
        .map_or(html.len(), |e| start + e);
    &html[start..end]
}

#[test]
fn the_pre_fix_counterexample_replays_with_the_incident_shape() {
    let (html, it, n) = model_check_site(&[], "model-check-none-1");
    std::fs::write(
        std::env::temp_dir().join("kvw-model-check-none-1.html"),
        &html,
    )
    .ok();
    assert!(n >= 6, "a path of {n} steps");
    support::assert_static_with_checks(&html, &["model-check-none-1"]);
    let steps: Vec<&str> = (1..=n).map(|i| step(&html, i)).collect();
    let find = |action: &str| {
        steps
            .iter()
            .position(|s| s.contains(&format!("data-action=\"{action}\"")))
            .unwrap_or_else(|| panic!("no {action} step"))
    };
    // Prefill's door admits the rejected request: `finished()` is false
    // although `to_finish` holds the 400.
    let forward = find("prefill_forward");
    assert!(
        steps[forward].contains("prefill_admission_door: Admit (finished() = false)"),
        "{}",
        steps[forward]
    );
    // The Req the door read: `to_finish` set, `finished_reason` not yet.
    assert!(steps[forward].contains("Req read: <code>prefill to_finish = FINISH_ABORT(status=400"));
    assert!(steps[forward].contains("prefill finished_reason = None"));
    // Decode reserved pages for the prompt the client sent...
    let prealloc = find("decode_prealloc");
    assert!(steps[prealloc].contains("reserved by r0"));
    assert!(prealloc < forward || steps[forward].contains("[0, 1, 2]"));
    // ...prefill sent the placeholder's single page with the final flag...
    assert!(steps[forward].contains("1 / 0") || steps[forward].contains("1 / 1"));
    // ...and decode's handoff door admitted the short transfer.
    let poll = find("decode_poll");
    assert!(
        steps[poll].contains("handoff_door: Admit"),
        "{}",
        steps[poll]
    );
    // The decode step reads pages another tenant wrote earlier and answers 200.
    let decode = find("decode_step");
    assert!(steps[decode].contains("r0 reads pages"));
    assert!(steps[decode].contains("earlier:t"));
    assert!(steps[decode].contains("[200]"));
    assert!(forward < poll && poll < decode);
    assert!(html.contains("Violated: isolation"));
    assert!(html.contains("isolation: r0, page "));
    // Pages are coloured by owner: r0's pages share one colour, free pages another.
    assert!(html.contains("data-owner=\"r0\""));
    assert!(html.contains("data-owner=\"free\""));
    // The Italian page says the same in Italian, from the same facts.
    assert!(it.contains("<html lang=\"it\""));
    for italian in [
        "Decisione: ",
        "Req letta: ",
        "pagina 0 prenotata da r0",
        "r0 legge le pagine",
        "Violata: isolation",
        "stati esplorati: ",
    ] {
        assert!(it.contains(italian), "{italian}");
    }
    for english in [
        "Decision: ",
        "Req read: ",
        "reserved by",
        "reads pages",
        "states explored",
        "as the step left it",
    ] {
        assert!(html.contains(english) && !it.contains(english), "{english}");
    }
}

#[test]
fn with_the_fix_there_is_no_path_to_replay() {
    let (html, _, n) = model_check_site(&[Fix::RetireAbortedPrefillResult], "model-check-fixed-1");
    assert_eq!(n, 0);
    assert!(!html.contains("id=\"step-1\""));
    assert!(html.contains("<li data-status=\"holds\"><code>isolation</code>"));
    // The same page for the pre-fix model has the path.
    let (pre, _, _) = model_check_site(&[], "model-check-none-1");
    assert!(pre.contains("id=\"step-1\""));
    assert!(pre.contains("<li data-status=\"violated\"><code>isolation</code>"));
}
