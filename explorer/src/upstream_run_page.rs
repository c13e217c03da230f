//! The page of an upstream-run receipt: one case of the differential run on
//! one real SGLang release and on the engine, field by field.
//!
//! An upstream-run receipt (predicate `upstream-run/v1`,
//! [`kvw_evidence::upstream_run`]) names the wheel that was installed (file
//! and SHA-256), the Python and torch it ran on, the digest of the probe
//! sources, the collaborators the probe replaced with stubs, and both
//! observations with the verdict of each field. This module lists all of it
//! as the receipt states it, with no script; nothing is re-run.

use kvw_evidence::upstream_run::{FieldVerdict, UpstreamRunPredicate, Verdict};
use leptos::prelude::*;
use serde_json::Value;

use crate::i18n::Lang;

/// A verdict in the reader's language, and as a stable attribute.
fn verdict_words(v: Verdict, lang: Lang) -> (&'static str, &'static str) {
    match v {
        Verdict::Agree => (lang.pick("agree", "concordano"), "agree"),
        Verdict::Differ => (lang.pick("differ", "differiscono"), "differ"),
        Verdict::NotApplicable => (lang.pick("not applicable", "non applicabile"), "na"),
    }
}

/// An observed value as compact JSON; a missing one as a dash.
fn shown(v: Option<&Value>) -> String {
    v.map_or_else(|| "—".to_string(), Value::to_string)
}

#[component]
fn FieldRow(field: FieldVerdict, upstream: String, engine: String, lang: Lang) -> impl IntoView {
    let (word, slug) = verdict_words(field.verdict, lang);
    view! {
        <tr data-verdict=slug>
            <th scope="row"><code>{field.field}</code></th>
            <td><code>{upstream}</code></td>
            <td><code>{engine}</code></td>
            <td>{word}</td>
            <td lang="en">{field.reason.unwrap_or_default()}</td>
        </tr>
    }
}

/// An upstream-run receipt: release and wheel, what the probe stubbed, and
/// the two observations compared.
#[component]
pub fn UpstreamRunView(stem: String, predicate: UpstreamRunPredicate, lang: Lang) -> impl IntoView {
    let p = predicate;
    let totals = p.totals();
    let fixes = kvw_evidence::FixSet::new(&p.fixes).to_string();
    let rows = p
        .fields
        .iter()
        .map(|f| {
            let (u, e) = (
                shown(p.upstream.get(&f.field)),
                shown(p.engine.get(&f.field)),
            );
            view! { <FieldRow field=f.clone() upstream=u engine=e lang=lang/> }
        })
        .collect_view();
    let stubs = p
        .stubs
        .iter()
        .map(|s| view! { <li><code>{s.clone()}</code></li> })
        .collect_view();
    let counts = format!(
        "{} {} · {} {} · {} {} · {} {}",
        totals.agree,
        lang.pick("agree", "concordano"),
        totals.explained,
        lang.pick(
            "differ with the reason given",
            "differiscono, con la ragione indicata"
        ),
        totals.differ,
        lang.pick("differ unexplained", "differiscono senza spiegazione"),
        totals.not_applicable,
        lang.pick("not applicable", "non applicabili"),
    );
    view! {
        <article class="ur" data-receipt=stem.clone() data-release=p.release.clone()>
            <h1>{format!("SGLang {} — {} — {}", p.release, p.case, lang.pick("real release beside the engine", "release reale accanto al motore"))}</h1>
            <p>{lang.pick(
                "The released code of this SGLang version was installed from PyPI and driven by the project's own probe; the engine ran the same inputs with the fixes this release contains. Each field below is what each side showed.",
                "Il codice pubblicato di questa versione di SGLang è stato installato da PyPI e guidato dalla sonda del progetto; il motore ha eseguito gli stessi input con le correzioni che questa release contiene. Ogni campo qui sotto riporta ciò che ciascuna parte ha mostrato.",
            )}</p>
            <dl class="ur-facts">
                <dt>{lang.pick("Wheel", "Wheel")}</dt><dd><code>{p.wheel}</code>" · sha256 "<code>{p.wheel_sha256}</code></dd>
                <dt>"Python · torch"</dt><dd><code>{format!("{} · {}", p.python, p.torch)}</code></dd>
                <dt>{lang.pick("Probe sources", "Sorgenti della sonda")}</dt><dd>"sha256 "<code>{p.probe_sha256}</code></dd>
                <dt>{lang.pick("Engine fixes", "Correzioni del motore")}</dt><dd><code>{fixes}</code></dd>
                <dt>{lang.pick("Compared by", "Confronto di")}</dt><dd><code>{format!("kvw {}", p.kvw_version)}</code></dd>
                <dt>{lang.pick("Fields", "Campi")}</dt><dd class="ur-totals">{counts}</dd>
            </dl>
            <h2>{lang.pick("Collaborators replaced with stubs", "Collaboratori sostituiti da stub")}</h2>
            <ul class="ur-stubs">{stubs}</ul>
            <h2>{lang.pick("Field by field", "Campo per campo")}</h2>
            <table class="ur-fields">
                <thead><tr>
                    <th scope="col">{lang.pick("field", "campo")}</th>
                    <th scope="col">{format!("SGLang {}", p.release)}</th>
                    <th scope="col">{lang.pick("engine", "motore")}</th>
                    <th scope="col">{lang.pick("verdict", "esito")}</th>
                    <th scope="col">{lang.pick("reason", "ragione")}</th>
                </tr></thead>
                <tbody>{rows}</tbody>
            </table>
            <p><a href=format!("../receipts/{stem}.json")>{lang.pick("The signed receipt", "La ricevuta firmata")}</a></p>
        </article>
    }
}
