//! What a scenario script adds to a request beyond its arrival.
//!
//! Upstream's unit tests build a `Req` in a given state and hand it to a
//! door; scenario scripts do the same through the whole simulator: a
//! re-entering request arrives carrying the markers a preemption or
//! retraction leaves behind, a hybrid model holds a Mamba slot, a grammar or
//! a sampling mask rejects the first token, the sender's transport is down,
//! a result of the request is delivered twice. An [`Extras::default`] request
//! is exactly an incident-probe request.

use crate::req::{FinishReason, Req, RetractionBackup, Session};

/// State a re-entering request carries when it reaches a door again.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reentry {
    /// Apply on the prefill worker's `Req`.
    pub prefill: bool,
    /// Apply on the decode worker's `Req`.
    pub decode: bool,
    /// A pending abort ("abort method 3": `to_finish` set on a running request).
    pub to_finish: Option<(String, u16)>,
    /// The request still holds a metadata buffer index (`finalize_bootstrap`
    /// allocated it before it entered the running batch).
    pub metadata_buffer_index: bool,
    /// The request holds a host retraction backup.
    pub retraction_backup: bool,
    pub is_retracted: bool,
    pub is_rebootstrap: bool,
    /// Decode: requeued by `retract_decode` (`add(..., is_retracted=True)`),
    /// so it resumes from the retracted queue rather than a new receiver.
    pub requeued_by_retract: bool,
}

/// Status upstream's sampling mask reported for the request's first token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SamplingMask {
    /// More allowed tokens than `sampling_mask_max_tokens`: 400.
    Overflow,
    /// An invalid mask: 500.
    Invalid,
}

impl SamplingMask {
    pub fn status(self) -> u16 {
        match self {
            SamplingMask::Overflow => 400,
            SamplingMask::Invalid => 500,
        }
    }

    /// The abort's message.
    pub fn message(self) -> &'static str {
        match self {
            SamplingMask::Overflow => "sampling mask overflow",
            SamplingMask::Invalid => "invalid sampling mask",
        }
    }
}

/// Everything a script may add to one request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Extras {
    pub reentry: Option<Reentry>,
    /// Session id and whether it streams.
    pub session: Option<(String, bool)>,
    /// Hybrid model: prefill allocates a Mamba slot before any KV.
    pub hybrid: bool,
    /// HiCache storage is on: prefill holds an entry `release_aborted_request` clears.
    pub hicache: bool,
    /// Tokens the request's grammar accepts as the first output token.
    pub grammar_allows: Option<Vec<u32>>,
    /// `return_sampling_mask` with this status for the first token.
    pub sampling_mask: Option<SamplingMask>,
    /// `sender.abort()` raises (transport down).
    pub sender_abort_fails: bool,
    /// The request's final prefill result is delivered a second time.
    pub delayed_result: bool,
}

impl Extras {
    /// Apply the re-entry markers meant for a worker to its `Req`.
    pub fn apply(&self, req: &mut Req, on_prefill: bool) {
        if let Some((id, streaming)) = &self.session {
            req.session = Some(Session {
                id: id.clone(),
                streaming: *streaming,
                holds_active_slot: *streaming,
            });
        }
        let Some(r) = &self.reentry else { return };
        if (on_prefill && !r.prefill) || (!on_prefill && !r.decode) {
            return;
        }
        if let Some((message, status_code)) = &r.to_finish {
            req.to_finish = Some(FinishReason::Abort {
                message: message.clone(),
                status_code: *status_code,
            });
        }
        if r.retraction_backup {
            req.retraction_backup = Some(RetractionBackup {
                tokens: req.input_len(),
            });
        }
        req.is_retracted = r.is_retracted || (!on_prefill && r.requeued_by_retract);
        req.is_rebootstrap = r.is_rebootstrap;
    }
}
