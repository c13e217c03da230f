//! The transfer-coverage ribbon of each replay step ([`crate::coverage`]).
//! Drawn at build time and handed to the page as an island, so the browser
//! build carries none of it.

use kvw_evidence::ProbePredicate;

use crate::coverage::{bar_html, coverage, row_html, Coverage};
use crate::i18n::Lang;

/// The ribbon of one step, as HTML.
pub fn ribbon_html(c: Coverage, lang: Lang) -> String {
    if c.is_empty() {
        return String::new();
    }
    let axis = c.axis();
    let caption = match lang.spoken() {
        Lang::En => format!("Tokens of the {}-token prompt, as of this step", c.prompt),
        Lang::It => format!("Token del prompt da {}, a questo passo", c.prompt),
    };
    let rows: String = c
        .rows(lang)
        .into_iter()
        .map(|(label, tokens, foreign, css)| {
            let words = match (foreign, lang.spoken()) {
                (0, _) => tokens.to_string(),
                (_, Lang::En) => format!("{tokens} ({foreign} on another tenant's pages)"),
                (_, Lang::It) => format!("{tokens} ({foreign} su pagine di un altro tenant)"),
            };
            row_html(label, &bar_html(tokens, foreign, axis, css), &words)
        })
        .collect();
    format!("<figure class=\"ribbon\"><figcaption>{caption}</figcaption>{rows}</figure>")
}

/// The ribbon of every step of `p`.
pub fn ribbons(p: &ProbePredicate, lang: Lang) -> Vec<String> {
    coverage(p)
        .into_iter()
        .map(|c| ribbon_html(c, lang))
        .collect()
}
