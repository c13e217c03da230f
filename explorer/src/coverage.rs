//! Transfer coverage: on one token axis, how much of the probed prompt
//! decode reserved, prefill computed, the handoff carried and decode
//! attention read, as of each step. The incident shows in it at a glance:
//! one token computed, one page sent, eight pages read.
//!
//! Every figure is a typed fact of the receipt (`Reserved`, `Forwarded`,
//! `HandoffSent`, `Attended`), carried forward from the step that states it.
//! The replay pages draw it per step at build time (`site::ribbon`); the
//! compare page overlays two runs' ([`bar_html`], [`row_html`]).

use crate::fixed::fixed;
use crate::i18n::Lang;
use kvw_evidence::{Claim, ProbePredicate};

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

impl Coverage {
    /// Whether any figure beyond the prompt is known.
    pub fn is_empty(&self) -> bool {
        self.prompt == 0 || self.reserved + self.computed + self.transferred + self.read == 0
    }

    /// The longest figure: the axis every bar of this coverage is drawn on.
    pub fn axis(&self) -> u64 {
        self.prompt.max(self.reserved).max(self.read)
    }

    /// The four figures in drawing order: what they are in `lang`, tokens,
    /// how many of those lie on another tenant's pages, the bar's class.
    pub fn rows(&self, lang: Lang) -> [(&'static str, u64, u64, &'static str); 4] {
        [
            (
                lang.pick("decode reserved", "il decode ha prenotato"),
                self.reserved,
                0,
                "rb-reserved",
            ),
            (
                lang.pick("prefill computed", "il prefill ha calcolato"),
                self.computed,
                0,
                "rb-computed",
            ),
            (
                lang.pick("the handoff carried", "l'handoff ha portato"),
                self.transferred,
                0,
                "rb-transferred",
            ),
            (
                lang.pick("decode read", "il decode ha letto"),
                self.read,
                self.foreign,
                "rb-read",
            ),
        ]
    }
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

/// One bar on an axis of `axis` tokens, as HTML: `tokens` filled in `css`,
/// of which the last `foreign` hatched as another tenant's. A string
/// (numbers and fixed class names only, nothing to escape), so the ribbon
/// drawn at build time and the compare page's overlay share one drawing.
pub fn bar_html(tokens: u64, foreign: u64, axis: u64, css: &str) -> String {
    let share = |n: u64| fixed(n as f64 * 100.0 / axis.max(1) as f64, 2);
    let hatched = if foreign > 0 {
        format!(
            "<span class=\"rb-fill rb-foreign\" style=\"width:{}%\"></span>",
            share(foreign)
        )
    } else {
        String::new()
    };
    format!(
        "<span class=\"rb-bar\"><span class=\"rb-fill {css}\" style=\"width:{}%\"></span>{hatched}</span>",
        share(tokens.saturating_sub(foreign))
    )
}

/// One labelled figure of a ribbon, as HTML: its label, its bars and the
/// numbers in words (fixed words and numbers only).
pub fn row_html(label: &str, bars: &str, words: &str) -> String {
    format!(
        "<div class=\"rb-row\"><span class=\"rb-label\">{label}</span>{bars}<span class=\"rb-n\">{words}</span></div>"
    )
}
