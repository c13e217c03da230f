//! What an assertion asserts, as it held, in words.

use kvw_evidence::judged::{Outcome, StaleWrite};
use kvw_evidence::predicate::{DoorName, ResourceKind};

use super::judged::{after_reentry, freed_once};
use super::parts::*;
use super::said::{code, fill, join, say, words, Piece, Said};
use crate::Lang;

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
            "le pagine di {writer} sono rimaste trattenute finché la sua scrittura tardiva non è arrivata; {reader} ha letto solo le proprie pagine e ha ricevuto {h} con il proprio testo",
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

pub(crate) fn stale(writes: &[StaleWrite], lang: Lang) -> Said {
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

pub(crate) fn double_frees(n: u32, lang: Lang) -> Said {
    count(
        u64::from(n),
        lang,
        ("double free", "double frees"),
        ("doppia liberazione", "doppie liberazioni"),
    )
}
