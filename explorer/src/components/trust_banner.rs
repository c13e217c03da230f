//! Whether the receipt on screen is authentic, in words.
//!
//! The static page states what the site builder checked; once scripts run,
//! the browser fetches the receipt file the page links, verifies those bytes
//! with the evidence crate compiled to wasm and the banner names the file and
//! its SHA-256. Before the wasm has loaded, an inline WebCrypto check of the
//! same bytes (`early_check.js`) already turns the static banner into the
//! badge or the warning. A receipt that fails is flagged here, with the way back to
//! the verified runs, and replaced by a warning in the replay.

use leptos::either::EitherOf4;
use leptos::prelude::*;

use super::ReplayCtx;
use crate::page_data::Shown;

/// The first 16 hex digits of a digest, enough to compare by eye.
fn short(hex: &str) -> String {
    hex.get(..16).unwrap_or(hex).to_string()
}

#[component]
pub fn TrustBanner() -> impl IntoView {
    let ctx = ReplayCtx::get();
    let (lang, root) = ctx.data.with_value(|d| (d.lang, d.root.clone()));
    let embedded = ctx.embedded;
    move || {
        let file = ctx.shown.with(|s| format!("{}.json", s.stem()));
        match (ctx.shown.get(), ctx.browser_checked.get()) {
            (Shown::Verified { keyid, sha256, .. }, true) => EitherOf4::A(view! {
                <p class="trust ok" id="kvw-trust" role="status">
                    <span aria-hidden="true">"✔ "</span>
                    <strong>{lang.pick("Verified in this browser: ", "Verificata in questo browser: ")}</strong>
                    <code>{file}</code>" · sha256 "<code class="digest" title=sha256.clone()>{short(&sha256)}</code>
                    {lang.pick(" · key ", " · chiave ")}<code class="keyid" title=keyid.clone()>{short(&keyid)}</code>
                </p>
            }),
            (Shown::Verified { keyid, sha256, .. }, false) => EitherOf4::B(view! {
                <p class="trust built" id="kvw-trust" role="status">
                    // Which of these shows is the style sheet's choice, from the
                    // inline WebCrypto check's verdict on <html> (early_check.js).
                    <span class="when-built">{lang.pick("Checked when this site was built: ", "Controllata alla costruzione del sito: ")}</span>
                    // The same words as the banner the wasm draws once it agrees, so
                    // the swap moves nothing.
                    <span class="when-early-ok"><span aria-hidden="true">"✔ "</span><strong>{lang.pick("Verified in this browser: ", "Verificata in questo browser: ")}</strong></span>
                    <span class="when-early-bad"><span aria-hidden="true">"⚠ "</span><strong>{lang.pick("Not verified: ", "Non verificata: ")}</strong></span>
                    <code>{file}</code>" · sha256 "<code class="digest" title=sha256.clone()>{short(&sha256)}</code>
                    {lang.pick(" · key ", " · chiave ")}<code class="keyid" title=keyid.clone()>{short(&keyid)}</code>
                </p>
            }),
            (Shown::Rejected { reason, .. }, _) => EitherOf4::C(view! {
                <div class="trust bad" id="kvw-trust" role="alert">
                    <p>
                        <span aria-hidden="true">"⚠ "</span>
                        <strong>{lang.pick("Not verified: ", "Non verificata: ")}</strong><code>{file}</code>" — "
                        {lang.pick("", "il file non è quello firmato o non si è potuto leggere. Dettaglio tecnico: ")}
                        // The verifier's own words, which are English.
                        <span lang="en">{reason}</span>
                    </p>
                    {(!embedded).then(|| view! {
                        <p><a href=format!("{root}index.html") id="kvw-back">{lang.pick("Back to the verified runs", "Torna alle esecuzioni verificate")}</a>
                        " · "<a href=format!("{root}receipts/")>{lang.pick("all receipts", "tutte le ricevute")}</a></p>
                    })}
                </div>
            }),
            (Shown::Loading { .. }, _) => EitherOf4::D(view! {
                <p class="trust pending" id="kvw-trust" role="status">{lang.pick("Verifying ", "Verifica di ")}<code>{file}</code>"…"</p>
            }),
        }
    }
}
