//! The reader's language, and the one macro every sentence goes through.
//!
//! Each sentence is written once per language side by side; a one-language
//! build (feature `only-en` or `only-it`, as the browser builds are) keeps
//! only its own language's text.

/// A reader's language: the one type for `--lang`, the explorer's pages
/// and every sentence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    En,
    It,
}

/// A `--lang` value that names no language.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownLang(pub String);

impl std::fmt::Display for UnknownLang {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown language '{}' (known: en, it)", self.0)
    }
}

impl std::error::Error for UnknownLang {}

/// `en` or `it`, exactly.
impl std::str::FromStr for Lang {
    type Err = UnknownLang;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Lang::ALL
            .into_iter()
            .find(|l| l.code() == s)
            .ok_or_else(|| UnknownLang(s.to_string()))
    }
}

impl std::fmt::Display for Lang {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.code())
    }
}

#[cfg(all(feature = "only-en", feature = "only-it"))]
compile_error!("features `only-en` and `only-it` exclude each other");

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

    /// Parse a browser tag such as `it` or `it-IT`; unknown tags fall back
    /// to English.
    pub fn from_tag(tag: &str) -> Lang {
        if tag.to_ascii_lowercase().starts_with("it") {
            Lang::It
        } else {
            Lang::En
        }
    }

    /// A set of fixes as the receipts spell it (`none`, `all`, or a comma
    /// list of switch names), with the two words in this language; switch
    /// names are identifiers and stay as they are.
    pub fn fix_set(self, fixes: kvw_evidence::FixSet) -> String {
        match (self.spoken(), fixes) {
            (Lang::It, f) if f.is_empty() => "nessuna".into(),
            (Lang::It, kvw_evidence::FixSet::ALL) => "tutte".into(),
            _ => fixes.to_string(),
        }
    }

    /// Name of step `step` in this language.
    pub fn step_name(self, step: u8) -> &'static str {
        crate::probe::step_name(step, self)
    }

    /// The language text comes out in: `self`, unless the crate is built for
    /// one language only (feature `only-en` or `only-it`, as the browser
    /// builds are, one per language), when every sentence of the other
    /// language is compiled out.
    pub const fn spoken(self) -> Lang {
        if cfg!(feature = "only-en") {
            Lang::En
        } else if cfg!(feature = "only-it") {
            Lang::It
        } else {
            self
        }
    }

    /// `n` and its noun in the number `n` takes ("1 page", "8 pages",
    /// "1 pagina", "8 pagine"), so that no sentence says "page(s)" or
    /// "pagina/e".
    pub fn count(self, n: u64, en: [&str; 2], it: [&str; 2]) -> String {
        format!("{n} {}", self.agree(n, en, it))
    }

    /// The form of a word that agrees in number with `n` (a noun, or an
    /// Italian participle or verb after one).
    pub fn agree<'a>(self, n: u64, en: [&'a str; 2], it: [&'a str; 2]) -> &'a str {
        let [one, many] = match self.spoken() {
            Lang::En => en,
            Lang::It => it,
        };
        if n == 1 {
            one
        } else {
            many
        }
    }

    /// Pick the text of this language.
    pub fn pick<'a>(self, en: &'a str, it: &'a str) -> &'a str {
        match self.spoken() {
            Lang::En => en,
            Lang::It => it,
        }
    }
}

/// `format!` of the English or the Italian template, by language.
macro_rules! say {
    ($lang:expr, $en:literal, $it:literal $(, $arg:ident = $val:expr)* $(,)?) => {
        match $lang.spoken() {
            $crate::Lang::En => format!($en $(, $arg = $val)*),
            $crate::Lang::It => format!($it $(, $arg = $val)*),
        }
    };
}
pub(crate) use say;
