//! The replay of a model-check receipt: the counterexample path, step by step.
//!
//! A probe receipt records one run; a model-check receipt (predicate
//! `model-check/v2`, [`kvw_evidence::model_check`]) records a whole state
//! space and, when a property fails, the shortest path to the failure. This
//! module draws that path as an ordered list a reader scans without any
//! script: every step has an `#step-N` anchor and says which actor took
//! which action for which request, the engine decision it took and the
//! `Req` fields that decision read, which decode pages were reserved,
//! written, read or freed and by whom, and the decode pool after the step
//! with every page coloured by its owner. The property the path violates
//! and the facts of the violation close the list.
//!
//! Everything drawn comes from the signed predicate; nothing is re-run.

use kvw_evidence::model_check::{ModelCheckPredicate, PageSnapshot, PathStep, ViolationFact};
use kvw_evidence::FinishReason;
use kvw_words::probe::finish_reason_or_none;
use leptos::prelude::*;

use crate::i18n::Lang;
use crate::limits::{truncation_note, MAX_DRAWN_STEPS};

/// A stable hue per request (`r0`, `r1`, ...), so a reader can follow an owner.
fn owner_hue(rid: &str) -> u32 {
    let n: u32 = rid
        .trim_start_matches(|c: char| !c.is_ascii_digit())
        .parse()
        .unwrap_or(0);
    (n * 137 + 10) % 360
}

/// Inline colour of a page: its owner's hue, grey when free.
fn page_style(owner: Option<&str>) -> String {
    match owner {
        Some(o) => format!(
            "display:inline-block;min-width:4.5em;margin:1px;padding:2px 4px;border:2px solid hsl({h},60%,30%);background:hsl({h},70%,85%);color:#000",
            h = owner_hue(o)
        ),
        None => "display:inline-block;min-width:4.5em;margin:1px;padding:2px 4px;border:1px dashed #777;background:#eee;color:#333".to_string(),
    }
}

/// What changed in the decode pool from `before` to `after`, in words.
pub fn page_changes(before: &[PageSnapshot], after: &[PageSnapshot], lang: Lang) -> Vec<String> {
    let say = |en: &'static str, it: &'static str, page: u32, who: &str| {
        format!(
            "{} {page} {} {who}",
            lang.pick("page", "pagina"),
            lang.pick(en, it)
        )
        .trim_end()
        .to_string()
    };
    let mut out = Vec::new();
    for a in after {
        let b = before.iter().find(|b| b.page == a.page);
        let (b_owner, b_writer) = b.map_or((None, None), |b| (b.owner.clone(), b.writer.clone()));
        if a.owner != b_owner {
            match (&b_owner, &a.owner) {
                (_, Some(o)) => out.push(say("reserved by", "prenotata da", a.page, o)),
                (Some(o), None) => out.push(say("freed by", "liberata da", a.page, o)),
                (None, None) => {}
            }
        }
        if a.writer != b_writer {
            match &a.writer {
                Some(w) => out.push(say("written by", "scritta da", a.page, w)),
                None => out.push(say("scrubbed", "azzerata", a.page, "")),
            }
        }
    }
    out
}

/// The `Req` fields a step's decision read, as `name = value` pairs.
fn req_fields(step: &PathStep, lang: Lang) -> Vec<(&'static str, String)> {
    let r = &step.request;
    let opt = |o: &Option<FinishReason>| finish_reason_or_none(o.as_ref());
    let yes_no = |b: bool| lang.pick(if b { "yes" } else { "no" }, if b { "sì" } else { "no" });
    vec![
        (
            lang.pick("prompt tokens sent", "token di prompt inviati"),
            r.original_len.to_string(),
        ),
        (
            lang.pick("prefill stage", "fase di prefill"),
            r.prefill_stage.clone(),
        ),
        (
            "prefill len(origin_input_ids)",
            r.prefill_input_len.to_string(),
        ),
        ("prefill to_finish", opt(&r.prefill_to_finish)),
        ("prefill finished_reason", opt(&r.prefill_finished_reason)),
        (
            lang.pick("decode stage", "fase di decode"),
            r.decode_stage.clone(),
        ),
        ("decode to_finish", opt(&r.decode_to_finish)),
        ("decode finished_reason", opt(&r.decode_finished_reason)),
        (
            lang.pick("decode page table", "tabella delle pagine di decode"),
            format!(
                "[{}]",
                r.decode_table
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
        (
            lang.pick("writes posted / landed", "scritture inviate / arrivate"),
            format!("{} / {}", r.writes_posted, r.writes_landed),
        ),
        (
            lang.pick("final chunk sent", "ultimo blocco inviato"),
            yes_no(r.final_sent).to_string(),
        ),
        (
            lang.pick("answers", "risposte"),
            format!(
                "[{}]",
                r.answers
                    .iter()
                    .map(u16::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
    ]
}

#[component]
fn Pool(pages: Vec<PageSnapshot>, read: Vec<u32>, lang: Lang) -> impl IntoView {
    view! {
        <div class="mc-pool">
            {pages
                .into_iter()
                .map(|p| {
                    let style = page_style(p.owner.as_deref());
                    let attr = p.owner.clone().unwrap_or_else(|| "free".into());
                    let owner = p
                        .owner
                        .clone()
                        .unwrap_or_else(|| lang.pick("free", "libera").into());
                    let writer = p
                        .writer
                        .clone()
                        .unwrap_or_else(|| lang.pick("never written", "mai scritta").into());
                    let mark = if read.contains(&p.page) {
                        lang.pick(" · read", " · letta")
                    } else {
                        ""
                    };
                    let title = match lang {
                        Lang::En => format!("page {}: owner {owner}, bytes by {writer}", p.page),
                        Lang::It => format!("pagina {}: proprietario {owner}, byte di {writer}", p.page),
                    };
                    let text = format!("{}: {owner} · {writer}{mark}", p.page);
                    view! {
                        <span class="mc-page" style=style title=title data-owner=attr>
                            {text}
                        </span>
                    }
                })
                .collect_view()}
        </div>
    }
}

#[component]
fn Step(
    step: PathStep,
    changes: Vec<String>,
    read: Vec<u32>,
    before: Option<kvw_evidence::model_check::ReqSnapshot>,
    lang: Lang,
) -> impl IntoView {
    let id = format!("step-{}", step.index);
    let href = format!("#{id}");
    let head = format!(
        "{}. {} — {} ({}, tenant {})",
        step.index, step.actor, step.action, step.rid, step.tenant
    );
    let decision = step.decision.as_ref().map(kvw_words::model_check::decision);
    // What the decision read: the request as the previous step left it.
    let read_req = before.filter(|_| decision.is_some()).map(|b| {
        let opt = |o: &Option<FinishReason>| finish_reason_or_none(o.as_ref());
        format!(
            "prefill to_finish = {}, prefill finished_reason = {}, decode to_finish = {}, decode finished_reason = {}, len(origin_input_ids) = {}",
            opt(&b.prefill_to_finish),
            opt(&b.prefill_finished_reason),
            opt(&b.decode_to_finish),
            opt(&b.decode_finished_reason),
            b.prefill_input_len
        )
    });
    let fields = req_fields(&step, lang);
    let read_line = (!read.is_empty()).then(|| {
        format!(
            "{} {} {}",
            step.rid,
            lang.pick("reads pages", "legge le pagine"),
            read.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )
    });
    let left = match lang {
        Lang::En => format!("Req {} as the step left it", step.rid),
        Lang::It => format!("Req {} come il passo l'ha lasciata", step.rid),
    };
    view! {
        <li id=id class="mc-step" data-actor=step.actor.clone() data-action=step.action.clone()>
            <h3><a href=href>{head}</a></h3>
            {decision.map(|d| view! { <p class="mc-decision">{lang.pick("Decision: ", "Decisione: ")}<strong><code>{d}</code></strong></p> })}
            {read_req.map(|r| view! { <p class="mc-read-req">{lang.pick("Req read: ", "Req letta: ")}<code>{r}</code></p> })}
            <details open>
                <summary>{left}</summary>
                <dl class="mc-req">
                    {fields
                        .into_iter()
                        .map(|(k, v)| view! { <dt>{k}</dt><dd><code>{v}</code></dd> })
                        .collect_view()}
                </dl>
            </details>
            {(!changes.is_empty()).then(|| view! {
                <ul class="mc-changes">{changes.into_iter().map(|c| view! { <li>{c}</li> }).collect_view()}</ul>
            })}
            {read_line.map(|l| view! { <p class="mc-read">{l}</p> })}
            <Pool pages=step.decode_pages.clone() read=read lang=lang/>
        </li>
    }
}

fn violation_line(v: &ViolationFact, lang: Lang) -> String {
    let mut line = format!("{}: {}", v.property, v.rid);
    if let Some(p) = v.page {
        line.push_str(&format!(", {} {p}", lang.pick("page", "pagina")));
    }
    if let Some(w) = &v.writer {
        line.push_str(&format!(", {} {w}", lang.pick("written by", "scritta da")));
    }
    if let Some(s) = v.status {
        line.push_str(&format!(", {} {s}", lang.pick("answered", "risposta")));
    }
    line
}

/// A property's status word (`holds`, `violated`, ...) in the reader's language.
fn property_status(status: &str, lang: Lang) -> &str {
    match (lang, status) {
        (Lang::It, "holds") => "vale",
        (Lang::It, "violated") => "violata",
        (Lang::It, "witnessed") => "osservata",
        (Lang::It, "not-witnessed") => "non osservata",
        (Lang::It, "undecided") => "non decisa",
        _ => status,
    }
}

/// A model-check receipt: bounds, property results and the counterexample.
#[component]
pub fn ModelCheckView(stem: String, predicate: ModelCheckPredicate, lang: Lang) -> impl IntoView {
    let p = predicate;
    let fixes = lang.fix_set(p.model.fix_set());
    let (m, f) = (&p.model, &p.model.faults);
    let bounds = match lang {
        Lang::En => format!(
            "{} request(s), {} tenant(s), {} decode pages, {} prefill pages; faults: {} abort(s), {} late write(s), {} lost ack(s); fixes: {fixes}",
            m.requests, m.tenants, m.decode_pages, m.prefill_pages, f.aborts, f.late_writes, f.lost_acks
        ),
        Lang::It => format!(
            "richieste: {}, tenant: {}, pagine di decode: {}, pagine di prefill: {}; guasti: interruzioni {}, scritture tardive {}, ack persi {}; correzioni: {fixes}",
            m.requests, m.tenants, m.decode_pages, m.prefill_pages, f.aborts, f.late_writes, f.lost_acks
        ),
    };
    let x = &p.exploration;
    let end = match (lang, x.complete) {
        (Lang::En, true) => "complete",
        (Lang::En, false) => "stopped early",
        (Lang::It, true) => "esplorazione completa",
        (Lang::It, false) => "esplorazione interrotta prima della fine",
    };
    let explored = match lang {
        Lang::En => format!(
            "{} states explored, {} unique, depth {}, {end}",
            x.states, x.unique_states, x.max_depth
        ),
        Lang::It => format!(
            "stati esplorati: {}, distinti: {}, profondità: {}, {end}",
            x.states, x.unique_states, x.max_depth
        ),
    };
    let checker = format!("{} {}", p.checker.name, p.checker.version);
    let properties = p
        .properties
        .iter()
        .map(|r| {
            let status = serde_json::to_value(r.status)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            let word = property_status(&status, lang).to_string();
            view! { <li data-status=status><code>{r.name.clone()}</code>": "{word}</li> }
        })
        .collect_view();
    let receipt_href = format!("../receipts/{stem}.json");
    let path = p.counterexample.map(|cx| {
        // Before the first step the pool is as the checker started it: the
        // first snapshot's writers (a first step writes no page), nobody
        // owning a page.
        let mut before: Vec<PageSnapshot> = cx
            .steps
            .first()
            .map(|s| {
                s.decode_pages
                    .iter()
                    .map(|p| PageSnapshot {
                        owner: None,
                        ..p.clone()
                    })
                    .collect()
            })
            .unwrap_or_default();
        // A decode step attends to the page table its request held before
        // the step (the step itself releases it).
        let mut last: std::collections::BTreeMap<
            String,
            kvw_evidence::model_check::ReqSnapshot,
        > = Default::default();
        let note = truncation_note(cx.steps.len(), None, &receipt_href, lang);
        let steps = cx
            .steps
            .into_iter()
            .take(MAX_DRAWN_STEPS)
            .map(|s| {
                let changes = page_changes(&before, &s.decode_pages, lang);
                before = s.decode_pages.clone();
                let prev = last.insert(s.rid.clone(), s.request.clone());
                let read = match &prev {
                    Some(p) if s.action == "decode_step" => p.decode_table.clone(),
                    _ => Vec::new(),
                };
                view! { <Step step=s changes=changes read=read before=prev lang=lang/> }
            })
            .collect_view();
        let violations = cx
            .violations
            .iter()
            .map(|v| view! { <li>{violation_line(v, lang)}</li> })
            .collect_view();
        view! {
            <section class="mc-path" aria-labelledby="mc-path-title">
                <h2 id="mc-path-title">{lang.pick("Shortest counterexample", "Controesempio più breve")}" — "<code>{cx.property.clone()}</code></h2>
                {note}
                <ol class="mc-steps">{steps}</ol>
                <section class="mc-violation" id="violation">
                    <h2>{format!("{} {}", lang.pick("Violated:", "Violata:"), cx.property)}</h2>
                    <ul>{violations}</ul>
                </section>
            </section>
        }
    });
    view! {
        <article class="mc" data-receipt=stem.clone()>
            <h1>{format!("{} — {}", lang.pick("Model check", "Verifica del modello"), stem)}</h1>
            <p class="mc-bounds">{bounds}</p>
            <p class="mc-explored"><code>{checker}</code>": "{explored}</p>
            <ul class="mc-properties">{properties}</ul>
            {path}
        </article>
    }
}
