//! Interface languages.
//!
//! The explorer speaks English first and Italian second, the language of the
//! incident's original audience. Interface strings are short and live next to
//! their use as `lang.pick("English", "Italiano")` pairs, so a missing
//! translation is a compile error rather than a runtime gap; longer prose
//! lives in the Markdown narratives under `site/narratives/<lang>/`.

/// The reader's language: the words crate's, one type for every surface.
pub use kvw_words::Lang;

/// Folder of `lang`'s browser build under a site's `pkg/` (each build
/// carries one language): `""` for English, the default, `it/` for Italian.
pub fn pkg_folder(lang: Lang) -> &'static str {
    match lang {
        Lang::En => "",
        Lang::It => "it/",
    }
}
