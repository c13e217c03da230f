//! The reader's language, and the one macro every sentence goes through.
//!
//! Each sentence is written once per language side by side; a one-language
//! build (feature `only-en` or `only-it`, as the browser builds are) keeps
//! only its own language's text.

/// A reader's language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lang {
    En,
    It,
}

#[cfg(all(feature = "only-en", feature = "only-it"))]
compile_error!("features `only-en` and `only-it` exclude each other");

impl Lang {
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
