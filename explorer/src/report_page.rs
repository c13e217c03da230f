//! The report of an audit bundle (`kvw audit --out`): what a provider hands
//! to a customer.
//!
//! Findings first: one row per gate with its result, the one sentence the
//! receipt gives as its reason, what to do about it and a link to the
//! gate's own page. Then each gate's exchanges, quoted as the receipt
//! records them; the audit replaced every API key by its tenant label
//! before signing, so no key reaches the page. Everything comes from the
//! signed predicates; the document around it ([`crate::site`]) has the
//! browser check every receipt again.

use kvw_evidence::audit::{AuditPredicate, GateResult, GATES};
use leptos::prelude::*;

use crate::audit_page::{result_words, Exchanges};
use crate::i18n::Lang;

/// File name of the report page in each language folder.
pub const REPORT_PAGE: &str = "report.html";

/// One gate of the report: the receipt's stem and what it holds.
#[derive(Debug, Clone)]
pub struct ReportGate {
    pub stem: String,
    pub predicate: AuditPredicate,
}

/// What to do about a gate's result, in a sentence.
pub fn remedy(gate: &str, result: GateResult, lang: Lang) -> &'static str {
    match (result, gate) {
        (GateResult::Pass, _) => lang.pick("Nothing to do.", "Nulla da fare."),
        (GateResult::Inconclusive, _) => lang.pick(
            "Give the audit what it lacked (see the evidence: a size the server does not count or declare, e.g. --context-len or --pool-tokens) and run it again.",
            "Fornire all'audit ciò che gli mancava (si veda la motivazione: una dimensione che il server non conta o non dichiara, per esempio --context-len o --pool-tokens) e ripeterlo.",
        ),
        (GateResult::Fail, "prefix-cache") => lang.pick(
            "Keep each tenant's prefix cache to itself: a per-tenant cache salt (vLLM's cache_salt request field) or a cache keyed by tenant.",
            "Tenere separata la cache dei prefissi di ogni tenant: un sale di cache per tenant (il campo cache_salt delle richieste di vLLM) o una cache indicizzata per tenant.",
        ),
        (GateResult::Fail, "capacity") => lang.pick(
            "Size the KV pool at least as large as the context, or refuse a prompt beyond the pool with a clear 4xx.",
            "Dimensionare il pool KV almeno quanto il contesto, oppure rifiutare con un 4xx chiaro i prompt che superano il pool.",
        ),
        (GateResult::Fail, "admission") => lang.pick(
            "Refuse a prompt the server cannot hold at once, with its 4xx: upgrade to a release with PR #38935.",
            "Rifiutare subito, con il suo 4xx, un prompt che il server non può contenere: aggiornare a una versione che include la PR #38935.",
        ),
        (GateResult::Fail, "isolation" | "lifetime") => lang.pick(
            "Upgrade to a release with PR #36988 and PR #38935 (a request's pages are released only once nothing writes to them: deferred release); until then do not share the server between tenants.",
            "Aggiornare a una versione che include le PR #36988 e #38935 (le pagine di una richiesta vengono liberate solo quando nessuno vi scrive più: rilascio differito); fino ad allora non condividere il server tra tenant diversi.",
        ),
        (GateResult::Fail, "status") => lang.pick(
            "Answer a prompt past the context with a 4xx, never with a 200.",
            "Rispondere con un 4xx, mai con un 200, a un prompt che supera il contesto.",
        ),
        (GateResult::Fail, _) => lang.pick(
            "See the gate's page for what failed.",
            "Si veda la pagina del gate per ciò che non è andato.",
        ),
    }
}

/// Fails first, then inconclusive, then passes; within each, the order of
/// [`GATES`].
fn order(g: &ReportGate) -> (u8, usize) {
    let rank = match g.predicate.result {
        GateResult::Fail => 0,
        GateResult::Inconclusive => 1,
        GateResult::Pass => 2,
    };
    let at = GATES
        .iter()
        .position(|n| *n == g.predicate.gate)
        .unwrap_or(GATES.len());
    (rank, at)
}

/// The gates in the report's order.
pub fn sorted(mut gates: Vec<ReportGate>) -> Vec<ReportGate> {
    gates.sort_by_key(order);
    gates
}

/// The findings: title, what was audited, one row per gate. `pages` is
/// the way from this page to the language folder holding the gates' pages
/// (`en/` from the site root, empty inside it).
#[component]
pub fn ReportFindings(gates: Vec<ReportGate>, lang: Lang, pages: String) -> impl IntoView {
    let mut endpoints: Vec<String> = gates.iter().map(|g| g.predicate.endpoint.clone()).collect();
    endpoints.sort();
    endpoints.dedup();
    let count = |r: GateResult| gates.iter().filter(|g| g.predicate.result == r).count();
    let summary = format!(
        "{} {} · {} {} · {} {}",
        count(GateResult::Fail),
        lang.pick("failed", "falliti"),
        count(GateResult::Inconclusive),
        lang.pick("inconclusive", "non conclusi"),
        count(GateResult::Pass),
        lang.pick("passed", "superati"),
    );
    let version = gates
        .first()
        .map(|g| format!("kvw {}", g.predicate.auditor_version))
        .unwrap_or_default();
    let rows = gates
        .into_iter()
        .map(|g| {
            let p = g.predicate;
            let (word, slug) = result_words(p.result, lang);
            let href = format!("{pages}{}.html", g.stem);
            let exchanges = format!("#gate-{}", p.gate);
            let todo = remedy(&p.gate, p.result, lang);
            view! {
                <tr class="rp-finding" data-gate=p.gate.clone() data-result=slug>
                    <th scope="row"><a href=href>{p.gate.clone()}</a></th>
                    <td class="rp-result"><strong>{word}</strong></td>
                    <td class="rp-evidence" lang="en">{p.reason}</td>
                    <td class="rp-todo">{todo}</td>
                    <td><a href=exchanges>{lang.pick("exchanges", "scambi")}</a></td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <article class="rp" data-report="audit">
            <h1>{lang.pick("Audit report", "Rapporto di audit")}</h1>
            <dl class="au-facts">
                <dt>{lang.pick("Endpoint", "Endpoint")}</dt><dd><code>{endpoints.join(", ")}</code></dd>
                <dt>{lang.pick("Auditor", "Revisore")}</dt><dd><code>{version}</code></dd>
                <dt>{lang.pick("Gates", "Gate")}</dt><dd>{summary}</dd>
            </dl>
            <p>{lang.pick(
                "Each gate below is a signed receipt of kvw audit: what it sent, what the server answered and what that shows. The evidence column quotes the receipt's own reason.",
                "Ogni gate qui sotto è una ricevuta firmata di kvw audit: che cosa ha inviato, che cosa ha risposto il server e che cosa ne risulta. La colonna delle prove riporta la motivazione della ricevuta stessa, in inglese.",
            )}</p>
            <h2>{lang.pick("Findings", "Risultati")}</h2>
            <table class="rp-findings">
                <thead><tr>
                    <th scope="col">{lang.pick("Gate", "Gate")}</th>
                    <th scope="col">{lang.pick("Result", "Esito")}</th>
                    <th scope="col">{lang.pick("Evidence", "Prove")}</th>
                    <th scope="col">{lang.pick("What to do", "Che cosa fare")}</th>
                    <th scope="col">{lang.pick("Quoted", "Citati")}</th>
                </tr></thead>
                <tbody>{rows}</tbody>
            </table>
        </article>
    }
}

/// Each gate's exchanges, quoted; `root` is the way to the site's root.
#[component]
pub fn ReportExchanges(gates: Vec<ReportGate>, lang: Lang, root: String) -> impl IntoView {
    let sections = gates
        .into_iter()
        .map(|g| {
            let p = g.predicate;
            let (word, slug) = result_words(p.result, lang);
            let receipt_href = format!("{root}receipts/{}.json", g.stem);
            let count = p.exchanges.len();
            view! {
                <section class="rp-gate" id=format!("gate-{}", p.gate) data-result=slug>
                    <h3>{format!("{} — {word}", p.gate)}</h3>
                    <p lang="en">{p.reason}</p>
                    <p>{format!("{count} {}", lang.pick("exchanges, API keys replaced by tenant labels:", "scambi, con le chiavi API sostituite dalle etichette dei tenant:"))}</p>
                    <Exchanges exchanges=p.exchanges receipt_href=receipt_href lang=lang/>
                </section>
            }
        })
        .collect_view();
    view! {
        <article class="rp-details">
            <h2>{lang.pick("Exchanges, gate by gate", "Scambi, gate per gate")}</h2>
            {sections}
        </article>
    }
}
