//! The page of an audit receipt: one gate of `kvw audit` against an
//! endpoint, and the exchanges it decided on.
//!
//! An audit receipt (predicate `audit/v1`, [`kvw_evidence::audit`]) says
//! which gate ran against which endpoint, what it concluded and why, the
//! measured facts, and every request and response it relied on. This
//! module lists all of that as the receipt states it, with no script: the
//! endpoint is shown as text, never as a link (it is whatever address the
//! auditor was given), and the exchanges are drawn within the page's
//! limits ([`crate::limits`]).
//!
//! Everything drawn comes from the signed predicate; nothing is re-run.

use kvw_evidence::audit::{AuditPredicate, Exchange, GateResult};
use leptos::prelude::*;

use crate::i18n::Lang;
use crate::limits::{truncation_note, MAX_DRAWN_STEPS};

/// A gate's result in the reader's language, and as a stable attribute.
pub fn result_words(result: GateResult, lang: Lang) -> (&'static str, &'static str) {
    match result {
        GateResult::Pass => (lang.pick("pass", "superato"), "pass"),
        GateResult::Fail => (lang.pick("fail", "fallito"), "fail"),
        GateResult::Inconclusive => (lang.pick("inconclusive", "non concluso"), "inconclusive"),
    }
}

/// A receipt's exchanges, as many as a page draws, with the note that says
/// where the rest are (`receipt_href`, the receipt file).
#[component]
pub fn Exchanges(exchanges: Vec<Exchange>, receipt_href: String, lang: Lang) -> impl IntoView {
    let note = truncation_note(exchanges.len(), None, &receipt_href, lang);
    let items = exchanges
        .into_iter()
        .take(MAX_DRAWN_STEPS)
        .map(|e| view! { <ExchangeItem exchange=e lang=lang/> })
        .collect_view();
    view! {
        {note}
        <ol class="au-exchanges">{items}</ol>
    }
}

/// One exchange as the receipt records it (keys already replaced by
/// tenant labels when the audit recorded it).
#[component]
pub fn ExchangeItem(exchange: Exchange, lang: Lang) -> impl IntoView {
    let e = exchange;
    let head = format!(
        "{}. {} {} {} — {} {} · {} µs",
        e.index + 1,
        e.tenant,
        e.method,
        e.path,
        lang.pick("status", "stato"),
        e.status,
        e.total_us
    );
    let sizes = format!(
        "{} {} · {} {} · sha256 {}",
        e.request_bytes,
        lang.pick("bytes sent", "byte inviati"),
        e.response_bytes,
        lang.pick("bytes received", "byte ricevuti"),
        e.request_sha256
    );
    view! {
        <li class="au-exchange" data-status=e.status.to_string()>
            <h3>{head}</h3>
            <p class="au-sizes"><code>{sizes}</code></p>
            <details>
                <summary>{lang.pick("Request and response as recorded", "Richiesta e risposta come registrate")}</summary>
                <pre class="au-request">{e.request}</pre>
                <pre class="au-response">{e.response}</pre>
            </details>
        </li>
    }
}

/// An audit receipt: gate, endpoint, result and reason, the measured
/// facts, and the exchanges.
#[component]
pub fn AuditView(stem: String, predicate: AuditPredicate, lang: Lang) -> impl IntoView {
    let p = predicate;
    let (word, slug) = result_words(p.result, lang);
    let evidence = serde_json::to_string_pretty(&p.evidence).unwrap_or_default();
    let receipt_href = format!("../receipts/{stem}.json");
    view! {
        <article class="au" data-receipt=stem.clone() data-result=slug>
            <h1>{format!("{} — {} — {stem}", lang.pick("Audit", "Audit"), p.gate)}</h1>
            <dl class="au-facts">
                <dt>{lang.pick("Endpoint", "Endpoint")}</dt><dd><code>{p.endpoint}</code></dd>
                <dt>{lang.pick("Gate", "Gate")}</dt><dd><code>{p.gate.clone()}</code></dd>
                <dt>{lang.pick("Result", "Esito")}</dt><dd><strong>{word}</strong></dd>
                <dt>{lang.pick("Why", "Perché")}</dt><dd lang="en">{p.reason}</dd>
                <dt>{lang.pick("Auditor", "Revisore")}</dt><dd><code>{format!("kvw {}", p.auditor_version)}</code></dd>
            </dl>
            <h2>{lang.pick("Measured facts", "Dati misurati")}</h2>
            <pre class="au-evidence">{evidence}</pre>
            <h2>{lang.pick("Exchanges", "Scambi")}</h2>
            <Exchanges exchanges=p.exchanges receipt_href=receipt_href lang=lang/>
        </article>
    }
}
