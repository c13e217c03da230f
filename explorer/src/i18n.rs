//! Interface languages.
//!
//! The explorer speaks English first and Italian second, the language of the
//! incident's original audience. Interface strings are short and live next to
//! their use as `lang.pick("English", "Italiano")` pairs, so a missing
//! translation is a compile error rather than a runtime gap; longer prose
//! lives in the Markdown narratives under `site/narratives/<lang>/`.

use serde::{Deserialize, Serialize};

/// Folder of `lang`'s browser build under a site's `pkg/` (each build
/// carries one language): `""` for English, the default, `it/` for Italian.
pub fn pkg_folder(lang: Lang) -> &'static str {
    match lang {
        Lang::En => "",
        Lang::It => "it/",
    }
}

/// A language the site is published in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    En,
    It,
}

impl Lang {
    /// Every published language, default first.
    pub const ALL: [Lang; 2] = [Lang::En, Lang::It];

    /// BCP 47 tag, also the folder name of the language's pages.
    pub fn code(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::It => "it",
        }
    }

    /// The language's name in itself, for the language switch.
    pub fn endonym(self) -> &'static str {
        match self {
            Lang::En => "English",
            Lang::It => "Italiano",
        }
    }

    /// Parse a tag such as `it` or `it-IT`; unknown tags fall back to English.
    pub fn from_tag(tag: &str) -> Lang {
        if tag.to_ascii_lowercase().starts_with("it") {
            Lang::It
        } else {
            Lang::En
        }
    }

    /// Choose between the English and the Italian form of a string.
    pub fn pick(self, en: &'static str, it: &'static str) -> &'static str {
        self.render().pick(en, it)
    }

    /// The language this build speaks for `self`: `self`, except in a
    /// one-language browser build (features `only-en`, `only-it`), which
    /// carries one language's strings and speaks only that one.
    pub const fn spoken(self) -> Lang {
        match kvw_words::Lang::spoken(self.render()) {
            kvw_words::Lang::En => Lang::En,
            kvw_words::Lang::It => Lang::It,
        }
    }

    /// A set of fixes as the receipts spell it (`none`, `all`, or a comma
    /// list of switch names), with the two words in this language; switch
    /// names are identifiers and stay as they are.
    pub fn fixes(self, text: &str) -> String {
        match (self, text) {
            (Lang::It, "none") => "nessuna".into(),
            (Lang::It, "all") => "tutte".into(),
            _ => text.to_string(),
        }
    }

    /// The same language for the receipt renderer.
    pub const fn render(self) -> kvw_words::Lang {
        match self {
            Lang::En => kvw_words::Lang::En,
            Lang::It => kvw_words::Lang::It,
        }
    }

    /// Name of step `step` in this language.
    pub fn step_name(self, step: u8) -> &'static str {
        kvw_words::probe::step_name(step, self.render())
    }
}
