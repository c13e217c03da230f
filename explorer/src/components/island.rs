//! Parts of a replay page drawn once, when the site is built, that the
//! browser leaves exactly as they arrived.
//!
//! The ten-second card and the fix matrix depend on the whole bundle, not on
//! the receipt on screen, and the glossary and the timeline on nothing at
//! all, so the browser build never needs their code or their words: the
//! static renderer provides their HTML as [`Islands`], the browser provides
//! none, and hydrating an element whose inner HTML came from the server keeps
//! that HTML untouched. Nothing there moves when the page hydrates.

use leptos::prelude::*;

/// The HTML of each island of a replay page (empty in the browser).
#[derive(Debug, Clone, Default)]
pub struct Islands {
    /// The page's `<h1>`: what happened, or what the fixes on screen changed.
    pub headline: String,
    /// Who, when, what happened and what this page is.
    pub intro: String,
    /// Which fix gives which answer.
    pub matrix: String,
    /// Per step, in step order: the transfer-coverage ribbon.
    pub ribbons: Vec<String>,
    /// The glossary and the disclosed timeline, beside the replay.
    pub aside: String,
}

/// Which island to draw.
#[derive(Debug, Clone, Copy)]
pub enum Which {
    Headline,
    Intro,
    Matrix,
    /// The ribbon of the step at this index.
    Ribbon(usize),
    Aside,
}

#[component]
pub fn Island(which: Which) -> impl IntoView {
    let html = use_context::<Islands>()
        .and_then(|i| match which {
            Which::Headline => Some(i.headline),
            Which::Intro => Some(i.intro),
            Which::Matrix => Some(i.matrix),
            Which::Ribbon(step) => i.ribbons.get(step).cloned(),
            Which::Aside => Some(i.aside),
        })
        .unwrap_or_default();
    let (id, class) = match which {
        Which::Headline => (Some("kvw-headline"), "headline"),
        Which::Intro => (Some("kvw-intro"), "intro"),
        Which::Matrix => (Some("kvw-matrix"), "matrix"),
        Which::Ribbon(_) => (None, "ribbon-slot"),
        Which::Aside => (None, "aside-slot"),
    };
    view! { <div id=id class=class inner_html=html></div> }
}
