//! The replay of a model-check receipt: the counterexample path, step by step.
//!
//! A probe receipt records one run; a model-check receipt (predicate
//! `model-check/v1`, [`kvw_evidence::model_check`]) records a whole state
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
use leptos::prelude::*;

use crate::i18n::Lang;

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
pub fn page_changes(before: &[PageSnapshot], after: &[PageSnapshot]) -> Vec<String> {
    let mut out = Vec::new();
    for a in after {
        let b = before.iter().find(|b| b.page == a.page);
        let (b_owner, b_writer) = b.map_or((None, None), |b| (b.owner.clone(), b.writer.clone()));
        if a.owner != b_owner {
            match (&b_owner, &a.owner) {
                (_, Some(o)) => out.push(format!("page {} reserved by {o}", a.page)),
                (Some(o), None) => out.push(format!("page {} freed by {o}", a.page)),
                (None, None) => {}
            }
        }
        if a.writer != b_writer {
            match &a.writer {
                Some(w) => out.push(format!("page {} written by {w}", a.page)),
                None => out.push(format!("page {} scrubbed", a.page)),
            }
        }
    }
    out
}

/// The `Req` fields a step's decision read, as `name = value` pairs.
fn req_fields(step: &PathStep) -> Vec<(&'static str, String)> {
    let r = &step.request;
    let opt = |o: &Option<String>| o.clone().unwrap_or_else(|| "None".into());
    vec![
        ("prompt tokens sent", r.original_len.to_string()),
        ("prefill stage", r.prefill_stage.clone()),
        (
            "prefill len(origin_input_ids)",
            r.prefill_input_len.to_string(),
        ),
        ("prefill to_finish", opt(&r.prefill_to_finish)),
        ("prefill finished_reason", opt(&r.prefill_finished_reason)),
        ("decode stage", r.decode_stage.clone()),
        ("decode to_finish", opt(&r.decode_to_finish)),
        ("decode finished_reason", opt(&r.decode_finished_reason)),
        (
            "decode page table",
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
            "writes posted / landed",
            format!("{} / {}", r.writes_posted, r.writes_landed),
        ),
        ("final chunk sent", r.final_sent.to_string()),
        (
            "answers",
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
fn Pool(pages: Vec<PageSnapshot>, read: Vec<u32>) -> impl IntoView {
    view! {
        <div class="mc-pool">
            {pages
                .into_iter()
                .map(|p| {
                    let style = page_style(p.owner.as_deref());
                    let owner = p.owner.clone().unwrap_or_else(|| "free".into());
                    let writer = p.writer.clone().unwrap_or_else(|| "never written".into());
                    let mark = if read.contains(&p.page) { " · read" } else { "" };
                    let title = format!("page {}: owner {owner}, bytes by {writer}", p.page);
                    let text = format!("{}: {owner} · {writer}{mark}", p.page);
                    view! {
                        <span class="mc-page" style=style title=title data-owner=owner>
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
) -> impl IntoView {
    let id = format!("step-{}", step.index);
    let href = format!("#{id}");
    let head = format!(
        "{}. {} — {} ({}, tenant {})",
        step.index, step.actor, step.action, step.rid, step.tenant
    );
    let decision = step.decision.clone();
    // What the decision read: the request as the previous step left it.
    let read_req = before.filter(|_| decision.is_some()).map(|b| {
        let opt = |o: &Option<String>| o.clone().unwrap_or_else(|| "None".into());
        format!(
            "Req read: prefill to_finish = {}, prefill finished_reason = {}, decode to_finish = {}, decode finished_reason = {}, len(origin_input_ids) = {}",
            opt(&b.prefill_to_finish),
            opt(&b.prefill_finished_reason),
            opt(&b.decode_to_finish),
            opt(&b.decode_finished_reason),
            b.prefill_input_len
        )
    });
    let fields = req_fields(&step);
    let read_line = (!read.is_empty()).then(|| {
        format!(
            "{} reads pages {}",
            step.rid,
            read.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )
    });
    view! {
        <li id=id class="mc-step" data-actor=step.actor.clone() data-action=step.action.clone()>
            <h3><a href=href>{head}</a></h3>
            {decision.map(|d| view! { <p class="mc-decision">"Decision: " <strong>{d}</strong></p> })}
            {read_req.map(|r| view! { <p class="mc-read-req">{r}</p> })}
            <details open>
                <summary>{format!("Req {} as the step left it", step.rid)}</summary>
                <dl class="mc-req">
                    {fields
                        .into_iter()
                        .map(|(k, v)| view! { <dt>{k}</dt><dd>{v}</dd> })
                        .collect_view()}
                </dl>
            </details>
            {(!changes.is_empty()).then(|| view! {
                <ul class="mc-changes">{changes.into_iter().map(|c| view! { <li>{c}</li> }).collect_view()}</ul>
            })}
            {read_line.map(|l| view! { <p class="mc-read">{l}</p> })}
            <Pool pages=step.decode_pages.clone() read=read/>
        </li>
    }
}

fn violation_line(v: &ViolationFact) -> String {
    let mut line = format!("{}: {}", v.property, v.rid);
    if let Some(p) = v.page {
        line.push_str(&format!(", page {p}"));
    }
    if let Some(w) = &v.writer {
        line.push_str(&format!(", written by {w}"));
    }
    if let Some(s) = v.status {
        line.push_str(&format!(", answered {s}"));
    }
    line
}

/// A model-check receipt: bounds, property results and the counterexample.
#[component]
pub fn ModelCheckView(stem: String, predicate: ModelCheckPredicate, lang: Lang) -> impl IntoView {
    let p = predicate;
    let fixes = p.model.fix_list();
    let bounds = format!(
        "{} request(s), {} tenant(s), {} decode pages, {} prefill pages; faults: {} abort(s), {} late write(s), {} lost ack(s); fixes: {fixes}",
        p.model.requests,
        p.model.tenants,
        p.model.decode_pages,
        p.model.prefill_pages,
        p.model.faults.aborts,
        p.model.faults.late_writes,
        p.model.faults.lost_acks
    );
    let explored = format!(
        "{} {}: {} states explored, {} unique, depth {}{}",
        p.checker.name,
        p.checker.version,
        p.exploration.states,
        p.exploration.unique_states,
        p.exploration.max_depth,
        if p.exploration.complete {
            ", complete"
        } else {
            ", stopped early"
        }
    );
    let properties = p
        .properties
        .iter()
        .map(|r| {
            let status = serde_json::to_value(r.status)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            let attr = status.clone();
            view! { <li data-status=attr><code>{r.name.clone()}</code>": "{status}</li> }
        })
        .collect_view();
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
        let steps = cx
            .steps
            .into_iter()
            .map(|s| {
                let changes = page_changes(&before, &s.decode_pages);
                before = s.decode_pages.clone();
                let prev = last.insert(s.rid.clone(), s.request.clone());
                let read = match &prev {
                    Some(p) if s.action == "decode_step" => p.decode_table.clone(),
                    _ => Vec::new(),
                };
                view! { <Step step=s changes=changes read=read before=prev/> }
            })
            .collect_view();
        let violations = cx
            .violations
            .iter()
            .map(|v| view! { <li>{violation_line(v)}</li> })
            .collect_view();
        view! {
            <section class="mc-path" aria-labelledby="mc-path-title">
                <h2 id="mc-path-title">{lang.pick("Shortest counterexample", "Controesempio più breve")}" — "<code>{cx.property.clone()}</code></h2>
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
            <h1>{format!("{} — {}", lang.pick("Model check", "Model check"), stem)}</h1>
            <p class="mc-bounds">{bounds}</p>
            <p class="mc-explored">{explored}</p>
            <ul class="mc-properties">{properties}</ul>
            {path}
        </article>
    }
}

/// A complete static page for a model-check receipt (no scripts: the path
/// is a list to read, with nothing to hydrate).
#[cfg(feature = "ssr")]
pub fn render_model_check_page(
    lang: Lang,
    root: &str,
    stem: &str,
    predicate: ModelCheckPredicate,
) -> String {
    let stem_owned = stem.to_string();
    let body = Owner::new().with(|| {
        view! { <ModelCheckView stem=stem_owned predicate=predicate lang=lang/> }.to_html()
    });
    let title = Owner::new().with(|| {
        let t = format!("{stem} — model check — kvwitness");
        view! { <title>{t}</title> }.to_html()
    });
    format!(
        "<!DOCTYPE html>\n<html lang=\"{code}\" class=\"kvw-site\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n{title}\n<link rel=\"icon\" href=\"data:,\">\n<link rel=\"stylesheet\" href=\"{root}style.css\">\n</head>\n<body><header class=\"site\"><p class=\"brand\"><a href=\"{root}index.html\">kvwitness</a></p></header><main id=\"main\" class=\"kvw-main\">{body}</main></body>\n</html>\n",
        code = lang.code(),
    )
}

/// A model-check receipt of a bundle, verified.
#[cfg(feature = "ssr")]
#[derive(Debug, Clone)]
pub struct LoadedModelCheck {
    pub stem: String,
    /// The envelope as stored.
    pub envelope: String,
    pub predicate: ModelCheckPredicate,
}

/// The model-check receipt stored as `receipts/<stem>.json`, if the
/// envelope is one that verifies with the bundle key under that name;
/// `None` for every other receipt (probe receipts take their own path).
#[cfg(feature = "ssr")]
pub fn load_model_check(
    stem: &str,
    envelope: &str,
    public_key_json: &str,
) -> Option<LoadedModelCheck> {
    use kvw_evidence::keys::PublicKey;
    use kvw_evidence::model_check::MODEL_CHECK_PREDICATE_TYPE;
    let key = PublicKey::from_json(public_key_json.as_bytes()).ok()?;
    let statement = kvw_evidence::receipt::verify_statement(envelope.as_bytes(), &key).ok()?;
    if statement.predicate_type != MODEL_CHECK_PREDICATE_TYPE
        || statement.name != format!("{stem}.json")
    {
        return None;
    }
    Some(LoadedModelCheck {
        stem: stem.to_string(),
        envelope: envelope.to_string(),
        predicate: statement.parse().ok()?,
    })
}

/// Write one page per language for each model-check receipt, and the
/// receipt itself; returns the number of pages written.
#[cfg(feature = "ssr")]
pub fn write_model_check_pages(
    checks: &[LoadedModelCheck],
    out: &std::path::Path,
    write: impl Fn(&std::path::Path, String) -> Result<(), crate::site::SiteError>,
) -> Result<usize, crate::site::SiteError> {
    let mut pages = 0;
    for c in checks {
        for lang in Lang::ALL {
            let path = out.join(lang.code()).join(format!("{}.html", c.stem));
            write(
                &path,
                render_model_check_page(lang, "../", &c.stem, c.predicate.clone()),
            )?;
            pages += 1;
        }
        write(
            &out.join("receipts").join(format!("{}.json", c.stem)),
            c.envelope.clone(),
        )?;
    }
    Ok(pages)
}
