//! A sentence as pieces: words in the reader's language and code kept
//! verbatim, and the template filling every scenario sentence goes through.

use std::fmt;

use crate::Lang;

/// A piece of a sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Words in the reader's language.
    Words(String),
    /// Code or an upstream message, verbatim.
    Code(String),
}

/// A rendered sentence: words and code, in order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Said(pub Vec<Piece>);

impl Said {
    pub fn pieces(&self) -> &[Piece] {
        &self.0
    }

    pub(crate) fn push(&mut self, piece: Piece) {
        match (self.0.last_mut(), piece) {
            (Some(Piece::Words(a)), Piece::Words(b)) => a.push_str(&b),
            (_, Piece::Words(b)) if b.is_empty() => {}
            (_, p) => self.0.push(p),
        }
    }

    pub(crate) fn extend(&mut self, other: Said) {
        for p in other.0 {
            self.push(p);
        }
    }

    /// Static text with `code` marked by backticks (the scenario words).
    pub fn marked(text: &str) -> Said {
        let mut out = Said::default();
        for (i, part) in text.split('`').enumerate() {
            if i % 2 == 1 {
                out.push(Piece::Code(part.to_string()));
            } else {
                out.push(Piece::Words(part.to_string()));
            }
        }
        out
    }
}

impl fmt::Display for Said {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for p in &self.0 {
            match p {
                Piece::Words(s) | Piece::Code(s) => f.write_str(s)?,
            }
        }
        Ok(())
    }
}

impl From<String> for Said {
    fn from(s: String) -> Self {
        Said(vec![Piece::Words(s)])
    }
}

impl From<&str> for Said {
    fn from(s: &str) -> Self {
        Said::from(s.to_string())
    }
}

macro_rules! said_from_number {
    ($($t:ty),*) => {$(
        impl From<$t> for Said {
            fn from(n: $t) -> Self {
                Said::from(n.to_string())
            }
        }
    )*};
}
said_from_number!(u16, u32, u64);

/// Verbatim code.
pub fn code(s: impl Into<String>) -> Said {
    Said(vec![Piece::Code(s.into())])
}

/// `template` with each `{name}` replaced by its argument.
pub(crate) fn fill(template: &str, args: &[(&str, Said)]) -> Said {
    let mut out = Said::default();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push(Piece::Words(rest[..open].to_string()));
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            out.push(Piece::Words(rest[open..].to_string()));
            return out;
        };
        let name = &after[..close];
        match args.iter().find(|(n, _)| *n == name) {
            Some((_, value)) => out.extend(value.clone()),
            None => out.push(Piece::Words(format!("{{{name}}}"))),
        }
        rest = &after[close + 1..];
    }
    out.push(Piece::Words(rest.to_string()));
    out
}

/// A sentence from the English or the Italian template, by language (a
/// one-language build keeps only its own templates, see [`Lang::spoken`]).
macro_rules! say {
    ($lang:expr, $en:literal, $it:literal $(, $arg:ident = $val:expr)* $(,)?) => {
        $crate::scenario::said::fill(
            match $lang.spoken() {
                $crate::Lang::En => $en,
                $crate::Lang::It => $it,
            },
            &[$((stringify!($arg), $crate::scenario::Said::from($val))),*],
        )
    };
}
pub(crate) use say;

pub(crate) fn join(items: Vec<Said>, sep: &str) -> Said {
    let mut out = Said::default();
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(Piece::Words(sep.to_string()));
        }
        out.extend(item);
    }
    out
}

pub(crate) fn words(lang: Lang, en: &str, it: &str) -> Said {
    Said::from(lang.pick(en, it))
}
