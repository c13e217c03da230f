//! Gate runs in a bundle become two kinds of static page: the gates table
//! (one per set of fixes, each row linking to its scenario's replay) and a
//! replay of each scenario receipt's typed events, step by step, on the
//! page grid. The bundle holds the real gate runs for no fixes and every
//! fix, signed; the site is built and read back as HTML.

use std::fs;
use std::path::Path;
use std::sync::LazyLock;

mod support;

use kvw_engine::scenarios::receipts;
use kvw_evidence::bundle::write_bundle_with_others;
use kvw_evidence::scenario::ScenarioPredicate;
use kvw_evidence::signing::Signer;
use kvw_evidence::Fix;
use kvw_explorer::gates_page::scenario_stem;
use kvw_explorer::sample::{sample_receipts, SAMPLE_SEED};
use kvw_explorer::site::{build_site, SiteOptions};
use kvw_words::scenario::{self, Piece};
use kvw_words::Lang;

/// The scenario whose receipt under every fix is left out of the bundle.
const LEFT_OUT: &str = "late_write_corrupts_next_tenant";
/// The scenario whose replay is checked step by step.
const REPLAYED: &str = "late_write_corrupts_next_tenant";

/// `text` as the static pages escape it.
fn escaped(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('\'', "&#39;")
        .replace('"', "&quot;")
}

struct Site {
    out: std::path::PathBuf,
    /// The predicate of `REPLAYED` under no fixes.
    replayed: ScenarioPredicate,
    rows: usize,
}

/// The site every test here reads: built once per test binary, on first
/// use, into this binary's temporary folder under the target directory
/// (replaced by the next run, so nothing piles up in the system's).
fn site() -> &'static Site {
    static SITE: LazyLock<Site> = LazyLock::new(build);
    &SITE
}

fn build() -> Site {
    let signer = Signer::from_seed(&SAMPLE_SEED);
    let mut others = Vec::new();
    let mut replayed = None;
    let mut rows = 0;
    for fixes in [Vec::new(), Fix::ALL.to_vec()] {
        let judged = receipts::judge_all(&fixes);
        let gates = receipts::gates_predicate(&fixes, &judged);
        rows = gates.rows.len();
        if fixes.is_empty() {
            let j = judged.iter().find(|j| j.scenario.name == REPLAYED);
            replayed = j.map(receipts::scenario_predicate);
        }
        let left_out = scenario_stem(LEFT_OUT, &fixes) + ".json";
        let signed = receipts::signed(&fixes, &judged, &gates, &signer).unwrap();
        others.extend(
            signed
                .into_iter()
                .filter(|(name, _)| fixes.is_empty() || *name != left_out),
        );
    }
    others.push(support::fuzz_receipt(&signer));
    let probes = sample_receipts(&signer).unwrap();
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("explorer-gates");
    if root.exists() {
        fs::remove_dir_all(&root).unwrap();
    }
    fs::create_dir_all(&root).unwrap();
    let (bundle, out) = (root.join("bundle"), root.join("site"));
    write_bundle_with_others(&bundle, probes, others, &signer).expect("a bundle of gate runs");
    let mut opts = SiteOptions::new(&bundle, &out);
    opts.wasm_dir = None;
    build_site(&opts).expect("the site builds");
    Site {
        out,
        replayed: replayed.expect("the replayed scenario ran"),
        rows,
    }
}

fn read(site: &Site, lang: &str, file: &str) -> String {
    fs::read_to_string(site.out.join(lang).join(file))
        .unwrap_or_else(|e| panic!("{lang}/{file}: {e}"))
}

/// The `<section>` of the gates table with fixes `label`.
fn section<'a>(html: &'a str, label: &str) -> &'a str {
    let start = html
        .find(&format!("<section id=\"gates-fixes-{label}\""))
        .unwrap_or_else(|| panic!("no table for fixes {label}"));
    let end = html[start..].find("</section>").unwrap() + start;
    &html[start..end]
}

/// The `<tr>` of scenario `name` in a table.
fn row<'a>(table: &'a str, name: &str) -> &'a str {
    let at = table
        .find(&format!("data-scenario=\"{name}\""))
        .unwrap_or_else(|| panic!("no row for {name}"));
    let start = table[..at].rfind("<tr").unwrap();
    let end = table[at..].find("</tr>").unwrap() + at;
    &table[start..end]
}

#[test]
fn the_gates_page_tables_every_row_for_none_and_all_and_links_each_run() {
    let site = site();
    let html = read(site, "en", "gates.html");
    fs::write(std::env::temp_dir().join("kvw-gates.html"), &html).ok();
    support::assert_static_with_checks(&html, &["gates-fixes-none", "gates-fixes-all"]);
    let (none, all) = (section(&html, "none"), section(&html, "all"));
    for table in [none, all] {
        assert_eq!(table.matches("<tr data-status=").count(), site.rows);
    }
    // Without fixes the late write corrupts the next tenant; with them it does not.
    let pre = row(none, "late_write_corrupts_next_tenant");
    assert!(pre.contains("data-status=\"fail\""), "{pre}");
    // A failure the record predicts says so, and is coloured as expected.
    assert!(
        pre.contains("<td class=\"result r-fail as-recorded\">fail"),
        "{pre}"
    );
    assert!(
        pre.contains("href=\"scenario-late_write_corrupts_next_tenant-fixes-none.html\""),
        "{pre}"
    );
    let post = row(all, "late_write_corrupts_next_tenant");
    assert!(post.contains("data-status=\"pass\""), "{post}");
    // Its receipt under every fix was left out: the row says so by not linking.
    assert!(!post.contains("href="), "{post}");
    // A defense that was off is not exercised, never a pass.
    assert!(none.contains("data-status=\"not-exercised\""));
    assert!(!all.contains("data-status=\"not-exercised\""));
    assert!(!all.contains("data-status=\"fail\""));
    // Every linked page exists.
    for table in [none, all] {
        for part in table.split("href=\"").skip(1) {
            let file = &part[..part.find('"').unwrap()];
            assert!(site.out.join("en").join(file).is_file(), "{file}");
        }
    }
    let it = read(site, "it", "gates.html");
    assert!(it.contains("Gate di accettazione"));
    assert!(it.contains("as-recorded\">fallito<small>come prevede la fonte</small>"));
    assert!(it.contains("\">non esercitato<small>"));
    // Expected, observed and why are rendered from the rows' facts in
    // Italian; the participle agrees with the count; nothing is left quoted
    // as English.
    assert!(
        it.contains("<td>fallisce senza <code>deferred-release</code>"),
        "Italian expected form"
    );
    assert!(it.contains(" falliti, "), "plural agreement");
    assert!(!it.contains("fails without") && html.contains("fails without"));
    let article = &it[it.find("<article class=\"gates-page\"").unwrap()..];
    assert!(
        !article[..article.find("</article>").unwrap()].contains("lang=\"en\""),
        "no English quoted on the Italian page"
    );
    // The receipts index has an Italian twin beside the Italian pages.
    let index = fs::read_to_string(site.out.join("it").join("receipts.html")).unwrap();
    assert!(index.contains("<html lang=\"it\"") && index.contains("Ricevute"));
    assert!(
        index.contains("href=\"gates.html\"") && index.contains("href=\"../receipts/index.html\"")
    );
}

#[test]
fn a_scenario_page_replays_every_event_on_the_page_grid() {
    let site = site();
    let file = format!("{}.html", scenario_stem(REPLAYED, &[]));
    let html = read(site, "en", &file);
    let stem = scenario_stem(REPLAYED, &[]);
    support::assert_static_with_checks(&html, &[&stem]);
    // The check compares the file with the digest of the receipt as stored.
    let stored = fs::read(site.out.join("receipts").join(format!("{stem}.json"))).unwrap();
    let digest = kvw_evidence::canonical::sha256_hex(&stored);
    assert!(html.contains(&format!("\"sha256\":\"{digest}\"")));
    let p = &site.replayed;
    assert!(p.events.len() > 3 && !p.pages.is_empty());
    for (i, event) in p.events.iter().enumerate() {
        let n = i + 1;
        let start = html
            .find(&format!("<li id=\"step-{n}\""))
            .unwrap_or_else(|| panic!("step {n} has no anchor"));
        let step = &html[start..];
        let step = &step[..step.find("</li><li id=\"step-").unwrap_or(step.len())];
        let kind = kvw_evidence::tagged::flatten(&event.kind).unwrap()["kind"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(step.contains(&format!("data-kind=\"{kind}\"")), "{step}");
        assert!(step.contains(&format!("href=\"#step-{n}\"")));
        assert!(step.contains(&format!(
            "{} — {}",
            kvw_explorer::fixed::duration_us(event.at_us),
            event.rid
        )));
        let pictured = p.pages.iter().any(|pg| pg.event as usize == i);
        assert_eq!(
            step.contains("<figure class=\"pool\""),
            pictured,
            "step {n}"
        );
    }
    assert!(!html.contains(&format!("id=\"step-{}\"", p.events.len() + 1)));
    assert!(html.contains("data-status=\"fail\""));
    // The why is rendered from the receipt's facts in each page's language.
    // Its words in the page's language, its code in <code>.
    let why = |lang| {
        scenario::why(&p.why, lang)
            .pieces()
            .iter()
            .map(|piece| match piece {
                Piece::Words(w) => escaped(w),
                Piece::Code(c) => format!("<code>{}</code>", escaped(c)),
            })
            .collect::<String>()
    };
    assert!(html.contains(&why(Lang::En)), "{}", why(Lang::En));
    assert!(html.contains("href=\"gates.html\""));
    let it = read(site, "it", &file);
    assert!(it.contains(&why(Lang::It)), "{}", why(Lang::It));
    assert!(!it.contains(&why(Lang::En)));
    assert!(it.contains("Eventi, passo per passo"));
    assert!(it.contains("<li id=\"step-1\""));
    // The receipt is published beside the page.
    assert!(site
        .out
        .join("receipts")
        .join(format!("{}.json", scenario_stem(REPLAYED, &[])))
        .is_file());
}

#[test]
fn a_shrunk_fuzz_case_replays_with_its_pictures_and_the_breaking_step() {
    let site = site();
    let html = read(site, "en", "fuzz-fixes-none-seed-2026.html");
    support::assert_static_with_checks(&html, &["fuzz-fixes-none-seed-2026"]);
    let at = html
        .find("<p class=\"fz-broke\"><a href=\"#step-")
        .expect("a link to the breaking step");
    let n: usize = html[at..]
        .trim_start_matches("<p class=\"fz-broke\"><a href=\"#step-")
        .split('"')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        html.contains(&format!("<li id=\"step-{n}\"")),
        "step {n} exists"
    );
    assert!(
        html.contains("<figure class=\"pool\""),
        "the shrunk case draws its pages"
    );
    assert!(html.contains("Broken:"));
    assert!(read(site, "it", "fuzz-fixes-none-seed-2026.html").contains("Violato:"));
}

/// The signed scenario predicate stored as `receipts/<stem>.json`.
fn stored_scenario(site: &Site, stem: &str) -> ScenarioPredicate {
    let bytes = fs::read(site.out.join("receipts").join(format!("{stem}.json"))).unwrap();
    let key = Signer::from_seed(&SAMPLE_SEED).public();
    kvw_evidence::receipt::verify_statement(&bytes, &key)
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn a_scenario_page_compares_its_run_with_the_other_fixes() {
    let site = site();
    let name = "context_beyond_pool_is_never_answered_200";
    let (none, all) = (scenario_stem(name, &[]), scenario_stem(name, &Fix::ALL));
    let (p_none, p_all) = (stored_scenario(site, &none), stored_scenario(site, &all));
    let first = kvw_explorer::scenario_page::first_event_difference(&p_none.events, &p_all.events)
        .expect("the guard changes what happens");
    for (this, that) in [(&none, &all), (&all, &none)] {
        let html = read(site, "en", &format!("{this}.html"));
        let twin = &html[html.find("class=\"sc-twin\">").expect("a comparison")..];
        let twin = &twin[..twin.find("</section>").unwrap()];
        assert!(twin.contains(&format!("href=\"{that}.html\"")), "{twin}");
        assert!(
            twin.contains(&format!("The runs first differ at event {}", first + 1)),
            "{twin}"
        );
        assert!(twin.contains(&format!("href=\"#step-{}\"", first + 1)));
        let it = read(site, "it", &format!("{this}.html"));
        assert!(it.contains(&format!(
            "divergono per la prima volta all'evento {}",
            first + 1
        )));
    }
    // The left-out receipt has no twin to compare with.
    let lone = read(
        site,
        "en",
        &format!("{}.html", scenario_stem(LEFT_OUT, &[])),
    );
    assert!(!lone.contains("sc-twin"));
    // Identical runs compare as identical, and a longer run differs where the shorter ends.
    assert_eq!(
        kvw_explorer::scenario_page::first_event_difference(&p_none.events, &p_none.events),
        None
    );
    assert_eq!(
        kvw_explorer::scenario_page::first_event_difference(
            &p_none.events,
            &p_none.events[..p_none.events.len() - 1]
        ),
        Some(p_none.events.len() - 1)
    );
}
