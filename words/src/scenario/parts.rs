//! The small words scenario sentences are built from: switches, doors,
//! workers, resources, counts and door decisions.

use kvw_evidence::judged::{GuardRule, WorkerAnswer};
use kvw_evidence::predicate::{DoorDecision, DoorName, Fix, ResourceKind, Worker};
use kvw_evidence::scenario::ScenarioStatus;

use super::said::{code, fill, join, say, words, Said};
use crate::Lang;

/// Switch names joined with `, `, or "no fix".
pub fn fix_list(fixes: &[Fix], lang: Lang) -> Said {
    if fixes.is_empty() {
        return words(lang, "no fix", "nessuna correzione");
    }
    join(fixes.iter().map(|f| code(f.name())).collect(), ", ")
}

/// A per-request resource: its upstream field, or words where upstream has
/// no single field for it.
pub(crate) fn resource(k: ResourceKind, lang: Lang) -> Said {
    match k {
        ResourceKind::HicacheEntry | ResourceKind::SessionSlot => {
            Said::from(crate::probe::resource_name(k, lang))
        }
        _ => code(crate::probe::resource_name(k, lang)),
    }
}

pub(crate) fn door(d: DoorName) -> Said {
    code(crate::probe::door_name(d))
}

pub(crate) fn worker(w: Worker, lang: Lang) -> Said {
    Said::from(crate::probe::worker(w, lang))
}

pub(crate) fn http(status: u16) -> Said {
    Said::from(format!("HTTP {status}"))
}

/// A worker's answers with their finish reasons, or "no answer".
pub(crate) fn answers(a: &[WorkerAnswer], lang: Lang) -> Said {
    if a.is_empty() {
        return words(lang, "no answer", "nessuna risposta");
    }
    join(
        a.iter()
            .map(|a| {
                fill(
                    "{h} ({r})",
                    &[("h", http(a.status)), ("r", code(&a.finish_reason))],
                )
            })
            .collect(),
        ", ",
    )
}

/// `n` times: "1 time", "3 times"; "1 volta", "3 volte".
pub(crate) fn times(n: u32, lang: Lang) -> Said {
    count(u64::from(n), lang, ("time", "times"), ("volta", "volte"))
}

/// `n` of a thing: "1 double free", "2 double frees"; same in Italian.
pub(crate) fn count(n: u64, lang: Lang, en: (&str, &str), it: (&str, &str)) -> Said {
    let (one, many) = match lang.spoken() {
        Lang::En => en,
        Lang::It => it,
    };
    Said::from(format!("{n} {}", if n == 1 { one } else { many }))
}

/// What `who` got: `acme-1 got HTTP 400`, or `acme-1 got no answer`.
pub(crate) fn got(who: Said, status: Option<u16>, lang: Lang) -> Said {
    match status {
        Some(s) => say!(
            lang,
            "{who} got {h}",
            "{who} ha ricevuto {h}",
            who = who,
            h = http(s)
        ),
        None => say!(
            lang,
            "{who} got no answer",
            "{who} non ha ricevuto risposta",
            who = who
        ),
    }
}

/// An event by its index, numbered from 1 as the scenario page's steps are.
pub(crate) fn event(i: Option<u32>, lang: Lang) -> Said {
    match i {
        Some(i) => say!(lang, "event {n}", "evento {n}", n = u64::from(i) + 1),
        None => words(lang, "no event", "nessun evento"),
    }
}

/// "freed"; in Italian the participle agrees with the resource's noun.
pub(crate) fn freed(k: ResourceKind, lang: Lang) -> &'static str {
    match (lang.spoken(), k) {
        (Lang::En, _) => "freed",
        (Lang::It, ResourceKind::HicacheEntry) => "liberata",
        (Lang::It, _) => "liberato",
    }
}

pub(crate) fn decided(d: DoorDecision, lang: Lang) -> Said {
    match d {
        DoorDecision::Admitted => words(lang, "admitted it", "l'ha ammessa"),
        DoorDecision::Retired => words(lang, "retired it", "l'ha ritirata"),
        DoorDecision::Dropped => words(lang, "dropped it", "l'ha scartata"),
        DoorDecision::SentLastChunk => words(
            lang,
            "sent its last chunk",
            "ha inviato il suo ultimo chunk",
        ),
        DoorDecision::Aborted => words(lang, "aborted it", "l'ha interrotta"),
    }
}

/// A rule inside a switch, in words.
pub fn guard_rule(r: GuardRule, lang: Lang) -> Said {
    match r {
        GuardRule::UnadmittedRejectExclusions => say!(
            lang,
            "{f}'s exclusions for re-entering requests",
            "le esclusioni di {f} per le richieste che rientrano",
            f = code("is_unadmitted_reject")
        ),
        GuardRule::RetireOnlyPendingRejections => words(
            lang,
            "retiring only requests with a pending rejection",
            "ritirare solo le richieste con un rifiuto in sospeso",
        ),
        GuardRule::NullModeUntouched => words(
            lang,
            "NULL mode left alone by the PD doors",
            "la modalità NULL lasciata intatta dagli ingressi PD",
        ),
        GuardRule::SessionDetach => words(
            lang,
            "the retirement's session detach",
            "lo sgancio della sessione quando la richiesta è ritirata",
        ),
        GuardRule::DetachStreamingOnly => words(
            lang,
            "detaching streaming sessions only",
            "sganciare solo le sessioni in streaming",
        ),
        GuardRule::WaitForInflightWrites => words(
            lang,
            "waiting for in-flight chunk writes before release (model assumption: upstream's counter counts overlapped middle-chunk results, PR #36926)",
            "attendere le scritture di chunk in volo prima del rilascio (assunzione del modello: il contatore di upstream conta i risultati sovrapposti dei chunk intermedi, PR #36926)",
        ),
        GuardRule::IgnoreLateResults => words(
            lang,
            "ignoring late results of retired requests",
            "ignorare i risultati tardivi delle richieste ritirate",
        ),
        GuardRule::AckAfterWrites => words(
            lang,
            "prefill keeping the ack target until writes finish",
            "prefill che conserva il destinatario dell'ack finché le scritture non finiscono",
        ),
        GuardRule::AckEveryPeer => words(
            lang,
            "one ack per decode peer",
            "un ack per ogni peer di decode",
        ),
        GuardRule::AckClearedRoom => words(
            lang,
            "acking a cleared room once its chunk lands",
            "confermare con un ack una room svuotata quando il suo chunk arriva",
        ),
    }
}

/// A scenario's result in the reader's language.
pub fn status(s: ScenarioStatus, lang: Lang) -> &'static str {
    match s {
        ScenarioStatus::Pass => lang.pick("pass", "superato"),
        ScenarioStatus::Fail => lang.pick("fail", "fallito"),
        ScenarioStatus::NotExercised => lang.pick("not exercised", "non esercitato"),
    }
}
