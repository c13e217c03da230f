//! Whether the receipt on screen is authentic, in words.
//!
//! The static page states what the site builder checked; once scripts run,
//! the browser repeats the check with the evidence crate compiled to wasm and
//! the banner says so. A receipt that fails is flagged here and replaced by a
//! warning in the replay.

use leptos::prelude::*;

use super::ReplayCtx;
use crate::model::Shown;

#[component]
pub fn TrustBanner() -> impl IntoView {
    let ctx = ReplayCtx::get();
    let lang = ctx.data.with_value(|d| d.lang);
    move || {
        match (ctx.shown.get(), ctx.browser_checked.get()) {
        (Shown::Verified { keyid, .. }, true) => view! {
            <p class="trust ok" id="kvw-trust" role="status">
                <span aria-hidden="true">"✔ "</span>
                {lang.pick("Verified with key ", "Verificata con la chiave ")}<code class="keyid">{keyid}</code>
                {lang.pick(" — signature and digests checked in this browser.", " — firma e digest controllati in questo browser.")}
            </p>
        }.into_any(),
        (Shown::Verified { keyid, .. }, false) => view! {
            <p class="trust built" id="kvw-trust" role="status">
                {lang.pick("Signature checked when this site was built, key ", "Firma controllata alla costruzione del sito, chiave ")}<code class="keyid">{keyid}</code>
                {lang.pick(". With scripts on, your browser checks it again; offline: ", ". Con gli script attivi il browser la ricontrolla; offline: ")}<code>"kvw verify"</code>"."
            </p>
        }.into_any(),
        (Shown::Rejected { reason, .. }, _) => view! {
            <p class="trust bad" id="kvw-trust" role="alert">
                <span aria-hidden="true">"⚠ "</span>
                {lang.pick("Not verified: ", "Non verificata: ")}{reason}
            </p>
        }.into_any(),
        (Shown::Loading { .. }, _) => view! {
            <p class="trust pending" id="kvw-trust" role="status">{lang.pick("Verifying…", "Verifica in corso…")}</p>
        }.into_any(),
    }
    }
}
