//! How much of one receipt a page draws.
//!
//! A receipt may hold thousands of events, each with a picture of a pool of
//! a thousand pages; drawn in full that is hundreds of megabytes of HTML and
//! minutes of building for a page nobody can read. A page draws at most
//! [`MAX_DRAWN_STEPS`] steps and [`MAX_DRAWN_PICTURES`] pool pictures; the
//! steps after are not drawn, and the page says so in a visible note that
//! links the signed receipt, which holds them all. The published receipts
//! are far below both limits.

use leptos::prelude::*;

use crate::i18n::Lang;

/// Most steps (events, or a counterexample's steps) one page draws.
pub const MAX_DRAWN_STEPS: usize = 200;
/// Most pool pictures one page draws.
pub const MAX_DRAWN_PICTURES: usize = 12;

/// The note a page carries when it draws fewer than `total_steps` steps, or
/// fewer than `total_pictures` pool pictures (`None` where each drawn step
/// has its own small pool, as on a model-check path).
pub fn truncation_note(
    total_steps: usize,
    total_pictures: Option<usize>,
    receipt_href: &str,
    lang: Lang,
) -> Option<AnyView> {
    let cut = truncation_line(total_steps, total_pictures)?;
    let text = match lang {
        Lang::En => format!(
            "This page is cut short: the receipt records {cut}. \
             The signed receipt holds everything: "
        ),
        Lang::It => format!(
            "Questa pagina è abbreviata: la ricevuta registra {}. \
             La ricevuta firmata contiene tutto: ",
            italian(total_steps, total_pictures)
        ),
    };
    let href = receipt_href.to_string();
    let file = href.rsplit('/').next().unwrap_or_default().to_string();
    Some(
        view! {
            <p class="kvw-limit" role="note"><strong>{text}</strong><a href=href><code>{file}</code></a></p>
        }
        .into_any(),
    )
}

/// What is cut, in words, if anything: also what the build reports.
pub fn truncation_line(total_steps: usize, total_pictures: Option<usize>) -> Option<String> {
    let pictures = total_pictures.unwrap_or(0);
    if total_steps <= MAX_DRAWN_STEPS && pictures <= MAX_DRAWN_PICTURES {
        return None;
    }
    let steps = format!(
        "{total_steps} steps, of which the first {} are drawn (at most {MAX_DRAWN_STEPS} a page)",
        total_steps.min(MAX_DRAWN_STEPS)
    );
    Some(match total_pictures {
        Some(p) => format!(
            "{steps}, and {p} pool pictures, of which {} are drawn (at most {MAX_DRAWN_PICTURES} a page)",
            p.min(MAX_DRAWN_PICTURES)
        ),
        None => steps,
    })
}

fn italian(total_steps: usize, total_pictures: Option<usize>) -> String {
    let steps = format!(
        "{total_steps} passi, di cui sono disegnati i primi {} (al massimo {MAX_DRAWN_STEPS} per pagina)",
        total_steps.min(MAX_DRAWN_STEPS)
    );
    match total_pictures {
        Some(p) => format!(
            "{steps}, e {p} immagini del pool, di cui ne sono disegnate {} (al massimo {MAX_DRAWN_PICTURES} per pagina)",
            p.min(MAX_DRAWN_PICTURES)
        ),
        None => steps,
    }
}
