//! The transfer-coverage ribbon: on one token axis, how much of the prompt
//! decode reserved, prefill computed, the handoff carried and decode
//! attention read, as of each step. It is where the incident shows at a
//! glance: one token computed, one page sent, eight pages read.
//!
//! Every figure is a typed fact of the receipt (`Reserved`, `Forwarded`,
//! `HandoffSent`, `Attended`), carried forward from the step that states it.
//! Drawn at build time and handed to the page as an island, so the browser
//! build carries none of it.

use kvw_evidence::{Claim, ProbePredicate};
use leptos::prelude::*;

use crate::fixed::fixed;
use crate::i18n::Lang;

/// What the prompt's tokens have been through, as of one step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Coverage {
    pub prompt: u64,
    /// Token slots of the pages decode reserved.
    pub reserved: u64,
    /// Tokens whose KV the prefill forward computed.
    pub computed: u64,
    /// Tokens the handoff's pages cover.
    pub transferred: u64,
    /// Positions decode attention read, and how many of them lie on pages
    /// another tenant wrote.
    pub read: u64,
    pub foreign: u64,
}

/// The coverage after each of the receipt's steps, in step order.
pub fn coverage(p: &ProbePredicate) -> Vec<Coverage> {
    let prompt = p
        .requests
        .iter()
        .find(|r| r.probed)
        .map_or(0, |r| r.prompt_len);
    let page = u64::from(p.config.page_size);
    let mut now = Coverage {
        prompt,
        ..Coverage::default()
    };
    p.steps
        .iter()
        .map(|step| {
            for fact in &step.facts {
                match &fact.claim {
                    Claim::Reserved {
                        pages, page_size, ..
                    } => now.reserved = pages * u64::from(*page_size),
                    Claim::Forwarded { tokens, .. } => now.computed = *tokens,
                    Claim::HandoffSent { tokens_covered, .. } => now.transferred = *tokens_covered,
                    Claim::Attended {
                        positions,
                        foreign_pages,
                        ..
                    } => {
                        now.read = *positions;
                        now.foreign = (foreign_pages * page).min(*positions);
                    }
                    _ => {}
                }
            }
            now
        })
        .collect()
}

#[component]
fn Row(
    label: &'static str,
    tokens: u64,
    foreign: u64,
    axis: u64,
    css: &'static str,
    lang: Lang,
) -> impl IntoView {
    let share = |n: u64| fixed(n as f64 * 100.0 / axis.max(1) as f64, 2);
    let own = tokens.saturating_sub(foreign);
    let words = if foreign > 0 {
        match lang.spoken() {
            Lang::En => format!("{tokens} ({foreign} on another tenant's pages)"),
            Lang::It => format!("{tokens} ({foreign} su pagine di un altro tenant)"),
        }
    } else {
        tokens.to_string()
    };
    view! {
        <div class="rb-row">
            <span class="rb-label">{label}</span>
            <span class="rb-bar">
                <span class=format!("rb-fill {css}") style=format!("width:{}%", share(own))></span>
                {(foreign > 0).then(|| view! { <span class="rb-fill rb-foreign" style=format!("width:{}%", share(foreign))></span> })}
            </span>
            <span class="rb-n">{words}</span>
        </div>
    }
}

/// The ribbon of one step, as HTML.
pub fn ribbon_html(c: Coverage, lang: Lang) -> String {
    if c.prompt == 0 || c.reserved + c.computed + c.transferred + c.read == 0 {
        return String::new();
    }
    let axis = c.prompt.max(c.reserved).max(c.read);
    let caption = match lang.spoken() {
        Lang::En => format!("Tokens of the {}-token prompt, as of this step", c.prompt),
        Lang::It => format!("Token del prompt da {}, a questo passo", c.prompt),
    };
    Owner::new().with(|| {
        view! {
            <figure class="ribbon">
                <figcaption>{caption}</figcaption>
                <Row label=lang.pick("decode reserved", "il decode ha prenotato") tokens=c.reserved foreign=0 axis=axis css="rb-reserved" lang=lang/>
                <Row label=lang.pick("prefill computed", "il prefill ha calcolato") tokens=c.computed foreign=0 axis=axis css="rb-computed" lang=lang/>
                <Row label=lang.pick("the handoff carried", "l'handoff ha portato") tokens=c.transferred foreign=0 axis=axis css="rb-transferred" lang=lang/>
                <Row label=lang.pick("decode read", "il decode ha letto") tokens=c.read foreign=c.foreign axis=axis css="rb-read" lang=lang/>
            </figure>
        }
        .to_html()
    })
}

/// The ribbon of every step of `p`.
pub fn ribbons(p: &ProbePredicate, lang: Lang) -> Vec<String> {
    coverage(p)
        .into_iter()
        .map(|c| ribbon_html(c, lang))
        .collect()
}
