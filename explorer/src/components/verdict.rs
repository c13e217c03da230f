//! What the run amounts to, and the configuration that produced it.

use std::sync::Arc;

use kvw_evidence::{FreeListPolicy, ProbePredicate, Scale};
use leptos::prelude::*;

use crate::catalog::switch_set;
use crate::i18n::Lang;

/// The free-list policy as the config table names it.
fn free_list_name(policy: FreeListPolicy) -> &'static str {
    match policy {
        FreeListPolicy::Fifo => "FIFO",
        FreeListPolicy::Lifo => "LIFO",
    }
}

#[component]
fn ConfigList(predicate: Arc<ProbePredicate>, lang: Lang) -> impl IntoView {
    let c = &predicate.config;
    let scale = match c.scale {
        Scale::Walkthrough => lang.pick("walkthrough", "dimostrativa"),
        Scale::Incident => lang.pick(
            "incident (production numbers)",
            "incidente (numeri di produzione)",
        ),
    };
    let switches = switch_set(&predicate);
    let fixes = if switches.is_empty() {
        lang.pick("none", "nessuna").to_string()
    } else {
        switches.join(", ")
    };
    let rows: Vec<(&'static str, String)> = vec![
        (lang.pick("Scale", "Scala"), scale.to_string()),
        (
            lang.pick("Context length", "Lunghezza del contesto"),
            c.context_len.to_string(),
        ),
        (
            lang.pick("Prefill pool (tokens)", "Pool di prefill (token)"),
            c.prefill_pool_tokens.to_string(),
        ),
        (
            lang.pick("Decode pool (tokens)", "Pool di decode (token)"),
            c.decode_pool_tokens.to_string(),
        ),
        (
            lang.pick("Page size", "Dimensione pagina"),
            c.page_size.to_string(),
        ),
        (
            lang.pick("Input cap", "Limite di input"),
            c.prefill_input_cap().to_string(),
        ),
        (
            lang.pick("Free list", "Lista libera"),
            free_list_name(c.free_list).to_string(),
        ),
        (lang.pick("Fixes on", "Correzioni attive"), fixes),
        (lang.pick("Seed", "Seme"), c.seed.to_string()),
        (
            lang.pick("Engine", "Motore"),
            format!("{} @ {}", predicate.engine.version, predicate.engine.commit),
        ),
        (
            lang.pick("Backend", "Backend"),
            predicate.backend.device.clone(),
        ),
    ];
    view! {
        <details class="config">
            <summary>{lang.pick("Configuration and counters", "Configurazione e contatori")}</summary>
            <dl>
                {rows.into_iter().map(|(k, v)| view! { <dt>{k}</dt><dd>{v}</dd> }).collect_view()}
            </dl>
            <pre class="counters">{serde_json::to_string_pretty(&predicate.verdict.counters).unwrap_or_default()}</pre>
        </details>
    }
}

#[component]
pub fn VerdictPanel(predicate: Arc<ProbePredicate>, lang: Lang) -> impl IntoView {
    let v = &predicate.verdict;
    let (css, word) = if v.leak {
        ("verdict leak", lang.pick("LEAK", "FUGA"))
    } else {
        ("verdict safe", lang.pick("NO LEAK", "NESSUNA FUGA"))
    };
    view! {
        <section class=css aria-labelledby="verdict-h" id="kvw-verdict">
            <h2 id="verdict-h"><span class="verdict-word">{word}</span>" · "<span class="verdict-http">{format!("HTTP {}", v.http_status)}</span></h2>
            <p class="outcome" id="kvw-outcome">{kvw_words::probe::outcome_line(&predicate, lang)}</p>
            <ul class="facts">
                <li>{lang.pick("Foreign pages read: ", "Pagine altrui lette: ")}<strong>{v.foreign_pages_read.to_string()}</strong></li>
                <li>{lang.pick("Canaries leaked: ", "Canary trapelati: ")}<strong>{v.canaries_leaked.len().to_string()}</strong></li>
                <li>{lang.pick("Correct answer: ", "Risposta corretta: ")}<strong>{if v.correct_answer { lang.pick("yes", "sì") } else { lang.pick("no", "no") }}</strong></li>
            </ul>
            {(!predicate.assumptions.is_empty()).then(|| view! {
                <details class="assumptions">
                    <summary>{lang.pick("Model assumptions this run rests on", "Ipotesi del modello su cui poggia questa esecuzione")}" ("{predicate.assumptions.len()}")"</summary>
                    <ul>
                        {predicate.assumptions.iter().map(|a| view! {
                            <li>{kvw_words::probe::assumption_text(a.id, lang)}" "<code>{a.alternative.clone()}</code></li>
                        }).collect_view()}
                    </ul>
                </details>
            })}
            <ConfigList predicate=predicate.clone() lang=lang/>
        </section>
    }
}
