//! What the source lines a step cites do, in the reader's language.
//!
//! Each step of a probe receipt points at the upstream lines and the
//! engine's own lines its claims rest on ([`SourceRef`]); the engine picks
//! them from a fixed table, one set per kind of claim, and signs each with a
//! short English `label`. Most labels are code (a function, a test, a
//! method and its class) and read the same in every language; the others
//! say in words what the lines do, and this table gives their Italian,
//! keyed by the signed label. A label the table does not know (a receipt
//! from another engine version) is shown as signed, marked as English.
//!
//! [`SourceRef`]: kvw_evidence::predicate::SourceRef

use crate::Lang;

/// A source label as a page shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceLabel<'a> {
    /// Code: the same in every language, shown as code.
    Code(&'a str),
    /// Words in the reader's language (code names inside stay as they are).
    Words(&'a str),
    /// A label this table does not know, in the receipt's English.
    English(&'a str),
}

/// How `label` reads in `lang`.
pub fn source_label(label: &str, lang: Lang) -> SourceLabel<'_> {
    // One `match` rather than a table, so a one-language build keeps only
    // its own language's words (see [`Lang::spoken`]); the English words
    // are the signed label itself.
    let words = |it: &'static str| SourceLabel::Words(lang.pick(label, it));
    match label {
        "Req::set_finish_with_abort"
        | "policy::prefill_admission_door"
        | "test_rejected_request_is_retired_at_each_pd_door"
        | "policy::entry_door"
        | "DecodePreallocQueue._pre_alloc"
        | "process_batch_result_disagg_prefill / send_kv_chunk"
        | "test_aborted_final_result_releases_hybrid_cache"
        | "policy::prefill_result_action → ResultAction::Retire"
        | "DecodeTransferQueue.pop_transferred"
        | "policy::handoff_door"
        | "policy::router_answer" => SourceLabel::Code(label),
        "Req.set_finish_with_abort(): to_finish and a one-token placeholder" => {
            words("Req.set_finish_with_abort(): to_finish e un segnaposto di un token")
        }
        "Req.finished() reads only finished_reason" => {
            words("Req.finished() legge solo finished_reason")
        }
        "policy::entry_door and is_unadmitted_reject" => {
            words("policy::entry_door e is_unadmitted_reject")
        }
        "prealloc: _pre_alloc from decode's origin_input_ids" => {
            words("prealloc: _pre_alloc dagli origin_input_ids del decode")
        }
        "the placeholder that replaced the prompt" => {
            words("il segnaposto che ha preso il posto del prompt")
        }
        "forward over origin_input_ids" => words("forward sugli origin_input_ids"),
        "update_finish_state() applies to_finish only later" => {
            words("update_finish_state() applica to_finish solo più tardi")
        }
        "TransferChannel::poll: complete once posted writes land" => {
            words("TransferChannel::poll: completo quando le scritture inviate sono arrivate")
        }
        "paged_decode_attention over the whole page table" => {
            words("paged_decode_attention su tutta la tabella delle pagine")
        }
        "poison-on-free check" => words("controllo poison-on-free"),
        "MiniLoadBalancer.generate returns decode's status" => {
            words("MiniLoadBalancer.generate restituisce lo stato del decode")
        }
        _ => SourceLabel::English(label),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_stays_code_words_are_translated_unknown_labels_are_english() {
        use SourceLabel::{Code, English, Words};
        let cases = [
            (
                "policy::handoff_door",
                Lang::It,
                Code("policy::handoff_door"),
            ),
            (
                "poison-on-free check",
                Lang::It,
                Words("controllo poison-on-free"),
            ),
            (
                "poison-on-free check",
                Lang::En,
                Words("poison-on-free check"),
            ),
            ("some other label", Lang::It, English("some other label")),
        ];
        for (label, lang, shown) in cases {
            assert_eq!(source_label(label, lang), shown, "{label}");
        }
    }
}
