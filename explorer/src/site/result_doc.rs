//! The document around a static result page: gates, scenario, randomized
//! runs, model check or audit.
//!
//! These pages need no script to be read. Each reports one or more
//! receipts ([`Shows`]); the site builder verified them, and in the browser
//! the page checks them again (`results_check.js`): each file the page
//! links is fetched and its SHA-256 and signature are checked with
//! WebCrypto, so a file altered after the build gets the warning here as it
//! does on a replay page.

use leptos::prelude::*;

use super::document::head_start;
use super::layout::receipts_index_path;
use crate::i18n::Lang;

/// The receipts a static page reports and the key they verify with.
#[derive(Debug, Clone, Copy)]
pub struct Shows<'a> {
    /// The bundle's `kvw.pub.json`.
    pub public_key_json: &'a str,
    /// `(stem, envelope as stored)` of each receipt the page reports.
    pub receipts: &'a [(&'a str, &'a [u8])],
}

/// The first 16 hex digits of a digest, enough to compare by eye.
fn short(hex: &str) -> String {
    hex.get(..16).unwrap_or(hex).to_string()
}

/// `(stem, SHA-256 of the file as stored)` of each receipt a page reports.
fn digests<'a>(shows: &Shows<'a>) -> Vec<(&'a str, String)> {
    shows
        .receipts
        .iter()
        .map(|(stem, envelope)| (*stem, kvw_evidence::canonical::sha256_hex(envelope)))
        .collect()
}

/// The `#kvw-results` data and the inline check, for `<head>`.
fn check_head(shows: &Shows<'_>, digests: &[(&str, String)], root: &str) -> String {
    let receipts: Vec<serde_json::Value> = digests
        .iter()
        .map(|(stem, sha256)| serde_json::json!({ "stem": stem, "sha256": sha256 }))
        .collect();
    let data = serde_json::json!({
        "root": root,
        "public_key": shows.public_key_json,
        "receipts": receipts,
    });
    format!(
        "<script type=\"application/json\" id=\"kvw-results\">{}</script>\n{}",
        super::document::script_json(&data),
        crate::csp::results_check_script()
    )
}

/// One banner per receipt: what the site builder checked, turned by the
/// browser's check into the badge or the warning (the style sheet picks the
/// words from `data-kvw-verdict`).
fn banners(lang: Lang, shows: &Shows<'_>, digests: &[(&str, String)], root: &str) -> String {
    let keyid = kvw_evidence::signing::PublicKey::from_json(shows.public_key_json.as_bytes())
        .map(|k| k.keyid())
        .unwrap_or_default();
    let index = format!("{root}{}", receipts_index_path(lang));
    digests
        .iter()
        .map(|(stem, sha256)| {
            let (id, href, file) = (
                format!("kvw-trust-{stem}"),
                format!("{root}receipts/{stem}.json"),
                format!("{stem}.json"),
            );
            let (keyid, index) = (keyid.clone(), index.clone());
            Owner::new().with(|| {
                view! {
                    <div class="trust result" id=id role="status">
                        <p>
                            <span class="when-built">{lang.pick("Checked when this site was built: ", "Controllata alla costruzione del sito: ")}</span>
                            <span class="when-ok"><span aria-hidden="true">"✔ "</span><strong>{lang.pick("Verified in this browser: ", "Verificata in questo browser: ")}</strong></span>
                            <span class="when-bad"><span aria-hidden="true">"⚠ "</span><strong>{lang.pick("Not verified: ", "Non verificata: ")}</strong></span>
                            <a href=href><code>{file}</code></a>" · sha256 "<code class="digest" title=sha256.clone()>{short(sha256)}</code>
                            {lang.pick(" · key ", " · chiave ")}<code class="keyid" title=keyid.clone()>{short(&keyid)}</code>
                        </p>
                        <p class="when-bad">
                            {lang.pick(
                                "This file is not the one the site was built from, or its signature does not verify, so what this page says about it is hidden. ",
                                "Questo file non è quello da cui è stato costruito il sito, o la sua firma non è valida: ciò che questa pagina ne dice è nascosto. ",
                            )}
                            <a href=index>{lang.pick("Back to the verified receipts", "Torna alle ricevute verificate")}</a>
                        </p>
                    </div>
                }
                .to_html()
            })
        })
        .collect()
}

/// One part of a static page's `<main>`.
enum Part<'a> {
    /// What the page says, hidden if a receipt fails the browser's check.
    Body(&'a str),
    /// The receipts' banners, kept visible whatever the check finds.
    Banners,
}

/// A complete static page in `lang`, with a link to the same page in the
/// other language (`file` in its folder), a link that skips to the
/// content for keyboard readers, and the browser's check of the receipts
/// the page reports ([`Shows`]).
pub fn page(lang: Lang, title: &str, file: &str, body: &str, shows: &Shows<'_>) -> String {
    document(
        lang,
        title,
        (file, "../"),
        &[Part::Banners, Part::Body(body)],
        shows,
    )
}

/// The report of an audit bundle: `findings` first, then the receipts'
/// banners, then `details`. `root` is the way to the site's root from the
/// page (`./` for `index.html`, `../` in a language folder).
pub fn report_page(
    lang: Lang,
    title: &str,
    (file, root): (&str, &str),
    (findings, details): (&str, &str),
    shows: &Shows<'_>,
) -> String {
    document(
        lang,
        title,
        (file, root),
        &[Part::Body(findings), Part::Banners, Part::Body(details)],
        shows,
    )
}

fn document(
    lang: Lang,
    title: &str,
    (file, root): (&str, &str),
    parts: &[Part<'_>],
    shows: &Shows<'_>,
) -> String {
    let digests = digests(shows);
    let langs = Lang::ALL
        .into_iter()
        .filter(|l| *l != lang)
        .map(|l| {
            let href = format!("{root}{}/{file}", l.code());
            Owner::new().with(|| {
                view! { <a href=href hreflang=l.code() lang=l.code()>{l.endonym()}</a> }.to_html()
            })
        })
        .collect::<Vec<_>>()
        .join(" ");
    let main: String = parts
        .iter()
        .map(|part| match part {
            Part::Body(body) => format!("<div class=\"kvw-result-body\">{body}</div>"),
            Part::Banners => banners(lang, shows, &digests, root),
        })
        .collect();
    format!(
        "<!DOCTYPE html>\n<html lang=\"{code}\" class=\"kvw-site\">\n<head>\n{head}\n{check}\n<link rel=\"stylesheet\" href=\"{root}style.css\">\n</head>\n<body><a class=\"skip\" href=\"#main\">{skip}</a>{header}<main id=\"main\" class=\"kvw-main\">{main}</main></body>\n</html>\n",
        code = lang.code(),
        head = head_start(&format!("{title} — kvwitness")),
        check = check_head(shows, &digests, root),
        header = super::document::site_header(root, lang, &langs),
        skip = lang.pick("Skip to content", "Vai al contenuto"),
    )
}
