//! Sentences rendered from scenario and gate facts, in English and Italian.
//!
//! Scenario receipts and gates rows carry what was expected, observed and
//! why as typed facts ([`kvw_evidence::judged`]); this module is the one place they
//! become words, so `kvw gates`, `kvw scenario run` and the explorer's
//! scenario and gates pages say the same thing, and the Italian pages are
//! Italian throughout. It also owns each scenario's description and what
//! closes it, keyed by the scenario's name, in both languages
//! ([`scenario_text`]).
//!
//! A sentence is a [`Said`]: words in the reader's language and code
//! (door functions, fields, switch names, request ids, upstream messages)
//! kept verbatim, so a page can mark the code as such and the command line
//! prints it as plain text.

mod breach;
mod judged;
mod outcome;
mod parts;
pub(crate) mod said;
mod texts;

pub use breach::breach;
pub use judged::{expected, observed, why};
pub use outcome::outcome;
pub use parts::{fix_list, guard_rule, status};
pub use said::{code, Piece, Said};
pub use texts::{scenario_text, ScenarioText};

#[cfg(test)]
mod tests;
