//! The replay of a randomized-run receipt: the shrunk failing case, event
//! by event, on the page grid.
//!
//! A fuzz receipt (predicate `fuzz/v2`,
//! [`kvw_evidence::scenario::FuzzPredicate`]) says how many random
//! interleavings ran under a set of fixes and, when an invariant broke, the
//! shortest failing case it shrank to: its requests and faults, the
//! invariant, the request that broke it and after which event, every typed
//! event, and page pictures of that request. The page states the counts and
//! the invariant, links the breaking step, and walks the events with the
//! same steps the scenario replay draws ([`crate::scenario_page::EventSteps`]).

use kvw_evidence::scenario::{FuzzCounterexample, FuzzPredicate};
use kvw_evidence::EventKind;
use leptos::prelude::*;

use crate::i18n::Lang;
use crate::scenario_page::{requests_list, EventSteps};

/// What broke, in the reader's language. The receipt's `detail` is the
/// engine's English sentence; the Italian one is made from the same facts:
/// the invariant, the request, and the event after which it broke.
fn broke_detail(c: &FuzzCounterexample, lang: Lang) -> String {
    if lang == Lang::En {
        return c.detail.clone();
    }
    let rid = &c.rid;
    let event = c.events.get(c.at_event as usize).map(|e| &e.kind);
    match (c.invariant.as_str(), event) {
        ("isolation", Some(EventKind::Attend { foreign_pages, .. })) => {
            if *foreign_pages == 1 {
                format!("{rid} ha letto 1 pagina scritta da un'altra richiesta")
            } else {
                format!("{rid} ha letto {foreign_pages} pagine scritte da un'altra richiesta")
            }
        }
        ("isolation", _) => format!("{rid} ha letto pagine scritte da un'altra richiesta"),
        (
            "double-free",
            Some(EventKind::Resource {
                resource, index, ..
            }),
        ) => format!("{rid}: {resource:?} {index} liberato due volte o ceduto mentre era in uso"),
        ("double-free", _) => "pagine KV liberate due volte".to_string(),
        ("write-after-reassign", _) => format!(
            "una scrittura di {rid} è arrivata in una pagina di decode che non deteneva più"
        ),
        ("answered-twice", _) => format!("{rid} ha ricevuto due risposte"),
        ("rejected-answered-200", _) => {
            format!("{rid} è stata rifiutata dal controllo dell'input e ha avuto risposta 200")
        }
        ("unanswered", _) => format!("{rid} non ha mai avuto risposta"),
        (other, _) => format!("{rid} ha violato {other}"),
    }
}

/// A fuzz receipt: counts, and the shrunk counterexample step by step.
#[component]
pub fn FuzzView(stem: String, predicate: FuzzPredicate, lang: Lang) -> impl IntoView {
    let p = predicate;
    let fixes = lang.fix_set(kvw_evidence::FixSet::new(&p.fixes));
    let counts = format!(
        "{} {}, {} {}, {} {fixes}: {} {}, {} {}",
        p.runs,
        lang.pick("runs", "esecuzioni"),
        lang.pick("seed", "seme"),
        p.seed,
        lang.pick("fixes", "correzioni"),
        p.violating_runs,
        lang.pick("broke an invariant", "hanno violato un invariante"),
        p.stalled_runs,
        lang.pick("stalled on a lost ack", "bloccate da un ack perso"),
    );
    let by = p
        .by_invariant
        .iter()
        .map(|c| view! { <li><code>{c.invariant.clone()}</code>": "{c.runs}</li> })
        .collect_view();
    let receipt_href = format!("../receipts/{stem}.json");
    let case = p.counterexample.map(|c| {
        let at = format!("#step-{}", c.at_event + 1);
        let broke = format!(
            "{} {} — {} ({}) {} {}",
            lang.pick("Broken:", "Violato:"),
            c.invariant,
            c.rid,
            broke_detail(&c, lang),
            lang.pick("after step", "dopo il passo"),
            c.at_event + 1
        );
        let shrunk = format!(
            "{} {} {} {} {}",
            lang.pick("Run", "Esecuzione"),
            c.run,
            lang.pick("shrunk from", "ridotta da"),
            c.original_requests,
            lang.pick(
                "request(s) to the requests below",
                "richieste a quelle qui sotto"
            ),
        );
        view! {
            <section class="fz-case" data-invariant=c.invariant.clone()>
                <h2>{lang.pick("Shortest failing case", "Caso di errore più breve")}</h2>
                <p class="fz-broke"><a href=at>{broke}</a></p>
                <p>{shrunk}</p>
                {requests_list(&c.run_requests, lang)}
                <h2>{lang.pick("Events, step by step", "Eventi, passo per passo")}</h2>
                <EventSteps events=c.events pages=c.pages receipt_href=receipt_href lang=lang/>
            </section>
        }
    });
    view! {
        <article class="fz" data-receipt=stem.clone()>
            <h1>{format!("{} — {stem}", lang.pick("Randomized runs", "Esecuzioni casuali"))}</h1>
            <p class="fz-counts">{counts}</p>
            <ul class="fz-by">{by}</ul>
            {case}
        </article>
    }
}
