//! Each scenario's description and what closes it, in English and Italian,
//! keyed by the scenario's name.
//!
//! A scenario receipt names its scenario; the words about it live here, next
//! to the renderer ([`scenario_text`]), so a page in
//! either language reads them in its own. The engine's tests check that every
//! scenario it defines has an entry.

use super::said::Said;
use crate::Lang;

const PR_38935: (&str, &str) = ("PR #38935", "PR #38935");
const PR_38935_DOOR: (&str, &str) = (
    "PR #38935 (`is_unadmitted_reject`)",
    "PR #38935 (`is_unadmitted_reject`)",
);
const PR_38935_RETIRE: (&str, &str) = (
    "PR #38935 (`retire_unadmitted_request`)",
    "PR #38935 (`retire_unadmitted_request`)",
);
const PR_36988: (&str, &str) = ("PR #36988", "PR #36988");

const fn text(
    name: &'static str,
    description: (&'static str, &'static str),
    closed_by: (&'static str, &'static str),
) -> ScenarioText {
    ScenarioText {
        name,
        description,
        closed_by,
    }
}

/// Every scenario's words.
pub const SCENARIOS: &[ScenarioText] = &[
    // pool / context
    text(
        "context_beyond_pool_is_never_answered_200",
        (
            "context 256, prefill pool 112 (cap 106): a 128-token prompt within the context is never answered 200 and reads no foreign page",
            "contesto 256, pool di prefill 112 (limite 106): un prompt di 128 token, dentro il contesto, non riceve mai 200 e non legge pagine altrui",
        ),
        (
            "PRs #36988, #38935, #39500 and read-time page tags (each alone)",
            "PR #36988, #38935, #39500 e i tag di pagina controllati in lettura (ciascuno da solo)",
        ),
    ),
    text(
        "pool_at_least_context_takes_no_reject_path",
        (
            "the configuration answer: a prefill pool as large as the context admits the same prompt and serves it correctly",
            "la risposta di configurazione: un pool di prefill grande quanto il contesto ammette lo stesso prompt e lo serve correttamente",
        ),
        (
            "configuration (prefill pool ≥ context)",
            "configurazione (pool di prefill ≥ contesto)",
        ),
    ),
    // reject / admission: test_admission_abort_not_enqueued.py
    text(
        "test_rejected_request_is_retired_at_each_pd_door.prefill",
        (
            "a prompt over prefill's input cap is retired at prefill's bootstrap-queue door: no sender, bootstrap or forward",
            "un prompt oltre il limite di input di prefill viene ritirato all'ingresso della coda di bootstrap di prefill: nessun sender, bootstrap o forward",
        ),
        PR_38935,
    ),
    text(
        "test_rejected_request_is_retired_at_each_pd_door.decode",
        (
            "a prompt over decode's own cap is retired at decode's prealloc-queue door: no receiver, reservation or bootstrap",
            "un prompt oltre il limite proprio di decode viene ritirato all'ingresso della coda di prealloc di decode: nessun receiver, prenotazione o bootstrap",
        ),
        PR_38935,
    ),
    text(
        "test_reentering_prefill_request_is_not_retired.metadata_buffer_index",
        (
            "a preempted prefill request holding its metadata buffer index re-enters with a pending abort and reaches its queue",
            "una richiesta di prefill prelazionata che tiene il suo indice di metadata buffer rientra con un abort in sospeso e arriva alla sua coda",
        ),
        PR_38935_DOOR,
    ),
    text(
        "test_reentering_prefill_request_is_not_retired.retraction_backup",
        (
            "a preempted prefill request holding a retraction backup re-enters with a pending abort and reaches its queue",
            "una richiesta di prefill prelazionata che tiene un retraction backup rientra con un abort in sospeso e arriva alla sua coda",
        ),
        PR_38935_DOOR,
    ),
    text(
        "test_retracted_decode_request_is_not_retired.is_retracted.backup",
        (
            "a decode request requeued by `retract_decode` with a backup goes to the retracted queue, not retired",
            "una richiesta di decode rimessa in coda da `retract_decode` con un backup va nella coda delle richieste ritratte e non viene ritirata",
        ),
        PR_38935_DOOR,
    ),
    text(
        "test_retracted_decode_request_is_not_retired.is_retracted.no_backup",
        (
            "a short retracted decode request (no backup) is kept by its flag alone",
            "una breve richiesta di decode ritratta (senza backup) viene trattenuta dal solo flag",
        ),
        PR_38935_DOOR,
    ),
    text(
        "test_retracted_decode_request_is_not_retired.is_rebootstrap.backup",
        (
            "a re-bootstrapping decode request with a backup gets a new receiver, not retired",
            "una richiesta di decode che rifà il bootstrap con un backup riceve un nuovo receiver e non viene ritirata",
        ),
        PR_38935_DOOR,
    ),
    text(
        "test_retracted_decode_request_is_not_retired.is_rebootstrap.no_backup",
        (
            "a re-bootstrapping decode request without a backup gets a new receiver, not retired",
            "una richiesta di decode che rifà il bootstrap senza backup riceve un nuovo receiver e non viene ritirata",
        ),
        PR_38935_DOOR,
    ),
    text(
        "test_preempted_reentry_is_not_retired.prefill",
        (
            "a short preempted request (`is_retracted`, nothing held) re-enters prefill and is not retired",
            "una breve richiesta prelazionata (`is_retracted`, nessuna risorsa tenuta) rientra in prefill e non viene ritirata",
        ),
        PR_38935_DOOR,
    ),
    text(
        "test_preempted_reentry_is_not_retired.decode",
        (
            "a short preempted request (`is_retracted`, nothing held) re-enters decode and gets a receiver",
            "una breve richiesta prelazionata (`is_retracted`, nessuna risorsa tenuta) rientra in decode e riceve un receiver",
        ),
        PR_38935_DOOR,
    ),
    text(
        "test_valid_request_still_admitted.prefill",
        (
            "a valid request passes prefill's door and is served",
            "una richiesta valida supera l'ingresso di prefill e viene servita",
        ),
        PR_38935,
    ),
    text(
        "test_valid_request_still_admitted.decode",
        (
            "a valid request passes decode's door and gets a receiver",
            "una richiesta valida supera l'ingresso di decode e riceve un receiver",
        ),
        PR_38935,
    ),
    text(
        "test_null_mode_is_deliberately_untouched",
        (
            "without disaggregation a rejected request is still enqueued; the one-token stub runs once and the batch boundary answers 400",
            "senza disaggregazione una richiesta rifiutata viene comunque accodata; lo stub di un token gira una volta e a fine batch la risposta è 400",
        ),
        (
            "PR #38935 (PD doors only)",
            "PR #38935 (solo gli ingressi PD)",
        ),
    ),
    text(
        "test_retire_detaches_a_streaming_session",
        (
            "retiring a rejected request detaches its streaming session's active slot, so the next request on the session is served; the original 400 survives",
            "ritirare una richiesta rifiutata sgancia lo slot attivo della sua sessione in streaming, così la richiesta successiva sulla sessione viene servita; il 400 originale resta",
        ),
        PR_38935_RETIRE,
    ),
    text(
        "test_retire_leaves_a_non_streaming_session_alone",
        (
            "retiring a rejected request leaves a non-streaming session alone",
            "ritirare una richiesta rifiutata lascia intatta una sessione non in streaming",
        ),
        PR_38935_RETIRE,
    ),
    // transfer / read
    text(
        "mid_transfer_abort_answered_200_length",
        (
            "a client abort after the last chunk was sent; prefill's inflight queue finishes the request with `FINISH_LENGTH` and answers 200 (#33507)",
            "il client interrompe dopo l'invio dell'ultimo chunk; la coda inflight di prefill chiude la richiesta con `FINISH_LENGTH` e risponde 200 (#33507)",
        ),
        (
            "issue #33507; model assumption: the record does not name the closing change; in the engine either switch closes it (the pending abort applied under `retire-aborted-prefill-result`, PR #36988; the room closed to the sender by decode's abort under `deferred-release`)",
            "issue #33507; ipotesi del modello: il registro pubblico non nomina la modifica che lo chiude; nel motore basta l'una o l'altra correzione (con `retire-aborted-prefill-result` si applica l'abort in sospeso, PR #36988; con `deferred-release` l'abort di decode chiude la room al sender)",
        ),
    ),
    // lifetime / ownership: test_prefill_abort_result_cleanup.py
    text(
        "test_aborted_final_result_releases_hybrid_cache",
        (
            "an aborted final prefill result frees KV, Mamba slot, metadata buffer and HiCache entry once, calls `sender.abort()` once, sends nothing",
            "un risultato finale di prefill interrotto libera una volta KV, slot Mamba, metadata buffer e voce HiCache, chiama `sender.abort()` una volta e non invia nulla",
        ),
        PR_36988,
    ),
    text(
        "test_aborted_middle_result_releases_after_last_chunk",
        (
            "a request aborted between chunks is retired at its next (middle) chunk result and released once, after its earlier chunks landed",
            "una richiesta interrotta tra un chunk e l'altro viene ritirata al risultato del chunk successivo (intermedio) e rilasciata una volta, dopo l'arrivo dei chunk precedenti",
        ),
        PR_36988,
    ),
    text(
        "test_aborted_middle_result_waits_for_inflight_chunk",
        (
            "with an earlier chunk's writes still in flight, the retired request's pages are released only after they land",
            "con le scritture di un chunk precedente ancora in volo, le pagine della richiesta ritirata vengono rilasciate solo dopo il loro arrivo",
        ),
        PR_36988,
    ),
    text(
        "test_delayed_result_ignores_already_retired_request",
        (
            "a result delivered again after the request was retired frees and answers nothing more",
            "un risultato consegnato di nuovo dopo il ritiro della richiesta non libera né risponde più nulla",
        ),
        PR_36988,
    ),
    text(
        "test_sender_abort_failure_does_not_skip_local_cleanup",
        (
            "`sender.abort()` raising (transport down) does not skip freeing KV and the metadata buffer or the answer",
            "se `sender.abort()` solleva un errore (trasporto giù), la liberazione di KV e metadata buffer e la risposta avvengono comunque",
        ),
        PR_36988,
    ),
    text(
        "test_grammar_rejection_retires_prefill_before_transfer",
        (
            "a grammar that rejects the first token retires the request before any transfer",
            "una grammatica che rifiuta il primo token ritira la richiesta prima di qualsiasi trasferimento",
        ),
        PR_36988,
    ),
    text(
        "test_aborted_result_releases_mamba_allocated_before_kv",
        (
            "a hybrid request aborted while it holds its Mamba slot but no KV yet frees the slot once and never forwards",
            "una richiesta ibrida interrotta mentre tiene il suo slot Mamba ma ancora nessun KV libera lo slot una volta e non esegue alcun forward",
        ),
        PR_36988,
    ),
    text(
        "test_sampling_mask_abort_preserves_error_and_releases_once.overflow",
        SAMPLING_MASK,
        PR_36988,
    ),
    text(
        "test_sampling_mask_abort_preserves_error_and_releases_once.overflow.transport_error",
        SAMPLING_MASK,
        PR_36988,
    ),
    text(
        "test_sampling_mask_abort_preserves_error_and_releases_once.invalid",
        SAMPLING_MASK,
        PR_36988,
    ),
    text(
        "test_sampling_mask_abort_preserves_error_and_releases_once.invalid.transport_error",
        SAMPLING_MASK,
        PR_36988,
    ),
    // lifetime / ownership: related upstream failures
    text(
        "late_write_corrupts_next_tenant",
        (
            "decode times out on acme, frees its pages, umbrella reuses them and acme's late write lands in umbrella's decode (#24527)",
            "decode va in timeout su acme e ne libera le pagine, umbrella le riusa e la scrittura tardiva di acme finisce nel decode di umbrella (#24527)",
        ),
        (
            "PR #35049 (deferred release), issue #24527",
            "PR #35049 (rilascio differito), issue #24527",
        ),
    ),
    text(
        "metadata_buffer_index_collision",
        (
            "an aborted request's result is processed twice, its metadata buffer index freed twice, and two later requests share it: a double free of a metadata slot, not the root cause of #22716 (with PP > 1, pipeline stages write aux data to the same decode metadata slot in no fixed order), which is not modelled",
            "il risultato di una richiesta interrotta viene elaborato due volte, il suo indice di metadata buffer liberato due volte e due richieste successive se lo dividono: una doppia liberazione di uno slot di metadata, non la causa di #22716 (con PP > 1 gli stadi della pipeline scrivono i dati aux nello stesso slot di metadata di decode senza un ordine fisso), che non è modellata",
        ),
        (
            "PR #36988 (freed once, late results ignored) closes this double free; #22716 itself (PP > 1) is not modelled and not claimed closed",
            "PR #36988 (una sola liberazione, risultati tardivi ignorati) chiude questa doppia liberazione; #22716 in sé (PP > 1) non è modellata né dichiarata chiusa",
        ),
    ),
    text(
        "drain_ack_target_dropped_before_drain",
        (
            "decode aborts with a write in flight; prefill's `CommonKVSender.clear()` drops the drain-ack target before the write drains, so no ack comes and decode gives the pages back only at the 30 s release timeout (#35049), without the ack (#38961)",
            "decode interrompe con una scrittura in volo; `CommonKVSender.clear()` di prefill scarta il destinatario del drain ack prima che la scrittura sia drenata, quindi nessun ack arriva e decode restituisce le pagine solo allo scadere del rilascio differito di 30 s (#35049), senza l'ack (#38961)",
        ),
        ("issue #38961; PR #40645", "issue #38961; PR #40645"),
    ),
    text(
        "drain_ack_one_per_room_under_fan_out",
        (
            "a room spread over two decode peers is counted drained on one peer's ack while the other still receives (#38961)",
            "una room distribuita su due peer di decode viene contata come drenata all'ack di un solo peer mentre l'altro riceve ancora (#38961)",
        ),
        ("issue #38961; PR #41402", "issue #38961; PR #41402"),
    ),
    text(
        "drain_ack_missing_for_cleared_room",
        (
            "decode clears a room with a chunk outstanding and never acks it, so its pages are never freed (#38961)",
            "decode svuota una room con un chunk ancora in arrivo e non ne dà mai l'ack, così le sue pagine non vengono mai liberate (#38961)",
        ),
        (
            "issue #38961; model assumption: closed by the drain-ack work under `deferred-release` (#40645, #41402, #41404)",
            "issue #38961; ipotesi del modello: chiuso dal lavoro sui drain ack raccolto sotto `deferred-release` (#40645, #41402, #41404)",
        ),
    ),
];

const SAMPLING_MASK: (&str, &str) = (
    "a sampling-mask abort keeps its status and error type and frees everything once, the result processed twice, with or without a transport error",
    "un abort della sampling mask mantiene il suo stato e il suo tipo di errore e libera tutto una volta, con il risultato elaborato due volte, con o senza errore di trasporto",
);

#[cfg(test)]
mod tests {
    use super::SCENARIOS;

    #[test]
    fn every_entry_is_unique_and_marks_its_code_in_pairs() {
        for (i, t) in SCENARIOS.iter().enumerate() {
            assert!(
                SCENARIOS[i + 1..].iter().all(|u| u.name != t.name),
                "{} twice",
                t.name
            );
            for text in [
                t.description.0,
                t.description.1,
                t.closed_by.0,
                t.closed_by.1,
            ] {
                assert!(!text.is_empty(), "{}", t.name);
                assert_eq!(text.matches('`').count() % 2, 0, "{}: {text}", t.name);
            }
        }
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
    SCENARIOS.iter().find(|t| t.name == name)
}
