//! The first failed check of a scenario run, and what the run did
//! instead, in words.

use kvw_evidence::judged::Breach;
use kvw_evidence::predicate::Worker;

use super::outcome::{double_frees, stale};
use super::parts::*;
use super::said::{code, say, words, Said};
use crate::Lang;

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
            t = code(crate::probe::finish_reason_or_none(to_finish.as_ref()))
        ),
        Breach::Endpoint {
            worker: Worker::Decode,
            created: true,
        } => words(
            lang,
            "decode created a receiver and a metadata buffer",
            "il decode ha creato un receiver e un metadata buffer",
        ),
        Breach::Endpoint {
            worker: Worker::Decode,
            created: false,
        } => words(
            lang,
            "decode created no receiver",
            "il decode non ha creato alcun receiver",
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
            "il decode le ha prenotato pagine ({r})",
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
        Breach::ReleasedWithoutDrainAck { rid, worker: w } => say!(
            lang,
            "{w} gave {rid}'s KV pages back without the drain ack, when the deferred release timed out",
            "{w} ha restituito le pagine KV di {rid} senza l'ack di drenaggio, allo scadere del rilascio differito",
            w = worker(*w, lang),
            rid = code(rid)
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
            "il decode ha prodotto output per la richiesta interrotta {rid}",
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
            "il prefill ha rilasciato all'{r}, non dopo l'arrivo della sua ultima scrittura di chunk ({l})",
            r = event(Some(*r), lang),
            l = event(*last_landing, lang)
        ),
        Breach::ReleasedBeforeLanding {
            release: None,
            last_landing,
        } => say!(
            lang,
            "prefill never released its pages (last chunk write landed: {l})",
            "il prefill non ha mai rilasciato le sue pagine (ultima scrittura di chunk arrivata: {l})",
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
