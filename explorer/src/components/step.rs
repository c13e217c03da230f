//! One step of the replay, complete: everything a reader needs for it is in
//! the static HTML, so the page works as a long document without scripts and
//! as a one-step-at-a-time stepper with them.

use kvw_words::probe;
use std::sync::Arc;

use kvw_evidence::{Event, ProbePredicate, Verdict};
use leptos::prelude::*;

use super::island::{Island, Which};
use super::pool::PoolView;
use super::provenance::ProvenanceBadge;
use super::response::ResponseView;
use super::sources::SourceLinks;
use super::state::StateTable;
use super::upstream_doors::UpstreamDoors;
use super::ReplayCtx;
use crate::i18n::Lang;

/// Everything [`StepView`] needs besides the step itself.
#[derive(Clone)]
pub struct StepContext {
    pub lang: Lang,
    pub narrative: String,
    pub engine_base: String,
    pub engine_commit: String,
    /// The run's verdict, drawn under the response step.
    pub verdict: Option<Verdict>,
    /// Tenant of the probed request (whose answer step 7 shows).
    pub tenant: Option<String>,
    /// The step's events, resolved from the predicate.
    pub events: Vec<Event>,
}

#[component]
fn Events(events: Vec<Event>, lang: Lang) -> impl IntoView {
    if events.is_empty() {
        return None;
    }
    Some(view! {
        <details class="events">
            <summary>{lang.pick("Events", "Eventi")}" ("{events.len()}")"</summary>
            <ol>
                {events.into_iter().map(|e| view! {
                    <li>{probe::event_line(&e, lang)}</li>
                }).collect_view()}
            </ol>
        </details>
    })
}

/// Step `index` of `run` (shared with the rest of the replay, not copied).
#[component]
pub fn StepView(run: Arc<ProbePredicate>, index: usize, cx: StepContext) -> impl IntoView {
    let ctx = ReplayCtx::get();
    let step = run.steps.get(index)?;
    let n = step.step;
    let lang = cx.lang;
    let title_id = format!("step-{n}-title");
    let labelled_by = title_id.clone();
    let name = lang.step_name(n);
    let sentences = probe::step_sentences(step, lang);
    let provenance = probe::step_provenance(step);
    let state = step
        .state
        .clone()
        .map(|s| view! { <StateTable state=s lang=lang/> });
    let pages = step
        .pages
        .clone()
        .map(|p| view! { <PoolView view=p lang=lang/> });
    let StepContext {
        narrative,
        engine_base,
        engine_commit,
        verdict,
        tenant,
        events,
        ..
    } = cx;
    let narrative = (!narrative.is_empty()).then(|| {
        view! {
            <div class="narrative">
                <p class="label">{lang.pick("In the disclosed incident", "Nell'incidente reso pubblico")}</p>
                <div inner_html=narrative></div>
            </div>
        }
    });
    let response = verdict.map(|v| view! { <ResponseView verdict=v tenant=tenant lang=lang/> });
    Some(view! {
        <section id=format!("step-{n}") class="step" class:current=move || ctx.current.get() == n aria-labelledby=labelled_by data-step=n.to_string()>
            <h2 id=title_id class="step-title">
                <span class="step-no">{format!("{} {n}/7", lang.pick("Step", "Passo"))}</span>" "
                <span class="step-name">{name}</span>
            </h2>
            <p class="step-meta">
                <ProvenanceBadge provenance=provenance lang=lang/>
                {(!ctx.embedded).then(|| view! { " "<a class="gloss-link" href="#glossary">{lang.pick("Words used here", "Le parole usate qui")}</a> })}
            </p>
            <div class="summary">
                <p class="label">{lang.pick("This run:", "Questa esecuzione:")}</p>
                <ul class="facts">
                    {step.facts.iter().zip(sentences).map(|(f, text)| {
                        let (symbol, label, slug) = super::provenance::describe(f.provenance, lang);
                        view! {
                            <li>
                                {text}" "
                                <span class=format!("prov-mini prov-{slug}") title=f.basis.clone()>
                                    <span aria-hidden="true">{symbol}</span>
                                    <span class="sr-only">{label}</span>
                                </span>
                            </li>
                        }
                    }).collect_view()}
                </ul>
            </div>
            <Island which=Which::Ribbon(index)/>
            {state}
            {pages}
            {response}
            <UpstreamDoors step=n lang=lang/>
            {narrative}
            <SourceLinks sources=step.sources.clone() engine_base=engine_base engine_commit=engine_commit lang=lang/>
            <Events events=events lang=lang/>
        </section>
    })
}
