//! Step narratives: Markdown written by people, rendered once at build time.
//!
//! The narratives ship inside the binary (so `kvw site build` works from any
//! directory) and can be overridden by a folder laid out the same way
//! (`<dir>/<lang>/step-N.md`) to edit prose without recompiling.

use std::path::Path;

use pulldown_cmark::{html, Options, Parser};

use crate::i18n::Lang;

macro_rules! narratives {
    ($lang:literal) => {
        [
            include_str!(concat!("../../site/narratives/", $lang, "/step-1.md")),
            include_str!(concat!("../../site/narratives/", $lang, "/step-2.md")),
            include_str!(concat!("../../site/narratives/", $lang, "/step-3.md")),
            include_str!(concat!("../../site/narratives/", $lang, "/step-4.md")),
            include_str!(concat!("../../site/narratives/", $lang, "/step-5.md")),
            include_str!(concat!("../../site/narratives/", $lang, "/step-6.md")),
            include_str!(concat!("../../site/narratives/", $lang, "/step-7.md")),
        ]
    };
}

/// Largest narrative step file read from a folder.
pub const MAX_NARRATIVE_BYTES: u64 = 256 * 1024;

const EN: [&str; 7] = narratives!("en");
const IT: [&str; 7] = narratives!("it");

/// Render CommonMark (with tables and strikethrough) to HTML.
pub fn to_html(markdown: &str) -> String {
    let mut options = Options::empty();
    options.insert(Options::ENABLE_TABLES);
    options.insert(Options::ENABLE_STRIKETHROUGH);
    let mut out = String::new();
    html::push_html(&mut out, Parser::new_ext(markdown, options));
    out
}

/// The seven narratives of `lang` as HTML, from `dir` when it holds them,
/// else the built-in ones.
pub fn narratives(lang: Lang, dir: Option<&Path>) -> std::io::Result<Vec<String>> {
    let builtin = match lang {
        Lang::En => EN,
        Lang::It => IT,
    };
    (1..=7)
        .map(|n| {
            let text = match dir {
                Some(dir) => {
                    let path = dir.join(lang.code()).join(format!("step-{n}.md"));
                    // Regular files under a cap only: a FIFO would block the
                    // build, a link to /dev/zero would never end.
                    kvw_evidence::fsutil::read_text(&path, MAX_NARRATIVE_BYTES, "narrative step")
                        .map_err(|e| std::io::Error::other(e.to_string()))?
                }
                None => builtin[n - 1].to_string(),
            };
            Ok(to_html(&text))
        })
        .collect()
}
