//! Sentences rendered from scenario and gate facts, in English and Italian.
//!
//! Scenario receipts and gates rows carry what was expected, observed and
//! why as typed facts ([`crate::judged`]); this module is the one place they
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

use std::fmt;

use crate::judged::{
    AfterReentry, Breach, Expected, GuardRule, Observed, Outcome, StaleWrite, Why, WorkerAnswer,
};
use crate::predicate::{DoorDecision, DoorName, Fix, ResourceKind, Worker};
use crate::render::{door_name, Lang};
use crate::scenario::ScenarioStatus;

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

    fn push(&mut self, piece: Piece) {
        match (self.0.last_mut(), piece) {
            (Some(Piece::Words(a)), Piece::Words(b)) => a.push_str(&b),
            (_, Piece::Words(b)) if b.is_empty() => {}
            (_, p) => self.0.push(p),
        }
    }

    fn extend(&mut self, other: Said) {
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
fn fill(template: &str, args: &[(&str, Said)]) -> Said {
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

macro_rules! say {
    ($lang:expr, $en:literal, $it:literal $(, $arg:ident = $val:expr)* $(,)?) => {
        fill(
            match $lang {
                Lang::En => $en,
                Lang::It => $it,
            },
            &[$((stringify!($arg), Said::from($val))),*],
        )
    };
}

fn join(items: Vec<Said>, sep: &str) -> Said {
    let mut out = Said::default();
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(Piece::Words(sep.to_string()));
        }
        out.extend(item);
    }
    out
}

fn words(lang: Lang, en: &str, it: &str) -> Said {
    Said::from(lang.pick(en, it))
}

/// Switch names joined with `, `, or "no fix".
pub fn fix_list(fixes: &[Fix], lang: Lang) -> Said {
    if fixes.is_empty() {
        return words(lang, "no fix", "nessuna correzione");
    }
    join(fixes.iter().map(|f| code(f.name())).collect(), ", ")
}

/// A per-request resource: its upstream field, or words where upstream has
/// no single field for it.
fn resource(k: ResourceKind, lang: Lang) -> Said {
    match k {
        ResourceKind::HicacheEntry | ResourceKind::SessionSlot => {
            Said::from(crate::render::resource_name(k, lang))
        }
        _ => code(crate::render::resource_name(k, lang)),
    }
}

fn door(d: DoorName) -> Said {
    code(door_name(d))
}

fn worker(w: Worker, lang: Lang) -> Said {
    Said::from(crate::render::worker(w, lang))
}

fn http(status: u16) -> Said {
    Said::from(format!("HTTP {status}"))
}

/// A worker's answers with their finish reasons, or "no answer".
fn answers(a: &[WorkerAnswer], lang: Lang) -> Said {
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
fn times(n: u32, lang: Lang) -> Said {
    count(u64::from(n), lang, ("time", "times"), ("volta", "volte"))
}

/// `n` of a thing: "1 double free", "2 double frees"; same in Italian.
fn count(n: u64, lang: Lang, en: (&str, &str), it: (&str, &str)) -> Said {
    let (one, many) = match lang {
        Lang::En => en,
        Lang::It => it,
    };
    Said::from(format!("{n} {}", if n == 1 { one } else { many }))
}

/// What `who` got: `acme-1 got HTTP 400`, or `acme-1 got no answer`.
fn got(who: Said, status: Option<u16>, lang: Lang) -> Said {
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
fn event(i: Option<u32>, lang: Lang) -> Said {
    match i {
        Some(i) => say!(lang, "event {n}", "evento {n}", n = u64::from(i) + 1),
        None => words(lang, "no event", "nessun evento"),
    }
}

/// "freed"; in Italian the participle agrees with the resource's noun.
fn freed(k: ResourceKind, lang: Lang) -> &'static str {
    match (lang, k) {
        (Lang::En, _) => "freed",
        (Lang::It, ResourceKind::HicacheEntry) => "liberata",
        (Lang::It, _) => "liberato",
    }
}

fn decided(d: DoorDecision, lang: Lang) -> Said {
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
            "la modalità NULL lasciata intatta dalle porte PD",
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
            "waiting for in-flight chunk writes before release",
            "attendere le scritture di chunk in volo prima del rilascio",
        ),
        GuardRule::IgnoreLateResults => words(
            lang,
            "ignoring late results of retired requests",
            "ignorare i risultati tardivi delle richieste ritirate",
        ),
        GuardRule::AckAfterWrites => words(
            lang,
            "keeping the ack target until writes finish",
            "conservare il destinatario dell'ack finché le scritture non finiscono",
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

fn after_reentry(a: &AfterReentry, lang: Lang) -> Said {
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
            "decode ha creato un nuovo receiver",
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
fn freed_once(freed: &[ResourceKind], lang: Lang) -> Said {
    let mut names = vec![words(lang, "KV pages", "pagine KV")];
    names.extend(freed.iter().map(|k| resource(*k, lang)));
    say!(
        lang,
        "freed once each: {n}",
        "ciascuno liberato una sola volta: {n}",
        n = join(names, ", ")
    )
}

/// What an assertion asserts, as it held.
pub fn outcome(o: &Outcome, lang: Lang) -> Said {
    match o {
        Outcome::RetiredAtDoor {
            door: DoorName::PrefillBootstrapQueue,
        } => say!(
            lang,
            "retired at {d}; no sender, bootstrap or forward",
            "ritirata da {d}; nessun sender, bootstrap o forward",
            d = door(DoorName::PrefillBootstrapQueue)
        ),
        Outcome::RetiredAtDoor {
            door: DoorName::DecodePreallocQueue,
        } => say!(
            lang,
            "retired at {d}; no receiver or page reservation",
            "ritirata da {d}; nessun receiver né prenotazione di pagine",
            d = door(DoorName::DecodePreallocQueue)
        ),
        Outcome::RetiredAtDoor { door: d } => {
            say!(lang, "retired at {d}", "ritirata da {d}", d = door(*d))
        }
        Outcome::AdmittedWithPendingAbort { door: d, then } => say!(
            lang,
            "admitted at {d} with its abort still pending; {then}",
            "ammessa da {d} con il suo abort ancora in sospeso; {then}",
            d = door(*d),
            then = after_reentry(then, lang)
        ),
        Outcome::ServedOwnText {
            door: Some(d),
            status,
        } => say!(
            lang,
            "admitted at {d} and answered {h} with its own text",
            "ammessa da {d} e servita con {h} e il proprio testo",
            d = door(*d),
            h = http(*status)
        ),
        Outcome::ServedOwnText { door: None, status } => say!(
            lang,
            "no input rejection; answered {h} with its own text",
            "nessun rifiuto dell'input; servita con {h} e il proprio testo",
            h = http(*status)
        ),
        Outcome::EnqueuedWithPendingReject { status } => say!(
            lang,
            "enqueued with its rejection pending in {f}; the batch boundary answered {h}",
            "accodata con il rifiuto in sospeso in {f}; a fine batch la risposta è {h}",
            f = code("to_finish"),
            h = http(*status)
        ),
        Outcome::SessionSlotReleased {
            status,
            next_status,
        } => say!(
            lang,
            "the rejected request kept its original {h}; the session slot was released; the next request got {next}",
            "la richiesta rifiutata ha mantenuto il suo {h} originale; lo slot della sessione è stato rilasciato; la richiesta successiva ha ricevuto {next}",
            h = http(*status),
            next = http(*next_status)
        ),
        Outcome::SessionLeftAlone {
            next_status: Some(next),
        } => say!(
            lang,
            "the session was left alone; the next request got {next}",
            "la sessione è rimasta intatta; la richiesta successiva ha ricevuto {next}",
            next = http(*next)
        ),
        Outcome::SessionLeftAlone { next_status: None } => words(
            lang,
            "the session was left alone; the next request was answered",
            "la sessione è rimasta intatta; la richiesta successiva ha avuto risposta",
        ),
        Outcome::ResultRetired {
            status,
            err_type,
            freed,
            chunks_sent,
            sender_abort_failed,
            released_after_landing,
        } => {
            let mut parts = vec![say!(
                lang,
                "retired at {d}",
                "ritirata da {d}",
                d = door(DoorName::PrefillResult)
            )];
            if *sender_abort_failed {
                parts.push(say!(
                    lang,
                    "{a} raised and the cleanup ran anyway",
                    "{a} ha sollevato un errore e la pulizia è avvenuta comunque",
                    a = code("sender.abort()")
                ));
            }
            parts.push(freed_once(freed, lang));
            if *released_after_landing {
                parts.push(words(
                    lang,
                    "released after its last chunk write landed",
                    "rilascio dopo l'arrivo della sua ultima scrittura di chunk",
                ));
            }
            parts.push(match chunks_sent {
                0 => words(lang, "nothing sent", "nulla inviato"),
                n => say!(
                    lang,
                    "{c} sent before the abort, none after",
                    "{c} prima dell'abort, nessuno dopo",
                    c = count(
                        u64::from(*n),
                        lang,
                        ("chunk", "chunks"),
                        ("chunk inviato", "chunk inviati")
                    )
                ),
            });
            let mut answer = say!(
                lang,
                "one prefill answer: {h}",
                "una sola risposta di prefill: {h}",
                h = http(*status)
            );
            if let Some(t) = err_type {
                answer.push(Piece::Words(" ".into()));
                answer.push(Piece::Code(t.clone()));
            }
            parts.push(answer);
            join(parts, "; ")
        }
        Outcome::MambaSlotFreedBeforeKv { status } => say!(
            lang,
            "{m} allocated before any KV and freed once; no forward; prefill answered {h}",
            "{m} allocato prima di qualsiasi KV e liberato una volta; nessun forward; prefill ha risposto {h}",
            m = resource(ResourceKind::MambaSlot, lang),
            h = http(*status)
        ),
        Outcome::LateWriteDrained {
            writer,
            reader,
            status,
        } => say!(
            lang,
            "{writer}'s pages were held until its late write drained; {reader} read only its own pages and got {h} with its own text",
            "le pagine di {writer} sono rimaste riservate finché la sua scrittura tardiva non è arrivata; {reader} ha letto solo le proprie pagine e ha ricevuto {h} con il proprio testo",
            writer = code(writer),
            reader = code(reader),
            h = http(*status)
        ),
        Outcome::AbortNotAnswered200 { status: Some(s) } => say!(
            lang,
            "no worker answered 200 for the aborted request; {g}",
            "nessun worker ha risposto 200 alla richiesta interrotta; {g}",
            g = got(words(lang, "the client", "il client"), Some(*s), lang)
        ),
        Outcome::AbortNotAnswered200 { status: None } => words(
            lang,
            "no worker answered 200 for the aborted request, nor did the client get 200",
            "nessun worker ha risposto 200 alla richiesta interrotta, né il client ha ricevuto 200",
        ),
        Outcome::MetadataIndexOneHolder => say!(
            lang,
            "every {m} freed once and never held by two requests; no KV page freed twice",
            "ogni {m} liberato una volta e mai in mano a due richieste; nessuna pagina KV liberata due volte",
            m = resource(ResourceKind::MetadataBuffer, lang)
        ),
        Outcome::FreedOnceAfterDrain { drain_acks } => {
            let mut said = words(
                lang,
                "no write landed outside its owner's pages; decode freed them once, after the drain",
                "nessuna scrittura fuori dalle pagine del suo proprietario; decode le ha liberate una volta, dopo il drain",
            );
            if let Some(n) = drain_acks {
                said.extend(fill(
                    " ({a})",
                    &[(
                        "a",
                        count(
                            u64::from(*n),
                            lang,
                            ("drain ack", "drain acks"),
                            ("ack di drain", "ack di drain"),
                        ),
                    )],
                ));
            }
            said
        }
        Outcome::RefusedBeyondPool { status: Some(s) } => say!(
            lang,
            "answered {h}, not 200; no foreign page read",
            "risposta {h}, non 200; nessuna pagina altrui letta",
            h = http(*s)
        ),
        Outcome::RefusedBeyondPool { status: None } => words(
            lang,
            "answered with an error, not 200; no foreign page read",
            "risposta con un errore, non 200; nessuna pagina altrui letta",
        ),
    }
}

fn stale(writes: &[StaleWrite], lang: Lang) -> Said {
    join(
        writes
            .iter()
            .map(|w| {
                say!(
                    lang,
                    "page {p} ({rid})",
                    "pagina {p} ({rid})",
                    p = w.page,
                    rid = code(&w.rid)
                )
            })
            .collect(),
        ", ",
    )
}

fn double_frees(n: u32, lang: Lang) -> Said {
    count(
        u64::from(n),
        lang,
        ("double free", "double frees"),
        ("doppia liberazione", "doppie liberazioni"),
    )
}

/// The first failed check, and what the run did instead.
pub fn breach(b: &Breach, lang: Lang) -> Said {
    match b {
        Breach::DoorDecided {
            door: d,
            decided: None,
            ..
        } => say!(
            lang,
            "the request never reached {d}",
            "la richiesta non è mai arrivata a {d}",
            d = door(*d)
        ),
        Breach::DoorDecided {
            door: d,
            decided: Some(what),
            to_finish,
        } => say!(
            lang,
            "{door} {what}, reading {f} {t}",
            "{door} {what}, leggendo {f} {t}",
            door = door(*d),
            what = decided(*what, lang),
            f = code("to_finish"),
            t = code(to_finish.as_deref().unwrap_or("None"))
        ),
        Breach::Endpoint {
            worker: Worker::Decode,
            created: true,
        } => words(
            lang,
            "decode created a receiver and a metadata buffer",
            "decode ha creato un receiver e un metadata buffer",
        ),
        Breach::Endpoint {
            worker: Worker::Decode,
            created: false,
        } => words(
            lang,
            "decode created no receiver",
            "decode non ha creato alcun receiver",
        ),
        Breach::Endpoint {
            worker: w,
            created: true,
        } => say!(
            lang,
            "{w} created a sender and a bootstrap",
            "{w} ha creato un sender e un bootstrap",
            w = worker(*w, lang)
        ),
        Breach::Endpoint {
            worker: w,
            created: false,
        } => say!(
            lang,
            "{w}'s bootstrap queue never took it",
            "la coda di bootstrap di {w} non l'ha mai presa in carico",
            w = worker(*w, lang)
        ),
        Breach::Forwards { count: n } => say!(
            lang,
            "it ran {f}",
            "ha eseguito {f}",
            f = count(
                u64::from(*n),
                lang,
                ("forward", "forwards"),
                ("forward", "forward")
            )
        ),
        Breach::Reserved { reservations } => say!(
            lang,
            "decode reserved pages for it ({r})",
            "decode le ha riservato pagine ({r})",
            r = count(
                u64::from(*reservations),
                lang,
                ("reservation", "reservations"),
                ("prenotazione", "prenotazioni")
            )
        ),
        Breach::ResourceFreed {
            rid,
            resource: k,
            frees,
            double_frees: d,
        } => say!(
            lang,
            "{rid}: {r} {freed} {t}, {d}",
            "{rid}: {r} {freed} {t}, {d}",
            rid = code(rid),
            r = resource(*k, lang),
            freed = freed(*k, lang),
            t = times(*frees, lang),
            d = double_frees(*d, lang)
        ),
        Breach::ResourceNotAllocated { resource: k } => say!(
            lang,
            "{r} was never allocated",
            "{r} non è mai stato allocato",
            r = resource(*k, lang)
        ),
        Breach::SenderAbortDidNotFail => say!(
            lang,
            "{a} did not raise as the script asked",
            "{a} non ha sollevato l'errore che lo script chiedeva",
            a = code("sender.abort()")
        ),
        Breach::SenderAborts { calls } => say!(
            lang,
            "{a} called {t}, not once",
            "{a} chiamato {t}, non una",
            a = code("sender.abort()"),
            t = times(*calls, lang)
        ),
        Breach::ChunksSent { sent, expected } => say!(
            lang,
            "{f} called {t}, expected {e}",
            "{f} chiamato {t}, attese {e}",
            f = code("send_kv_chunk"),
            t = times(*sent, lang),
            e = *expected
        ),
        Breach::PagesReleased {
            rid,
            worker: w,
            releases,
        } => say!(
            lang,
            "{w} released {rid}'s KV pages {t}, not once",
            "{w} ha rilasciato le pagine KV di {rid} {t}, non una",
            w = worker(*w, lang),
            rid = code(rid),
            t = times(*releases, lang)
        ),
        Breach::PageDoubleFrees { count: n } => say!(
            lang,
            "KV pages: {d}",
            "pagine KV: {d}",
            d = double_frees(*n, lang)
        ),
        Breach::Attended { rid } => say!(
            lang,
            "decode produced output for the aborted request {rid}",
            "decode ha prodotto output per la richiesta interrotta {rid}",
            rid = code(rid)
        ),
        Breach::WorkerAnswered {
            worker: w,
            answers: a,
            expected,
        } => say!(
            lang,
            "{w} answered {a}, not {e} once",
            "{w} ha risposto {a}, invece di {e} una volta",
            w = worker(*w, lang),
            a = answers(a, lang),
            e = http(*expected)
        ),
        Breach::WorkerAnswered200 { worker: w, answers: a } => say!(
            lang,
            "{w} answered {a} for a request its client aborted",
            "{w} ha risposto {a} a una richiesta interrotta dal suo client",
            w = worker(*w, lang),
            a = answers(a, lang)
        ),
        Breach::ClientGot {
            rid,
            status,
            expected: None,
        } => got(code(rid), *status, lang),
        Breach::ClientGot {
            rid,
            status,
            expected: Some(e),
        } => say!(
            lang,
            "{g}, not {e}",
            "{g}, invece di {e}",
            g = got(code(rid), *status, lang),
            e = http(*e)
        ),
        Breach::ClientGot200 { rid } => got(code(rid), Some(200), lang),
        Breach::NotOwnText { rid, status } => say!(
            lang,
            "{g}, not HTTP 200 with its own text",
            "{g}, invece di HTTP 200 con il proprio testo",
            g = got(code(rid), *status, lang)
        ),
        Breach::ErrType { got: g, expected } => say!(
            lang,
            "error type {g} instead of {e}",
            "tipo di errore {g} invece di {e}",
            g = code(g),
            e = code(expected)
        ),
        Breach::ReleasedBeforeLanding {
            release: Some(r),
            last_landing,
        } => say!(
            lang,
            "prefill released at {r}, not after its last chunk write landed ({l})",
            "prefill ha rilasciato all'{r}, non dopo l'arrivo della sua ultima scrittura di chunk ({l})",
            r = event(Some(*r), lang),
            l = event(*last_landing, lang)
        ),
        Breach::ReleasedBeforeLanding {
            release: None,
            last_landing,
        } => say!(
            lang,
            "prefill never released its pages (last chunk write landed: {l})",
            "prefill non ha mai rilasciato le sue pagine (ultima scrittura di chunk arrivata: {l})",
            l = event(*last_landing, lang)
        ),
        Breach::StaleWrites { writes } => say!(
            lang,
            "writes landed in pages their writer no longer held: {w}",
            "scritture arrivate in pagine che il loro autore non possedeva più: {w}",
            w = stale(writes, lang)
        ),
        Breach::ForeignReads { rid, pages } => say!(
            lang,
            "{rid} attended to {p} another request wrote",
            "l'attention di {rid} ha letto {p} da un'altra richiesta",
            rid = code(rid),
            p = count(
                *pages,
                lang,
                ("page", "pages"),
                ("pagina scritta", "pagine scritte")
            )
        ),
        Breach::SessionDetached { times: n } => say!(
            lang,
            "the non-streaming session was detached {t}",
            "la sessione non in streaming è stata sganciata {t}",
            t = times(*n, lang)
        ),
        Breach::InputRejected { rid } => say!(
            lang,
            "the input check rejected {rid}'s prompt",
            "il controllo dell'input ha rifiutato il prompt di {rid}",
            rid = code(rid)
        ),
    }
}

/// A scenario's own words: what it is, and what closes it. Code inside
/// them is marked with backticks.
#[derive(Debug, Clone, Copy)]
pub struct ScenarioText {
    pub name: &'static str,
    /// (English, Italian).
    pub description: (&'static str, &'static str),
    /// (English, Italian).
    pub closed_by: (&'static str, &'static str),
}

impl ScenarioText {
    pub fn description(&self, lang: Lang) -> Said {
        Said::marked(lang.pick(self.description.0, self.description.1))
    }

    pub fn closed_by(&self, lang: Lang) -> Said {
        Said::marked(lang.pick(self.closed_by.0, self.closed_by.1))
    }
}

/// The words of scenario `name`, if it is one this renderer knows.
pub fn scenario_text(name: &str) -> Option<&'static ScenarioText> {
    crate::scenario_words::SCENARIOS
        .iter()
        .find(|t| t.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn both(f: impl Fn(Lang) -> Said) -> (String, String) {
        (f(Lang::En).to_string(), f(Lang::It).to_string())
    }

    #[test]
    fn judged_facts_read_in_both_languages() {
        let guard = vec![Fix::RetireUnadmittedReject];
        assert_eq!(
            both(|l| expected(
                &Expected::FailsWithout {
                    guard: guard.clone()
                },
                l
            )),
            (
                "fails without retire-unadmitted-reject".into(),
                "fallisce senza retire-unadmitted-reject".into()
            )
        );
        assert_eq!(
            both(|l| why(&Why::Untested { guard: vec![] }, l)),
            (
                "no fix off: the defense was not tested".into(),
                "senza nessuna correzione la difesa non è stata messa alla prova".into()
            )
        );
        let held = Outcome::AdmittedWithPendingAbort {
            door: DoorName::DecodePreallocQueue,
            then: AfterReentry::ResumedRetracted { status: 503 },
        };
        assert_eq!(
            both(|l| observed(&Observed::Held { outcome: held.clone() }, l)),
            (
                "admitted at DecodePreallocQueue.add with its abort still pending; resumed from the retracted queue and answered its pending HTTP 503".into(),
                "ammessa da DecodePreallocQueue.add con il suo abort ancora in sospeso; ripresa dalla coda delle richieste ritratte e chiusa con l'HTTP 503 del suo abort in sospeso".into()
            )
        );
        let broke = Why::Broke {
            breach: Breach::ResourceFreed {
                rid: "acme-1".into(),
                resource: ResourceKind::HicacheEntry,
                frees: 2,
                double_frees: 1,
            },
            guard_off: guard.clone(),
        };
        assert_eq!(
            both(|l| why(&broke, l)),
            (
                "acme-1: the HiCache entry freed 2 times, 1 double free (without retire-unadmitted-reject)".into(),
                "acme-1: la voce HiCache liberata 2 volte, 1 doppia liberazione (senza retire-unadmitted-reject)".into()
            )
        );
        let retired = Outcome::ResultRetired {
            status: 400,
            err_type: Some("BadRequestError".into()),
            freed: vec![ResourceKind::MetadataBuffer],
            chunks_sent: 0,
            sender_abort_failed: true,
            released_after_landing: false,
        };
        assert_eq!(
            both(|l| outcome(&retired, l)),
            (
                "retired at process_batch_result_disagg_prefill; sender.abort() raised and the cleanup ran anyway; freed once each: KV pages, metadata_buffer_index; nothing sent; one prefill answer: HTTP 400 BadRequestError".into(),
                "ritirata da process_batch_result_disagg_prefill; sender.abort() ha sollevato un errore e la pulizia è avvenuta comunque; ciascuno liberato una sola volta: pagine KV, metadata_buffer_index; nulla inviato; una sola risposta di prefill: HTTP 400 BadRequestError".into()
            )
        );
        assert_eq!(
            both(|l| breach(
                &Breach::ClientGot {
                    rid: "umbrella-2".into(),
                    status: None,
                    expected: Some(200)
                },
                l
            )),
            (
                "umbrella-2 got no answer, not HTTP 200".into(),
                "umbrella-2 non ha ricevuto risposta, invece di HTTP 200".into()
            )
        );
    }

    #[test]
    fn code_stays_code_and_words_change_language() {
        let b = Breach::DoorDecided {
            door: DoorName::PrefillBootstrapQueue,
            decided: Some(DoorDecision::Admitted),
            to_finish: Some("FINISH_ABORT(status=400, \"Input length exceeds\")".into()),
        };
        let (en, it) = (breach(&b, Lang::En), breach(&b, Lang::It));
        let codes = |s: &Said| {
            s.pieces()
                .iter()
                .filter_map(|p| match p {
                    Piece::Code(c) => Some(c.clone()),
                    Piece::Words(_) => None,
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(codes(&en), codes(&it));
        assert_eq!(
            codes(&en),
            [
                "PrefillBootstrapQueue.add",
                "to_finish",
                "FINISH_ABORT(status=400, \"Input length exceeds\")"
            ]
        );
        assert_eq!(
            it.to_string(),
            "PrefillBootstrapQueue.add l'ha ammessa, leggendo to_finish FINISH_ABORT(status=400, \"Input length exceeds\")"
        );
        assert_eq!(
            Said::marked("calls `sender.abort()` once").pieces(),
            [
                Piece::Words("calls ".into()),
                Piece::Code("sender.abort()".into()),
                Piece::Words(" once".into())
            ]
        );
    }

    /// One of each fact, so every template is filled in both languages.
    fn every_fact() -> Vec<Said> {
        let rid = || "acme-1".to_string();
        let answer = || {
            vec![WorkerAnswer {
                status: 200,
                finish_reason: "FINISH_LENGTH(length=0)".into(),
            }]
        };
        let outcomes = vec![
            Outcome::RetiredAtDoor {
                door: DoorName::PrefillBootstrapQueue,
            },
            Outcome::RetiredAtDoor {
                door: DoorName::DecodePreallocQueue,
            },
            Outcome::RetiredAtDoor {
                door: DoorName::PrefillResult,
            },
            Outcome::AdmittedWithPendingAbort {
                door: DoorName::PrefillBootstrapQueue,
                then: AfterReentry::FreedByItsQueue {
                    resource: ResourceKind::RetractionBackup,
                },
            },
            Outcome::AdmittedWithPendingAbort {
                door: DoorName::PrefillBootstrapQueue,
                then: AfterReentry::Bootstrapped {
                    worker: Worker::Prefill,
                },
            },
            Outcome::AdmittedWithPendingAbort {
                door: DoorName::DecodePreallocQueue,
                then: AfterReentry::Bootstrapped {
                    worker: Worker::Decode,
                },
            },
            Outcome::ServedOwnText {
                door: None,
                status: 200,
            },
            Outcome::ServedOwnText {
                door: Some(DoorName::DecodePreallocQueue),
                status: 200,
            },
            Outcome::EnqueuedWithPendingReject { status: 400 },
            Outcome::SessionSlotReleased {
                status: 400,
                next_status: 200,
            },
            Outcome::SessionLeftAlone { next_status: None },
            Outcome::SessionLeftAlone {
                next_status: Some(200),
            },
            Outcome::ResultRetired {
                status: 503,
                err_type: None,
                freed: vec![],
                chunks_sent: 2,
                sender_abort_failed: false,
                released_after_landing: true,
            },
            Outcome::MambaSlotFreedBeforeKv { status: 503 },
            Outcome::LateWriteDrained {
                writer: rid(),
                reader: "umbrella-1".into(),
                status: 200,
            },
            Outcome::AbortNotAnswered200 { status: None },
            Outcome::AbortNotAnswered200 { status: Some(500) },
            Outcome::MetadataIndexOneHolder,
            Outcome::FreedOnceAfterDrain { drain_acks: None },
            Outcome::FreedOnceAfterDrain {
                drain_acks: Some(2),
            },
            Outcome::RefusedBeyondPool { status: None },
            Outcome::RefusedBeyondPool { status: Some(500) },
        ];
        let breaches = vec![
            Breach::DoorDecided {
                door: DoorName::PrefillResult,
                decided: None,
                to_finish: None,
            },
            Breach::DoorDecided {
                door: DoorName::PrefillResult,
                decided: Some(DoorDecision::SentLastChunk),
                to_finish: None,
            },
            Breach::Endpoint {
                worker: Worker::Prefill,
                created: true,
            },
            Breach::Endpoint {
                worker: Worker::Prefill,
                created: false,
            },
            Breach::Endpoint {
                worker: Worker::Decode,
                created: true,
            },
            Breach::Endpoint {
                worker: Worker::Decode,
                created: false,
            },
            Breach::Forwards { count: 1 },
            Breach::Reserved { reservations: 2 },
            Breach::ResourceNotAllocated {
                resource: ResourceKind::MambaSlot,
            },
            Breach::SenderAbortDidNotFail,
            Breach::SenderAborts { calls: 0 },
            Breach::ChunksSent {
                sent: 3,
                expected: 2,
            },
            Breach::PagesReleased {
                rid: rid(),
                worker: Worker::Decode,
                releases: 0,
            },
            Breach::PageDoubleFrees { count: 3 },
            Breach::Attended { rid: rid() },
            Breach::WorkerAnswered {
                worker: Worker::Decode,
                answers: vec![],
                expected: 503,
            },
            Breach::WorkerAnswered200 {
                worker: Worker::Prefill,
                answers: answer(),
            },
            Breach::ClientGot {
                rid: rid(),
                status: None,
                expected: None,
            },
            Breach::ClientGot {
                rid: rid(),
                status: Some(500),
                expected: Some(400),
            },
            Breach::ClientGot200 { rid: rid() },
            Breach::NotOwnText {
                rid: rid(),
                status: Some(200),
            },
            Breach::ErrType {
                got: "Error".into(),
                expected: "BadRequestError".into(),
            },
            Breach::ReleasedBeforeLanding {
                release: Some(3),
                last_landing: None,
            },
            Breach::ReleasedBeforeLanding {
                release: None,
                last_landing: Some(7),
            },
            Breach::StaleWrites {
                writes: vec![StaleWrite {
                    rid: rid(),
                    page: 6,
                }],
            },
            Breach::ForeignReads {
                rid: rid(),
                pages: 7,
            },
            Breach::SessionDetached { times: 1 },
            Breach::InputRejected { rid: rid() },
        ];
        let mut out = Vec::new();
        for lang in [Lang::En, Lang::It] {
            out.extend(outcomes.iter().map(|o| outcome(o, lang)));
            out.extend(breaches.iter().map(|b| breach(b, lang)));
            out.extend(GuardRule::ALL.iter().map(|r| guard_rule(*r, lang)));
        }
        out
    }

    #[test]
    fn every_fact_fills_its_template_and_differs_by_language() {
        let all = every_fact();
        let (en, it) = all.split_at(all.len() / 2);
        for (e, i) in en.iter().zip(it) {
            for s in [e, i] {
                let text = s.to_string();
                assert!(
                    !text.is_empty() && !text.contains("{") && !text.contains("}"),
                    "{text}"
                );
            }
            assert_ne!(e.to_string(), i.to_string());
        }
    }

    #[test]
    fn facts_refuse_unknown_fields_and_variants() {
        let ok = r#"{"kind":"broke","breach":{"kind":"forwards","count":1},"guard_off":[]}"#;
        assert!(serde_json::from_str::<Why>(ok).is_ok());
        let extra =
            r#"{"kind":"broke","breach":{"kind":"forwards","count":1,"x":2},"guard_off":[]}"#;
        assert!(serde_json::from_str::<Why>(extra).is_err());
        let unknown = r#"{"kind":"held","outcome":{"kind":"made_up"}}"#;
        assert!(serde_json::from_str::<Observed>(unknown).is_err());
        assert!(serde_json::from_str::<GuardRule>(r#""made-up""#).is_err());
    }
}
