//! A model-check step's engine decision, written as the policy functions
//! name it (`prefill_admission_door: Admit (finished() = false)`), from the
//! typed decision the receipt signs.

use kvw_evidence::model_check::{DoorVerdict, Handoff, ModelDecision, ResultStep};

fn door(d: DoorVerdict) -> &'static str {
    match d {
        DoorVerdict::Admit => "Admit",
        DoorVerdict::Retire => "Retire",
        DoorVerdict::DropFinished => "DropFinished",
    }
}

fn result(r: ResultStep) -> &'static str {
    match r {
        ResultStep::SendChunk => "SendChunk",
        ResultStep::SendLastChunk => "SendLastChunk",
        ResultStep::Retire => "Retire",
    }
}

/// The decision as code: the policy function and what it returned.
pub fn decision(d: &ModelDecision) -> String {
    match d {
        ModelDecision::EntryDoor {
            door: d,
            finished: Some(f),
        } => format!("entry_door: {} (finished() = {f})", door(*d)),
        ModelDecision::EntryDoor { door: d, .. } => format!("entry_door: {}", door(*d)),
        ModelDecision::PrefillForward {
            door: d,
            result: Some(ResultStep::Retire),
            ..
        } => format!(
            "prefill_admission_door: {}; prefill_result_action: Retire",
            door(*d)
        ),
        ModelDecision::PrefillForward {
            door: d,
            finished,
            result: Some(r),
        } => format!(
            "prefill_admission_door: {} (finished() = {finished}); prefill_result_action: {}",
            door(*d),
            result(*r)
        ),
        ModelDecision::PrefillForward { door: d, .. } => {
            format!("prefill_admission_door: {}", door(*d))
        }
        ModelDecision::HandoffDoor { handoff } => match handoff {
            Handoff::Wait => "handoff_door: Wait".into(),
            Handoff::Admit => "handoff_door: Admit".into(),
            Handoff::Abort {
                status,
                message,
                transfer_failure,
            } => format!(
                "handoff_door: Abort {{ status: {status}, message: {message:?}, transfer_failure: {transfer_failure} }}"
            ),
        },
        ModelDecision::LateWrite => "late write".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_read_as_the_policy_functions_name_them() {
        assert_eq!(
            decision(&ModelDecision::PrefillForward {
                door: DoorVerdict::Admit,
                finished: false,
                result: Some(ResultStep::SendLastChunk),
            }),
            "prefill_admission_door: Admit (finished() = false); prefill_result_action: SendLastChunk"
        );
        assert_eq!(
            decision(&ModelDecision::HandoffDoor {
                handoff: Handoff::Admit
            }),
            "handoff_door: Admit"
        );
        assert_eq!(
            decision(&ModelDecision::EntryDoor {
                door: DoorVerdict::Retire,
                finished: None
            }),
            "entry_door: Retire"
        );
    }
}
