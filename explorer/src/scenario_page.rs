//! The replay of a scenario receipt: its typed events, step by step, on the
//! page grid.
//!
//! A scenario receipt (predicate `scenario/v3`,
//! [`kvw_evidence::scenario::ScenarioPredicate`]) records one scripted run
//! under a set of fixes: what it mirrors upstream, its guard, what was
//! expected and observed (typed facts, said in the page's language by
//! [`kvw_words::scenario`]), every typed event, and pictures of the decode or
//! prefill pool after the events that changed it. This module draws the run
//! as an ordered list a reader scans without any script: every event is a
//! step with an `#step-N` anchor, its time, request, worker and recorded
//! fields, and where the receipt pictures the pools after it, the same page
//! grid the probe replay draws ([`crate::components::pool::PoolView`]).
//! Steps without a picture say which step's picture still holds.
//!
//! Everything drawn comes from the signed predicate; nothing is re-run.

use std::collections::BTreeMap;

use kvw_evidence::judged::GuardRule;
use kvw_evidence::scenario::{EventPages, ScenarioPredicate, ScenarioStatus};
use kvw_evidence::{Event, PageView};
use kvw_words::scenario as words;
use leptos::prelude::*;

use crate::components::pool::PoolView;
use crate::i18n::Lang;
use crate::limits::{truncation_note, MAX_DRAWN_PICTURES, MAX_DRAWN_STEPS};

/// A status in the reader's language.
pub fn status_text(s: ScenarioStatus, lang: Lang) -> &'static str {
    words::status(s, lang)
}

/// The status as a stable attribute value (`pass`, `fail`, `not-exercised`).
pub fn status_slug(s: ScenarioStatus) -> &'static str {
    match s {
        ScenarioStatus::Pass => "pass",
        ScenarioStatus::Fail => "fail",
        ScenarioStatus::NotExercised => "not-exercised",
    }
}

/// A rendered sentence: its words as text, its code in `<code>`.
pub fn said_view(said: words::Said) -> AnyView {
    said.0
        .into_iter()
        .map(|p| match p {
            words::Piece::Words(w) => w.into_any(),
            words::Piece::Code(c) => view! { <code>{c}</code> }.into_any(),
        })
        .collect_view()
        .into_any()
}

/// A guard's switches and rule, in the reader's language.
fn guard_view(fixes: &[kvw_evidence::Fix], rule: Option<GuardRule>, lang: Lang) -> AnyView {
    let switches = said_view(words::fix_list(fixes, lang));
    match rule {
        Some(rule) => {
            view! { {switches}" ("{said_view(words::guard_rule(rule, lang))}")" }.into_any()
        }
        None => switches,
    }
}

/// Index of the first event where two runs part ways (request or typed
/// event differ; times are left out, they may shift without changing what
/// happened), or `None` when one run's events are the other's.
pub fn first_event_difference(a: &[Event], b: &[Event]) -> Option<usize> {
    let same = |x: &Event, y: &Event| x.rid == y.rid && x.kind == y.kind;
    match a.iter().zip(b).position(|(x, y)| !same(x, y)) {
        Some(i) => Some(i),
        None if a.len() != b.len() => Some(a.len().min(b.len())),
        None => None,
    }
}

/// This run against the same scenario under the other fixes: the judged
/// facts side by side and the first event where the two part ways.
#[component]
fn TwinCompare(
    this: ScenarioPredicate,
    stem: String,
    twin: ScenarioPredicate,
    lang: Lang,
) -> impl IntoView {
    let fixes = |p: &ScenarioPredicate| lang.fix_set(kvw_evidence::FixSet::new(&p.fixes));
    let heading = view! { {lang.pick("Against the same scenario with fixes ", "A confronto con lo stesso scenario con correzioni ")}{fixes(&twin)} };
    let rows: Vec<(&str, AnyView, AnyView)> = vec![
        (
            lang.pick("Fixes on", "Correzioni attive"),
            fixes(&this).into_any(),
            fixes(&twin).into_any(),
        ),
        (
            lang.pick("Status", "Stato"),
            status_text(this.status, lang).into_any(),
            status_text(twin.status, lang).into_any(),
        ),
        (
            lang.pick("Observed", "Osservato"),
            said_view(words::observed(&this.observed, lang)),
            said_view(words::observed(&twin.observed, lang)),
        ),
        (
            lang.pick("Events", "Eventi"),
            this.events.len().into_any(),
            twin.events.len().into_any(),
        ),
    ];
    let line = |events: &[Event], i: usize| {
        events
            .get(i)
            .map(|e| kvw_words::probe::event_line(e, lang))
            .unwrap_or_else(|| {
                lang.pick("(no more events)", "(nessun altro evento)")
                    .to_string()
            })
    };
    let difference = match first_event_difference(&this.events, &twin.events) {
        Some(i) => view! {
            <p class="sc-diverge">
                <strong>{match lang {
                    Lang::En => format!("The runs first differ at event {}: ", i + 1),
                    Lang::It => format!("Le due esecuzioni divergono per la prima volta all'evento {}: ", i + 1),
                }}</strong>
                <a href=format!("#step-{}", i + 1)>{line(&this.events, i)}</a>
                {lang.pick(" here, against ", " qui, contro ")}
                <a href=format!("{stem}.html#step-{}", i + 1)>{line(&twin.events, i)}</a>
                {lang.pick(" there.", " là.")}
            </p>
        }
        .into_any(),
        None => view! { <p class="sc-diverge">{lang.pick("The two runs record the same events.", "Le due esecuzioni registrano gli stessi eventi.")}</p> }.into_any(),
    };
    view! {
        <section class="sc-twin" aria-labelledby="sc-twin-h">
            <h2 id="sc-twin-h">{heading}</h2>
            <table class="sc-twin-table">
                <thead><tr>
                    <th scope="col">{lang.pick("Fact", "Dato")}</th>
                    <th scope="col">{lang.pick("This run", "Questa esecuzione")}</th>
                    <th scope="col"><a href=format!("{stem}.html")>{lang.pick("That run", "L'altra esecuzione")}</a></th>
                </tr></thead>
                <tbody>
                    {rows.into_iter().map(|(k, a, b)| view! { <tr><th scope="row">{k}</th><td>{a}</td><td>{b}</td></tr> }).collect_view()}
                </tbody>
            </table>
            {difference}
        </section>
    }
}

/// A JSON value of an event field as plain text.
fn field_text(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::Null => "None".into(),
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Object(map) => map
            .iter()
            .map(|(k, v)| format!("{k} = {}", field_text(v)))
            .collect::<Vec<_>>()
            .join(", "),
        serde_json::Value::Array(items) => format!(
            "[{}]",
            items.iter().map(field_text).collect::<Vec<_>>().join(", ")
        ),
        other => other.to_string(),
    }
}

/// An event's kind (its `kind` tag, e.g. `kv_send`) and its recorded
/// fields as `name = value` pairs, in the receipt's own terms.
pub fn event_fields(event: &Event) -> (String, Vec<(String, String)>) {
    let Ok(map) = kvw_evidence::tagged::flatten(&event.kind) else {
        return (String::new(), Vec::new());
    };
    let kind = map.get("kind").map(field_text).unwrap_or_default();
    let fields = map
        .iter()
        .filter(|(k, _)| k.as_str() != "kind")
        .map(|(k, v)| (k.clone(), field_text(v)))
        .collect();
    (kind, fields)
}

/// A step's pool picture, as the page draws it.
#[derive(Clone)]
enum Picture {
    /// The pools after this step.
    Drawn(PageView),
    /// The receipt pictures this step, past the page's limit.
    NotDrawn,
    /// No picture of this step: the one of step `n` still holds.
    HeldFrom(usize),
    /// No picture yet.
    None,
}

#[component]
fn ScenarioStep(n: usize, event: Event, picture: Picture, lang: Lang) -> impl IntoView {
    let id = format!("step-{n}");
    let href = format!("#{id}");
    let (kind, fields) = event_fields(&event);
    let head = format!(
        "{n}. {} — {} — {kind}",
        crate::fixed::duration_us(event.at_us),
        event.rid
    );
    let line = kvw_words::probe::event_line(&event, lang);
    let grid = match picture {
        Picture::Drawn(view) => view! { <PoolView view=view lang=lang/> }.into_any(),
        Picture::NotDrawn => view! {
            <p class="sc-held">{lang.pick("Pool picture not drawn here (page limit); the receipt holds it", "Immagine del pool non disegnata qui (limite della pagina); la ricevuta la contiene")}</p>
        }
        .into_any(),
        Picture::HeldFrom(from) => {
            let link = format!("#step-{from}");
            view! {
                <p class="sc-held">
                    {lang.pick("Pages unchanged since ", "Pagine invariate dal ")}
                    <a href=link>{format!("{} {from}", lang.pick("step", "passo"))}</a>
                </p>
            }
            .into_any()
        }
        Picture::None => view! {
            <p class="sc-held">{lang.pick("No pages reserved yet", "Nessuna pagina ancora prenotata")}</p>
        }
        .into_any(),
    };
    view! {
        <li id=id class="sc-step" data-kind=kind.clone() data-rid=event.rid.clone()>
            <h3><a href=href>{head}</a></h3>
            <p class="sc-line">{line}</p>
            // The event's raw fields are for the reader who checks the
            // receipt against the sentence above: folded away.
            <details class="sc-fields">
                <summary>{lang.pick("The event as recorded", "L'evento come registrato")}</summary>
                <dl>
                    {fields.into_iter().map(|(k, v)| view! { <dt><code>{k}</code></dt><dd><code>{v}</code></dd> }).collect_view()}
                </dl>
            </details>
            {grid}
        </li>
    }
}

/// Typed events as numbered steps (`#step-N`), each with the page grid
/// where the receipt pictures the pools after it, within the page's limits
/// ([`crate::limits`]; `receipt_href` is linked from the note when they cut
/// the list short).
#[component]
pub fn EventSteps(
    events: Vec<Event>,
    pages: Vec<EventPages>,
    receipt_href: String,
    lang: Lang,
) -> impl IntoView {
    let note = truncation_note(events.len(), Some(pages.len()), &receipt_href, lang);
    let mut pictures: BTreeMap<usize, PageView> = pages
        .into_iter()
        .map(|e| (e.event as usize, e.view))
        .collect();
    let (mut held, mut drawn) = (None, 0);
    let steps = events
        .into_iter()
        .take(MAX_DRAWN_STEPS)
        .enumerate()
        .map(|(i, event)| {
            let n = i + 1;
            let picture = match pictures.remove(&i) {
                Some(view) if drawn < MAX_DRAWN_PICTURES => {
                    drawn += 1;
                    held = Some(n);
                    Picture::Drawn(view)
                }
                Some(_) => {
                    held = None;
                    Picture::NotDrawn
                }
                None => held.map_or(Picture::None, Picture::HeldFrom),
            };
            view! { <ScenarioStep n=n event=event picture=picture lang=lang/> }
        })
        .collect_view();
    view! { {note}<ol class="sc-steps">{steps}</ol> }
}

/// The requests of a run, one line each.
pub fn requests_list(requests: &[kvw_evidence::RequestInfo], lang: Lang) -> impl IntoView {
    let items = requests
        .iter()
        .map(|r| {
            let text = format!(
                "{} ({}, {} {}, {} {}){}",
                r.rid,
                r.tenant,
                r.prompt_len,
                lang.pick("prompt tokens", "token di prompt"),
                lang.pick("arrives at", "arriva a"),
                crate::fixed::duration_us(r.arrival_us),
                if r.probed {
                    lang.pick(" — the pictured request", " — la richiesta nelle immagini")
                } else {
                    ""
                }
            );
            view! { <li>{text}</li> }
        })
        .collect_view();
    view! { <ul class="sc-requests">{items}</ul> }
}

/// A scenario receipt: what it is, its result, and its events step by step.
#[component]
pub fn ScenarioView(
    stem: String,
    predicate: ScenarioPredicate,
    lang: Lang,
    /// The gates page, when the site has one.
    gates_href: Option<String>,
    /// The same scenario's receipt under the other set of fixes, if the
    /// bundle has it: `(stem, predicate)`.
    twin: Option<(String, ScenarioPredicate)>,
) -> impl IntoView {
    let p = predicate;
    let twin = twin.map(|(twin_stem, twin)| view! { <TwinCompare this=p.clone() stem=twin_stem twin=twin lang=lang/> });
    let info = p.scenario;
    let fixes = lang.fix_set(kvw_evidence::FixSet::new(&p.fixes));
    let upstream = info.upstream.map(|u| {
        let text = format!(
            "{} :: {}{}",
            u.path,
            u.test,
            u.subtest.map(|s| format!(" [{s}]")).unwrap_or_default()
        );
        // Only a plain http(s) address becomes a link; anything else is
        // shown as the text it is.
        let link = match crate::links::web_href(&u.url) {
            Some(href) => view! { <a href=href.to_string()>{text}</a> }.into_any(),
            None => view! { {text}" (" <code class="sc-unlinked">{u.url.clone()}</code> ")" }.into_any(),
        };
        view! {
            <p class="sc-upstream">{lang.pick("Mirrors the upstream test ", "Rispecchia il test upstream ")}{link}</p>
        }
    });
    let guard = guard_view(&info.guard_fixes, info.guard_rule, lang);
    let text = words::scenario_text(&info.name);
    let closed_by = match text {
        Some(t) => said_view(t.closed_by(lang)),
        None => "—".into_any(),
    };
    let description =
        text.map(|t| view! { <p class="sc-description">{said_view(t.description(lang))}</p> });
    let facts: Vec<(&str, AnyView)> = vec![
        (
            lang.pick("Gate", "Gate"),
            view! { <code>{info.gate.clone()}</code> }.into_any(),
        ),
        (lang.pick("Fixes on", "Correzioni attive"), fixes.into_any()),
        (lang.pick("Guard", "Difesa"), guard),
        (lang.pick("Closed by", "Chiuso da"), closed_by),
        (
            lang.pick("Expected", "Atteso"),
            said_view(words::expected(&p.expected, lang)),
        ),
        (
            lang.pick("Observed", "Osservato"),
            said_view(words::observed(&p.observed, lang)),
        ),
        (
            lang.pick("Why", "Perché"),
            said_view(words::why(&p.why, lang)),
        ),
    ];
    let requests = requests_list(&p.requests, lang);
    let receipt_href = format!("../receipts/{stem}.json");
    let steps =
        view! { <EventSteps events=p.events pages=p.pages receipt_href=receipt_href lang=lang/> };
    let status = status_text(p.status, lang);
    let slug = status_slug(p.status);
    let back = gates_href.map(|href| {
        view! { <p class="sc-back"><a href=href>{lang.pick("All gates", "Tutti i gate")}</a></p> }
    });
    view! {
        <article class="sc" data-receipt=stem.clone() data-status=slug>
            {back}
            <h1>{format!("{} — {}", lang.pick("Scenario", "Scenario"), info.name)}</h1>
            {description}
            {upstream}
            <p class="sc-status"><strong>{status}</strong></p>
            <dl class="sc-facts">
                {facts.into_iter().map(|(k, v)| view! { <dt>{k}</dt><dd>{v}</dd> }).collect_view()}
            </dl>
            {twin}
            <h2>{lang.pick("Requests", "Richieste")}</h2>
            {requests}
            <h2>{lang.pick("Events, step by step", "Eventi, passo per passo")}</h2>
            {steps}
        </article>
    }
}
