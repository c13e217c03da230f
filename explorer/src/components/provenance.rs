//! The provenance badge: where a step's behaviour comes from.
//!
//! The badge is text first (a symbol and a word), colour second, so it reads
//! the same in greyscale and to a screen reader.

use kvw_evidence::Provenance;
use leptos::prelude::*;

use crate::i18n::Lang;

/// Label, symbol and CSS modifier of a provenance.
pub fn describe(p: Provenance, lang: Lang) -> (&'static str, &'static str, &'static str) {
    match p {
        Provenance::Disclosed => (
            "◆",
            lang.pick("Disclosed by the vendor", "Dichiarato dal fornitore"),
            "disclosed",
        ),
        Provenance::UpstreamTest => (
            "✔",
            lang.pick("Upstream unit test", "Test unitario upstream"),
            "upstream-test",
        ),
        Provenance::UpstreamCode => (
            "⌘",
            lang.pick("Upstream source code", "Codice sorgente upstream"),
            "upstream-code",
        ),
        Provenance::UpstreamThread => (
            "✎",
            lang.pick("Upstream PR or issue", "PR o issue upstream"),
            "upstream-thread",
        ),
        Provenance::UpstreamRun => (
            "▶",
            lang.pick(
                "Real upstream release, run",
                "Release upstream reale, eseguita",
            ),
            "upstream-run",
        ),
        Provenance::ModelAssumption => (
            "?",
            lang.pick("Model assumption", "Ipotesi del modello"),
            "model-assumption",
        ),
    }
}

#[component]
pub fn ProvenanceBadge(provenance: Provenance, lang: Lang) -> impl IntoView {
    let (symbol, label, slug) = describe(provenance, lang);
    view! {
        <span class=format!("prov prov-{slug}")>
            <span aria-hidden="true">{symbol}" "</span>
            <span class="sr-only">{lang.pick("Source: ", "Fonte: ")}</span>
            {label}
        </span>
    }
}
