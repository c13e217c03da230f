//! A gates row's columns in words: what was expected, what was observed,
//! and why.

use kvw_evidence::judged::{AfterReentry, Expected, Observed, Why};
use kvw_evidence::predicate::{ResourceKind, Worker};

use super::parts::*;
use super::said::{join, say, words, Said};
use super::{breach, outcome};
use crate::Lang;

/// What the record and the guard predict.
pub fn expected(e: &Expected, lang: Lang) -> Said {
    match e {
        Expected::Holds { outcome: o } => {
            say!(lang, "holds: {o}", "vale: {o}", o = outcome(o, lang))
        }
        Expected::FailsWithout { guard } => say!(
            lang,
            "fails without {g}",
            "fallisce senza {g}",
            g = fix_list(guard, lang)
        ),
        Expected::NotExercisedWithout { guard } => say!(
            lang,
            "not exercised without {g}",
            "non esercitato senza {g}",
            g = fix_list(guard, lang)
        ),
        Expected::NotObservedWithout { guard, .. } => say!(
            lang,
            "not observed without {g} in the record (the engine's run is its own prediction)",
            "non osservato senza {g} nel record (l'esecuzione del motore è una sua previsione)",
            g = fix_list(guard, lang)
        ),
    }
}

/// What the assertion saw.
pub fn observed(o: &Observed, lang: Lang) -> Said {
    match o {
        Observed::Held { outcome: o } => outcome(o, lang),
        Observed::AssertionFails => words(lang, "assertion fails", "l'asserzione fallisce"),
    }
}

/// Why the row reads as it does.
pub fn why(w: &Why, lang: Lang) -> Said {
    match w {
        Why::GuardedBy { guard } if guard.is_empty() => words(
            lang,
            "no fix needed: the configuration covers it",
            "nessuna correzione necessaria: basta la configurazione",
        ),
        Why::GuardedBy { guard } => say!(
            lang,
            "guarded by {g}",
            "protetto da {g}",
            g = fix_list(guard, lang)
        ),
        Why::Untested { guard } => say!(
            lang,
            "{g} off: the defense was not tested",
            "senza {g} la difesa non è stata messa alla prova",
            g = fix_list(guard, lang)
        ),
        Why::Broke {
            breach: b,
            guard_off,
        } if guard_off.is_empty() => breach(b, lang),
        Why::Broke {
            breach: b,
            guard_off,
        } => say!(
            lang,
            "{b} (without {g})",
            "{b} (senza {g})",
            b = breach(b, lang),
            g = fix_list(guard_off, lang)
        ),
    }
}

pub(crate) fn after_reentry(a: &AfterReentry, lang: Lang) -> Said {
    match a {
        AfterReentry::FreedByItsQueue { resource: k } => say!(
            lang,
            "{r} {freed} once by the queue that owns it",
            "{r} {freed} una volta dalla coda che ne è proprietaria",
            r = resource(*k, lang),
            freed = freed(*k, lang)
        ),
        AfterReentry::ResumedRetracted { status } => say!(
            lang,
            "resumed from the retracted queue and answered its pending {h}",
            "ripresa dalla coda delle richieste ritratte e chiusa con l'{h} del suo abort in sospeso",
            h = http(*status)
        ),
        AfterReentry::Bootstrapped {
            worker: Worker::Decode,
        } => words(
            lang,
            "decode created a new receiver",
            "il decode ha creato un nuovo receiver",
        ),
        AfterReentry::Bootstrapped { worker: w } => say!(
            lang,
            "{w}'s bootstrap queue took it",
            "la coda di bootstrap di {w} l'ha presa in carico",
            w = worker(*w, lang)
        ),
    }
}

/// Freed once each: the KV pages and `freed`.
pub(crate) fn freed_once(freed: &[ResourceKind], lang: Lang) -> Said {
    let mut names = vec![words(lang, "KV pages", "pagine KV")];
    names.extend(freed.iter().map(|k| resource(*k, lang)));
    say!(
        lang,
        "freed once each: {n}",
        "ciascuno liberato una sola volta: {n}",
        n = join(names, ", ")
    )
}
