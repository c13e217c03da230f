//! The seven-step replay of the receipt on screen.
//!
//! All seven steps are always in the document. Without scripts they read top
//! to bottom and the step list links to `#step-N`; once the page is hydrated
//! (the root element carries `kvw-ready`), the style sheet shows one step at
//! a time and the Prev/Next buttons, hidden until then, take over.

use std::sync::Arc;

use kvw_evidence::ProbePredicate;
use leptos::either::EitherOf3;
use leptos::prelude::*;

use super::actions::remember_step;
use super::step::{StepContext, StepView};
use super::switches::Switches;
use super::verdict::VerdictPanel;
use super::ReplayCtx;
use crate::i18n::Lang;
use crate::page_data::Shown;

#[component]
fn StepNav(names: Vec<(u8, String)>, lang: Lang) -> impl IntoView {
    let ctx = ReplayCtx::get();
    view! {
        <nav class="step-nav" aria-label=lang.pick("Steps", "Passi")>
            <ol>
                {names.into_iter().map(|(n, name)| view! {
                    <li>
                        <a href=format!("#step-{n}")
                            class:current=move || ctx.current.get() == n
                            aria-current=move || (ctx.current.get() == n).then_some("step")
                            on:click=move |ev| { ev.prevent_default(); ctx.go(n as i32); remember_step(ctx, n); }>
                            <span class="n">{n.to_string()}</span><span class="name">" "{name}</span>
                        </a>
                    </li>
                }).collect_view()}
            </ol>
        </nav>
    }
}

/// Previous and Next. They are never `disabled`: a disabled button drops
/// the keyboard focus to the page, so at either end they say so with
/// `aria-disabled` and stay where the focus is. Before the browser build
/// has loaded, an inline script (`early_steps.js`) moves them through
/// `#step-N` links.
#[component]
fn Stepper(lang: Lang) -> impl IntoView {
    let ctx = ReplayCtx::get();
    let step_by = move |delta: i32| {
        ctx.go(ctx.current.get_untracked() as i32 + delta);
        remember_step(ctx, ctx.current.get_untracked());
    };
    view! {
        <div class="stepper js-only">
            <button type="button" id="kvw-prev" on:click=move |_| step_by(-1) aria-disabled=move || (ctx.current.get() <= 1).then_some("true")>
                <span aria-hidden="true">"← "</span>{lang.pick("Previous", "Precedente")}
            </button>
            <span class="counter" aria-live="polite" id="kvw-counter">
                {move || format!("{} {} / 7", lang.pick("Step", "Passo"), ctx.current.get())}
            </span>
            <button type="button" id="kvw-next" on:click=move |_| step_by(1) aria-disabled=move || (ctx.current.get() >= 7).then_some("true")>
                {lang.pick("Next", "Successivo")}<span aria-hidden="true">" →"</span>
            </button>
            <span class="hint">{lang.pick("or use ← → keys", "oppure i tasti ← →")}</span>
        </div>
    }
}

#[component]
fn ReplayBody(predicate: Arc<ProbePredicate>, lang: Lang) -> impl IntoView {
    let ctx = ReplayCtx::get();
    let (narratives, engine_base) = ctx
        .data
        .with_value(|d| (d.narratives.clone(), d.engine_source_base.clone()));
    let names = predicate
        .steps
        .iter()
        .map(|s| (s.step, lang.step_name(s.step).to_string()))
        .collect();
    let steps = predicate
        .steps
        .iter()
        .enumerate()
        .map(|(index, step)| {
            let cx = StepContext {
                lang,
                narrative: narratives
                    .get(step.step as usize - 1)
                    .cloned()
                    .unwrap_or_default(),
                engine_base: engine_base.clone(),
                engine_commit: predicate.engine.commit.clone(),
                verdict: (step.step == 7).then(|| predicate.verdict.clone()),
                tenant: predicate
                    .requests
                    .iter()
                    .find(|r| r.probed)
                    .map(|r| r.tenant.clone()),
                events: step
                    .events
                    .iter()
                    .filter_map(|&i| predicate.events.get(i as usize).cloned())
                    .collect(),
            };
            view! { <StepView run=predicate.clone() index=index cx=cx/> }
        })
        .collect_view();
    // The step comes first so that it is on screen without scrolling; the
    // verdict and the switches sit beside it on wide screens, below on phones.
    // The two columns belong to `.replay-body` from its opening tag, so a
    // page that arrives slowly and is painted before the side column has
    // been parsed already gives the step its final width: nothing reflows
    // when the side column lands.
    view! {
        <div class="replay-body">
            <div class="replay-main">
                <StepNav names=names lang=lang/>
                <Stepper lang=lang/>
                <div class="steps">{steps}</div>
            </div>
            <div class="replay-side">
                <VerdictPanel predicate=predicate.clone() lang=lang/>
                <Switches lang=lang/>
            </div>
        </div>
    }
}

#[component]
fn NotReplayed(stem: String, reason: String, lang: Lang) -> impl IntoView {
    view! {
        <div class="tampered" id="kvw-warning">
            <h2><span aria-hidden="true">"⚠ "</span>{lang.pick("This receipt is not replayed", "Questa ricevuta non viene riprodotta")}</h2>
            <p>
                {lang.pick("The receipt ", "La ricevuta ")}<code>{stem}</code>
                {lang.pick(" failed verification, so nothing in it can be trusted: ", " non ha superato la verifica, quindi nulla di ciò che contiene è affidabile: ")}
                <strong class="reason">{reason}</strong>
            </p>
        </div>
    }
}

/// The replay of whatever [`ReplayCtx::shown`] holds.
///
/// Keyed on [`Shown::identity`]: another receipt (or verdict, or a load in
/// progress) draws the replay afresh instead of diffing one run's DOM
/// against another's, which also keeps the browser build from carrying a
/// second, diffing copy of the whole replay's code.
#[component]
pub fn Replay() -> impl IntoView {
    let ctx = ReplayCtx::get();
    let lang = ctx.data.with_value(|d| d.lang);
    view! {
        <div class="replay" id="replay">
            <For each=move || [ctx.shown.get()] key=Shown::identity children=move |shown| match shown {
                Shown::Verified { predicate, .. } => EitherOf3::A(view! { <ReplayBody predicate=predicate lang=lang/> }),
                Shown::Rejected { stem, reason } => EitherOf3::B(view! { <NotReplayed stem=stem reason=reason lang=lang/> }),
                Shown::Loading { stem } => EitherOf3::C(view! {
                    <p class="loading" aria-busy="true">{lang.pick("Loading and verifying ", "Caricamento e verifica di ")}<code>{stem}</code>"…"</p>
                }),
            }/>
        </div>
    }
}
