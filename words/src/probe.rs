//! Sentences about a probe run, rendered from its receipt's facts, in
//! English and Italian.
//!
//! Receipts sign facts (typed events and claims), never prose. The command
//! line and the explorer both call this module, so a reader sees the same
//! sentence wherever a receipt is shown, and the Italian page is Italian
//! throughout. It is plain string formatting: no I/O, and it builds for
//! wasm32.

use crate::lang::say;
pub use crate::lang::Lang;
use kvw_evidence::predicate::{
    AbortCause, AssumptionId, Claim, DoorDecision, DoorName, Event, EventKind, FinishReason,
    Outcome, PoisonMode, PollResult, ProbePredicate, Provenance, ResourceAction, ResourceKind,
    Step, StopCause, Worker,
};

/// Each switch as `name (origin)`, joined with `, `; `none` when none is on.
pub fn fix_labels(fixes: &[kvw_evidence::Fix]) -> String {
    if fixes.is_empty() {
        return "none".into();
    }
    let labels: Vec<_> = fixes.iter().map(|f| f.label()).collect();
    labels.join(", ")
}

/// Name of step `n` (1..=7).
pub fn step_name(n: u8, lang: Lang) -> &'static str {
    const EN: [&str; 7] = [
        "Bootstrap",
        "Prefill admission",
        "Prefill forward",
        "KV transfer",
        "Decode admission",
        "Decode attention",
        "Response",
    ];
    const IT: [&str; 7] = [
        "Bootstrap",
        "Ammissione in prefill",
        "Forward di prefill",
        "Trasferimento KV",
        "Ammissione in decode",
        "Attention in decode",
        "Risposta",
    ];
    let i = usize::from(n.clamp(1, 7)) - 1;
    match lang.spoken() {
        Lang::En => EN[i],
        Lang::It => IT[i],
    }
}

/// Short label of a provenance.
pub fn provenance_label(p: Provenance, lang: Lang) -> &'static str {
    match p {
        Provenance::Disclosed => lang.pick("disclosed", "dichiarato"),
        Provenance::UpstreamTest => lang.pick("upstream test", "test upstream"),
        Provenance::UpstreamThread => lang.pick("upstream thread", "discussione upstream"),
        Provenance::UpstreamCode => lang.pick("upstream code", "codice upstream"),
        Provenance::UpstreamRun => lang.pick("upstream run", "esecuzione upstream"),
        Provenance::ModelAssumption => lang.pick("model assumption", "ipotesi del modello"),
    }
}

/// How well established a provenance is; a step is as weak as its weakest fact.
fn strength(p: Provenance) -> u8 {
    match p {
        Provenance::Disclosed => 4,
        // The released code itself, run: as strong as an upstream test.
        Provenance::UpstreamRun | Provenance::UpstreamTest => 3,
        Provenance::UpstreamCode => 2,
        Provenance::UpstreamThread => 1,
        Provenance::ModelAssumption => 0,
    }
}

/// A step's provenance: that of its least established fact.
pub fn step_provenance(step: &Step) -> Provenance {
    step.facts
        .iter()
        .map(|f| f.provenance)
        .min_by_key(|p| strength(*p))
        .unwrap_or(Provenance::ModelAssumption)
}

/// A worker as the events name it.
pub fn worker(w: Worker, lang: Lang) -> &'static str {
    match w {
        Worker::Router => "router",
        Worker::Prefill => "prefill",
        Worker::Decode => "decode",
        Worker::Client => lang.pick("client", "client"),
    }
}

/// The upstream name of a door.
pub fn door_name(d: DoorName) -> &'static str {
    match d {
        DoorName::PrefillBootstrapQueue => "PrefillBootstrapQueue.add",
        DoorName::PrefillWaitingQueue => "get_new_batch_prefill",
        DoorName::PrefillResult => "process_batch_result_disagg_prefill",
        DoorName::DecodePreallocQueue => "DecodePreallocQueue.add",
        DoorName::DecodeTransferQueue => "DecodeTransferQueue.pop_transferred",
    }
}

/// A per-request resource by its upstream field, or in words where upstream
/// has no single field for it.
pub fn resource_name(k: ResourceKind, lang: Lang) -> &'static str {
    match k {
        ResourceKind::MetadataBuffer => "metadata_buffer_index",
        ResourceKind::MambaSlot => "mamba_pool_idx",
        ResourceKind::HicacheEntry => lang.pick("the HiCache entry", "la voce HiCache"),
        ResourceKind::RetractionBackup => "retraction_backup",
        ResourceKind::SessionSlot => lang.pick("the session slot", "lo slot della sessione"),
        ResourceKind::KvSender => "disagg_kv_sender",
    }
}

fn resource_action(a: ResourceAction, lang: Lang) -> &'static str {
    match a {
        ResourceAction::Allocate => lang.pick("allocated", "allocato"),
        ResourceAction::Free => lang.pick("freed", "liberato"),
        ResourceAction::DoubleFree => lang.pick(
            "freed again (double free)",
            "liberato di nuovo (doppia liberazione)",
        ),
        ResourceAction::Detach => {
            lang.pick("detached from the request", "staccato dalla richiesta")
        }
        ResourceAction::AbortFailed => lang.pick(
            "sender.abort() raised; cleanup went on",
            "sender.abort() ha sollevato un errore; la pulizia è proseguita",
        ),
    }
}

fn cause(c: AbortCause, lang: Lang) -> &'static str {
    match c {
        AbortCause::Timeout => lang.pick(
            "the waiting timeout passed without a complete handoff",
            "è scaduto il timeout di attesa senza un handoff completo",
        ),
        AbortCause::ChecksumMismatch => lang.pick(
            "the KV checksum did not match",
            "il checksum KV non corrispondeva",
        ),
        AbortCause::AlreadyFinished => lang.pick(
            "the request was already finished",
            "la richiesta era già terminata",
        ),
        AbortCause::TransferFailed => {
            lang.pick("the transfer failed", "il trasferimento è fallito")
        }
    }
}

fn stop(c: StopCause, lang: Lang) -> &'static str {
    match c {
        StopCause::RetiredAtPrefillDoor => lang.pick(
            "Not reached: prefill's entry door retired the request (PR #38935) before any bootstrap or forward.",
            "Non raggiunto: l'ingresso di prefill ha ritirato la richiesta (PR #38935) prima di bootstrap e forward.",
        ),
        StopCause::RetiredAtDecodeDoor => lang.pick(
            "Not reached: decode's entry door retired the request (PR #38935) before reserving pages.",
            "Non raggiunto: l'ingresso di decode ha ritirato la richiesta (PR #38935) prima di prenotare pagine.",
        ),
        StopCause::ResultRetired => lang.pick(
            "Not reached: prefill retired the aborted result (PR #36988), so no handoff reached decode.",
            "Non raggiunto: prefill ha ritirato il risultato interrotto (PR #36988), quindi nessun handoff è arrivato a decode.",
        ),
        StopCause::AbortedBeforeBatch => lang.pick(
            "Not reached: decode aborted the request before batching it.",
            "Non raggiunto: decode ha interrotto la richiesta prima di metterla in batch.",
        ),
        StopCause::RefusedBeforeRead => lang.pick(
            "Not reached: the read was refused.",
            "Non raggiunto: la lettura è stata rifiutata.",
        ),
        StopCause::Other => lang.pick("Not reached in this run.", "Non raggiunto in questa esecuzione."),
    }
}

/// One sentence for one claim.
pub fn claim(c: &Claim, lang: Lang) -> String {
    match c {
        Claim::Dispatched { prompt_len, room } => say!(lang,
            "The router sent the {prompt_len}-token prompt to prefill and to decode, naming bootstrap room {room} for the handoff.",
            "Il router ha inviato il prompt di {prompt_len} token a prefill e a decode, indicando la room di bootstrap {room} per l'handoff.",
            prompt_len = prompt_len, room = room),
        Claim::InputRejected { worker: w, input_len, cap } => say!(lang,
            "{w}'s input check rejected {input_len} tokens (cap {cap}): set_finish_with_abort put the rejection in to_finish and replaced the prompt with a 1-token placeholder; finished() stays false.",
            "Il controllo d'ingresso di {w} ha rifiutato {input_len} token (limite {cap}): set_finish_with_abort ha messo il rifiuto in to_finish e sostituito il prompt con un segnaposto di 1 token; finished() resta falso.",
            w = worker(*w, lang), input_len = input_len, cap = cap),
        Claim::InputAccepted { worker: w, input_len, cap } => say!(lang,
            "{w}'s input check accepted {input_len} tokens (cap {cap}).",
            "Il controllo d'ingresso di {w} ha accettato {input_len} token (limite {cap}).",
            w = worker(*w, lang), input_len = input_len, cap = cap),
        Claim::Door { door, decision: d, finished, to_finish_set } => {
            let pending = if *to_finish_set {
                lang.pick("a rejection is pending in to_finish", "un rifiuto è in sospeso in to_finish")
            } else {
                lang.pick("to_finish is empty", "to_finish è vuoto")
            };
            say!(lang,
                "Door {door}: finished() → {finished}, {pending}; the request was {d}.",
                "Ingresso {door}: finished() → {finished}, {pending}; la richiesta è stata {d}.",
                door = door_name(*door), finished = finished, pending = pending, d = decision(*d, lang))
        }
        Claim::Reserved { pages, tokens, page_size, previously_written } => say!(lang,
            "Decode reserved {pages} pages of {page_size} tokens for {tokens} tokens; {previously_written} of them still hold bytes of earlier requests (freed pages are not cleared).",
            "Il decode ha prenotato {pages} pagine da {page_size} token per {tokens} token; {previously_written} contengono ancora byte di richieste precedenti (le pagine liberate non vengono azzerate).",
            pages = pages, page_size = page_size, tokens = tokens, previously_written = previously_written),
        Claim::NothingReserved => lang.pick(
            "No KV receiver or page reservation was made on decode for this request.",
            "Su decode non è stato creato alcun receiver KV né prenotata alcuna pagina per questa richiesta.",
        ).to_string(),
        Claim::Forwarded { tokens, prompt_len, pages } => say!(lang,
            "The prefill forward computed KV for {tokens} of the {prompt_len} prompt tokens, in {pages}.",
            "Il forward di prefill ha calcolato la KV di {tokens} dei {prompt_len} token del prompt, in {pages}.",
            tokens = tokens, prompt_len = prompt_len,
            pages = lang.count(*pages, ["prefill page", "prefill pages"], ["pagina di prefill", "pagine di prefill"])),
        Claim::HandoffSent { pages_sent, pages_reserved, tokens_covered, prompt_len, with_checksum, stale_tail_slots } => {
            let mut s = say!(lang,
                "Prefill sent {pages_sent} with the final flag while decode had reserved {pages_reserved}: the handoff covers {tokens_covered} of {prompt_len} prompt tokens, yet it will report complete.",
                "Il prefill ha inviato {pages_sent} con il flag finale mentre il decode ne aveva prenotate {pages_reserved}: l'handoff copre {tokens_covered} di {prompt_len} token del prompt, eppure risulterà completo.",
                pages_sent = lang.count(*pages_sent, ["page", "pages"], ["pagina", "pagine"]), pages_reserved = pages_reserved, tokens_covered = tokens_covered, prompt_len = prompt_len);
            if *stale_tail_slots > 0 {
                s += " ";
                s += &say!(lang,
                    "A transfer moves whole pages: {stale_tail_slots} of the last page {carry} what prefill's page held before.",
                    "Un trasferimento sposta pagine intere: {stale_tail_slots} dell'ultima pagina {carry} ciò che la pagina di prefill conteneva prima.",
                    stale_tail_slots = lang.count(*stale_tail_slots, ["slot", "slots"], ["slot", "slot"]),
                    carry = lang.agree(*stale_tail_slots, ["carries", "carry"], ["porta", "portano"]));
            }
            if *with_checksum {
                s += " ";
                s += lang.pick(
                    "An Adler-32 checksum of the sent pages travels with the final chunk.",
                    "Un checksum Adler-32 delle pagine inviate viaggia con il chunk finale.",
                );
            }
            s
        }
        Claim::ResultRetired => lang.pick(
            "Prefill retired the aborted result: KV and metadata freed once, sender.abort() called (best effort), nothing sent to decode.",
            "Il prefill ha ritirato il risultato interrotto: KV e metadati liberati una volta, sender.abort() chiamato (best effort), niente inviato al decode.",
        ).to_string(),
        Claim::HandoffAccepted { pages_written, pages_reserved } => say!(lang,
            "The receiver polled Success with {pages_written} of {pages_reserved} reserved pages written, and finished() was false: decode accepted the handoff.",
            "Il receiver ha letto Success con {pages_written} delle {pages_reserved} pagine prenotate scritte, e finished() era falso: decode ha accettato l'handoff.",
            pages_written = pages_written, pages_reserved = pages_reserved),
        Claim::HandoffAborted { cause: c, status } => say!(lang,
            "Decode aborted the request before batching it with status {status}: {c}.",
            "Il decode ha interrotto la richiesta prima del batch con stato {status}: {c}.",
            status = status, c = cause(*c, lang)),
        Claim::Attended { pages_read, positions, foreign_pages } => {
            let mut s = say!(lang,
                "Decode attention read {pages_read} pages for {positions} positions; {foreign_pages} of them were written by other requests.",
                "L'attention di decode ha letto {pages_read} pagine per {positions} posizioni; {foreign_pages} erano state scritte da altre richieste.",
                pages_read = pages_read, positions = positions, foreign_pages = foreign_pages);
            if *foreign_pages > 0 {
                s += " ";
                s += lang.pick(
                    "Their KV entered this request's softmax.",
                    "La loro KV è entrata nella softmax di questa richiesta.",
                );
            }
            s
        }
        Claim::LaterForeignReads { decode_step, pages } => say!(lang,
            "At decode step {decode_step}, {pages} of the read set {held} bytes another request wrote.",
            "Al passo di decode {decode_step}, tra le pagine lette, {pages} {held} byte scritti da un'altra richiesta.",
            decode_step = decode_step, pages = lang.count(*pages, ["page", "pages"], ["pagina", "pagine"]),
            held = lang.agree(*pages, ["held", "held"], ["conteneva", "contenevano"])),
        Claim::PoisonFound { pages, mode } => match mode {
            PoisonMode::Refuse => say!(lang,
                "poison-on-free found {pages} in the read set and aborted the request before attention read them.",
                "poison-on-free ha trovato {pages} tra quelle da leggere e ha interrotto la richiesta prima della lettura.",
                pages = lang.count(*pages, ["freed page", "freed pages"], ["pagina liberata", "pagine liberate"])),
            _ => say!(lang,
                "poison-on-free logged {pages} in the read set and let the read go on.",
                "poison-on-free ha registrato {pages} tra quelle lette e ha lasciato proseguire la lettura.",
                pages = lang.count(*pages, ["freed page", "freed pages"], ["pagina liberata", "pagine liberate"])),
        },
        Claim::TagRefused { index, page } => say!(lang,
            "Page tags refused page {page} (entry {index} of the page table): its owner tag is not this request's. The read failed closed.",
            "I tag di pagina hanno rifiutato la pagina {page} (voce {index} della tabella): il suo tag non è di questa richiesta. La lettura è fallita in modo sicuro.",
            page = page, index = index),
        Claim::Answered { prefill_status, decode_status, status, latency_us, outcome: o } => {
            let secs = seconds(*latency_us);
            let workers = match (prefill_status, decode_status) {
                (Some(p), Some(d)) => say!(lang,
                    "Prefill answered {p} and decode {d}; the router returned decode's answer. ",
                    "Il prefill ha risposto {p} e il decode {d}; il router ha restituito la risposta del decode. ",
                    p = p, d = d),
                _ => String::new(),
            };
            format!(
                "{workers}{}",
                say!(lang,
                    "The client got HTTP {status} after {secs} virtual seconds: {o}.",
                    "Il client ha ricevuto HTTP {status} dopo {secs} secondi virtuali: {o}.",
                    status = status, secs = secs, o = outcome_word(*o, lang))
            )
        }
        Claim::NotReached { because } => stop(*because, lang).to_string(),
    }
}

/// Virtual microseconds as seconds with three decimals, truncated (so every
/// surface shows the same figure for the same timestamp).
pub fn seconds(us: u64) -> String {
    format!("{}.{:03}", us / 1_000_000, (us % 1_000_000) / 1_000)
}

/// One word for an outcome.
pub fn outcome_word(o: Outcome, lang: Lang) -> &'static str {
    match o {
        Outcome::Leak => lang.pick(
            "another tenant's data leaked",
            "sono trapelati dati di un altro tenant",
        ),
        Outcome::WrongAnswer => lang.pick(
            "no foreign data, but a wrong answer",
            "nessun dato altrui, ma una risposta sbagliata",
        ),
        Outcome::Correct => lang.pick(
            "the request's own, correct answer",
            "la risposta corretta della richiesta",
        ),
        Outcome::Refused => lang.pick("an error, no foreign data", "un errore, nessun dato altrui"),
    }
}

/// The sentences of one step.
pub fn step_sentences(step: &Step, lang: Lang) -> Vec<String> {
    step.facts.iter().map(|f| claim(&f.claim, lang)).collect()
}

/// One line for the whole run, e.g. `LEAK: HTTP 200 for umbrella carrying acme's canary`.
pub fn outcome_line(p: &ProbePredicate, lang: Lang) -> String {
    let v = &p.verdict;
    let me = p
        .requests
        .iter()
        .find(|r| r.probed)
        .map(|r| r.tenant.as_str());
    verdict_line(
        &Verdict {
            outcome: v.outcome,
            http_status: v.http_status,
            foreign_pages_read: v.foreign_pages_read,
            tenant: me,
            tenants_leaked: &v.tenants_leaked,
            latency_us: v.latency_us,
        },
        lang,
    )
}

/// The facts [`verdict_line`] says, wherever they come from (a receipt, or
/// a bundle index's summary of one).
pub struct Verdict<'a> {
    pub outcome: Outcome,
    pub http_status: u16,
    pub foreign_pages_read: u64,
    /// Tenant of the probed request.
    pub tenant: Option<&'a str>,
    pub tenants_leaked: &'a [String],
    pub latency_us: u64,
}

/// One line for a run's verdict.
pub fn verdict_line(v: &Verdict<'_>, lang: Lang) -> String {
    let me = v.tenant.unwrap_or("?");
    let status = v.http_status;
    let foreign = v.foreign_pages_read;
    match v.outcome {
        Outcome::Leak if !v.tenants_leaked.is_empty() => say!(
            lang,
            "LEAK: HTTP {status} for tenant {me} carrying {who}'s canary; {foreign} read.",
            "FUGA: HTTP {status} per il tenant {me} con il canary di {who}; {foreign}.",
            status = status,
            me = me,
            who = v.tenants_leaked.join(", "),
            foreign = lang.count(
                foreign,
                ["foreign page", "foreign pages"],
                ["pagina altrui letta", "pagine altrui lette"]
            )
        ),
        Outcome::Leak => say!(
            lang,
            "LEAK: HTTP {status} computed over {foreign} of other requests.",
            "FUGA: HTTP {status} calcolato su {foreign} di altre richieste.",
            status = status,
            foreign = lang.count(foreign, ["page", "pages"], ["pagina", "pagine"])
        ),
        Outcome::WrongAnswer => lang
            .pick(
                "No foreign data, but HTTP 200 with a wrong answer.",
                "Nessun dato altrui, ma HTTP 200 con una risposta sbagliata.",
            )
            .to_string(),
        Outcome::Correct => lang
            .pick(
                "Correct: HTTP 200 with the request's own text.",
                "Corretto: HTTP 200 con il testo della richiesta stessa.",
            )
            .to_string(),
        Outcome::Refused => {
            let secs = v.latency_us / 1_000_000;
            if secs >= 1 {
                say!(
                    lang,
                    "No leak: HTTP {status} after {secs} s.",
                    "Nessuna fuga: HTTP {status} dopo {secs} s.",
                    status = status,
                    secs = secs
                )
            } else {
                say!(
                    lang,
                    "No leak: HTTP {status} at once.",
                    "Nessuna fuga: HTTP {status} subito.",
                    status = status
                )
            }
        }
    }
}

/// A finish reason as upstream's `repr` shows it, e.g.
/// `FINISH_ABORT(status=400, "Input length …")`.
pub fn finish_reason(r: &FinishReason) -> String {
    match r {
        FinishReason::Length { length } => format!("FINISH_LENGTH(length={length})"),
        FinishReason::Abort {
            status_code,
            message,
        } => format!("FINISH_ABORT(status={status_code}, {message:?})"),
    }
}

/// An optional finish reason, `None` when empty (as Python prints it).
pub fn finish_reason_or_none(r: Option<&FinishReason>) -> String {
    r.map_or_else(|| "None".to_string(), finish_reason)
}

/// What a door decided, in words.
pub fn decision(d: DoorDecision, lang: Lang) -> &'static str {
    match d {
        DoorDecision::Admitted => lang.pick("admitted", "ammessa"),
        DoorDecision::Retired => lang.pick("retired", "ritirata"),
        DoorDecision::Dropped => lang.pick("dropped", "scartata"),
        DoorDecision::SentLastChunk => lang.pick("last chunk sent", "ultimo chunk inviato"),
        DoorDecision::Aborted => lang.pick("aborted", "interrotta"),
    }
}

/// What a model assumption says.
pub fn assumption_text(id: AssumptionId, lang: Lang) -> &'static str {
    match id {
        AssumptionId::DecodePool => lang.pick(
            "The decode pool's size is not in the record. The default holds the whole context, so decode's own input check accepts the prompt and reserves pages for its full length, which is what the disclosed HTTP 200 requires.",
            "La dimensione del pool di decode non è documentata. Il valore predefinito contiene l'intero contesto, quindi il controllo d'ingresso di decode accetta il prompt e prenota pagine per tutta la sua lunghezza, come richiede l'HTTP 200 dichiarato.",
        ),
        AssumptionId::PageSize => lang.pick(
            "Page size 64 at incident scale comes from SGLang issue #30233, reported on GLM-5.2, not from the GLM-5.3 disclosure.",
            "La dimensione di pagina 64 alla scala dell'incidente viene dalla issue SGLang #30233, segnalata su GLM-5.2, non dalla dichiarazione su GLM-5.3.",
        ),
        AssumptionId::WarmPool => lang.pick(
            "Before the probe, earlier requests of several tenants filled and freed the decode pool, as in a busy production pool.",
            "Prima della sonda, richieste precedenti di diversi tenant hanno riempito e liberato il pool di decode, come in un pool di produzione carico.",
        ),
        AssumptionId::PageTail => lang.pick(
            "A transfer moves whole pages, so the unused tail of the last page carries whatever prefill's page held before.",
            "Un trasferimento sposta pagine intere, quindi la coda inutilizzata dell'ultima pagina porta ciò che la pagina di prefill conteneva prima.",
        ),
        AssumptionId::ChecksumScope => lang.pick(
            "Which pages decode digests is not in the record; the default digests every reserved page. The record also says the checksum did not cover GLM-5.3.",
            "Quali pagine decode includa nel checksum non è documentato; il valore predefinito include tutte le pagine prenotate. Inoltre il checksum non copriva GLM-5.3.",
        ),
        AssumptionId::TagRefusalStatus => lang.pick(
            "The status a page-tag refusal answers is not in the record (the prototype ran on GLM-5.2 and was switched off); this engine answers 500.",
            "Lo stato restituito da un rifiuto dei tag di pagina non è documentato (il prototipo girava su GLM-5.2 ed è stato spento); questo motore risponde 500.",
        ),
        AssumptionId::PoisonOnFree => lang.pick(
            "poison-on-free is this project's own defense, not upstream's --kv-canary (which writes and checks canary slots around each forward and is not modelled). The record says SGLang's canary did not cover GLM-5.3.",
            "poison-on-free è una difesa di questo progetto, non il --kv-canary upstream (che scrive e verifica slot canary attorno a ogni forward e non è modellato). Il canary di SGLang non copriva GLM-5.3.",
        ),
        AssumptionId::ScrubOnFree => lang.pick(
            "scrub-on-free is this project's own defense: freed pages are zeroed.",
            "scrub-on-free è una difesa di questo progetto: le pagine liberate vengono azzerate.",
        ),
    }
}

/// One line for an event.
pub fn event_line(e: &Event, lang: Lang) -> String {
    let body = match &e.kind {
        EventKind::Dispatch { prompt_len, room } => say!(lang,
            "router → prefill + decode: {prompt_len} tokens, room {room}",
            "router → prefill + decode: {prompt_len} token, room {room}",
            prompt_len = prompt_len, room = room),
        EventKind::InputCheck { worker: w, input_len, cap, rejected } => {
            let verdict = if *rejected { lang.pick("rejected", "rifiutato") } else { lang.pick("accepted", "accettato") };
            say!(lang, "{w}: input {input_len} vs cap {cap}: {verdict}", "{w}: input {input_len} contro limite {cap}: {verdict}",
                w = worker(*w, lang), input_len = input_len, cap = cap, verdict = verdict)
        }
        EventKind::Door { worker: w, door, state, decision: d } => say!(lang,
            "{w}: {door}: finished()={f}, to_finish={t} → {d}",
            "{w}: {door}: finished()={f}, to_finish={t} → {d}",
            w = worker(*w, lang), door = door_name(*door), f = state.finished,
            t = finish_reason_or_none(state.to_finish.as_ref()), d = decision(*d, lang)),
        EventKind::Bootstrap { worker: w, room, metadata_buffer } => say!(lang,
            "{w}: KV endpoint for room {room}, metadata buffer {metadata_buffer}",
            "{w}: endpoint KV per la room {room}, metadata buffer {metadata_buffer}",
            w = worker(*w, lang), room = room, metadata_buffer = metadata_buffer),
        EventKind::Reserve { pages, tokens } => say!(lang,
            "decode: _pre_alloc reserved {n} for {tokens} tokens",
            "decode: _pre_alloc ha prenotato {n} per {tokens} token",
            n = lang.count(pages.iter().map(|r| r.count).sum::<u64>(), ["page", "pages"], ["pagina", "pagine"]), tokens = tokens),
        EventKind::Handshake { room } => say!(lang, "prefill: handshake for room {room}", "prefill: handshake per la room {room}", room = room),
        EventKind::Forward { from, to, pages } => say!(lang,
            "prefill: forward over positions {from}..{to} ({pages})",
            "prefill: forward sulle posizioni {from}..{to} ({pages})",
            from = from, to = to, pages = lang.count(*pages, ["page", "pages"], ["pagina", "pagine"])),
        EventKind::KvSend { pages, last, checksum } => say!(lang,
            "prefill: send_kv_chunk {pages}, last={last}{c}",
            "prefill: send_kv_chunk {pages}, last={last}{c}",
            pages = lang.count(*pages, ["page", "pages"], ["pagina", "pagine"]), last = last, c = checksum.map(|c| format!(", Adler-32 {c:#010x}")).unwrap_or_default()),
        EventKind::KvLanded { pages, .. } => say!(lang,
            "transfer: {n} landed in decode's pool",
            "trasferimento: {n} nel pool di decode",
            n = lang.count(pages.iter().map(|r| r.count).sum::<u64>(), ["page write", "page writes"], ["scrittura di pagina arrivata", "scritture di pagina arrivate"])),
        EventKind::SenderAbort { room } => say!(lang, "prefill: sender.abort() for room {room}", "prefill: sender.abort() per la room {room}", room = room),
        EventKind::Poll { worker: w, result } => {
            let r = match result { PollResult::Transferring => "Transferring", PollResult::Success => "Success", PollResult::Failed => "Failed" };
            say!(lang, "{w}: poll → {r}", "{w}: poll → {r}", w = worker(*w, lang), r = r)
        }
        EventKind::ChecksumCheck { expected, computed, pages } => say!(lang,
            "decode: checksum over {pages}: expected {expected:#010x}, computed {computed:#010x}",
            "decode: checksum su {pages}: atteso {expected:#010x}, calcolato {computed:#010x}",
            pages = lang.count(*pages, ["page", "pages"], ["pagina", "pagine"]), expected = expected, computed = computed),
        EventKind::PoisonCheck { pages, mode } => say!(lang,
            "decode: {pages} in the read set (mode {mode})",
            "decode: {pages} da leggere (modalità {mode})",
            pages = lang.count(*pages, ["poisoned page", "poisoned pages"], ["pagina avvelenata", "pagine avvelenate"]), mode = mode),
        EventKind::Attend { decode_step, pages, foreign_pages, token } => say!(lang,
            "decode: step {decode_step} attended {pages} ({foreign_pages} foreign), read out token {token}",
            "decode: il passo {decode_step} ha letto {pages} ({foreign_pages} altrui), token {token}",
            decode_step = decode_step, pages = lang.count(*pages, ["page", "pages"], ["pagina", "pagine"]), foreign_pages = foreign_pages, token = token),
        EventKind::TagRefused { index, page } => say!(lang,
            "decode: tag check refused page {page} (table entry {index})",
            "decode: il controllo dei tag ha rifiutato la pagina {page} (voce {index})",
            page = page, index = index),
        EventKind::Abort { worker: w, status, message } => say!(lang,
            "{w}: abort {status}: {message}", "{w}: interruzione {status}: {message}",
            w = worker(*w, lang), status = status, message = message),
        EventKind::Release { worker: w, pages, deferred } => {
            if *deferred {
                say!(lang, "{w}: {pages} {held} until writes drain", "{w}: {pages} {held} fino allo svuotamento delle scritture", w = worker(*w, lang), pages = lang.count(*pages, ["page", "pages"], ["pagina", "pagine"]), held = lang.agree(*pages, ["held", "held"], ["trattenuta", "trattenute"]))
            } else {
                say!(lang, "{w}: {pages} {freed}", "{w}: {pages} {freed}", w = worker(*w, lang), pages = lang.count(*pages, ["page", "pages"], ["pagina", "pagine"]), freed = lang.agree(*pages, ["freed", "freed"], ["liberata", "liberate"]))
            }
        }
        EventKind::WorkerAnswer { worker: w, status, finish_reason } => say!(lang,
            "{w} → router: {status} {finish_reason}", "{w} → router: risposta {status} {finish_reason}",
            w = worker(*w, lang), status = status, finish_reason = finish_reason),
        EventKind::Response { status, .. } => say!(lang, "client ← HTTP {status}", "client ← HTTP {status}", status = status),
        EventKind::Resource { worker: w, resource, action, index } => say!(lang,
            "{w}: {resource} {index} {action}", "{w}: {resource} {index} {action}",
            w = worker(*w, lang), resource = resource_name(*resource, lang), index = index,
            action = resource_action(*action, lang)),
        EventKind::DrainAck { room, peer } => say!(lang,
            "decode peer {peer} → prefill: drain ack for room {room}",
            "peer decode {peer} → prefill: ack di svuotamento per la room {room}",
            peer = peer, room = room),
    };
    format!("{} {} · {body}", seconds(e.at_us), e.rid)
}
