//! The request object, mirroring SGLang's `Req`.
//!
//! The incident lives in three methods of upstream's `Req`
//! (`python/sglang/srt/managers/schedule_batch.py` at the pinned commit):
//!
//! * [`Req::set_finish_with_abort`] records the rejection in `to_finish` and
//!   swaps `origin_input_ids` for a one-token placeholder
//!   ([L2053–2072](https://github.com/sgl-project/sglang/blob/8f3d6944b76c428d884582cb6c82a39db1465360/python/sglang/srt/managers/schedule_batch.py#L2053-L2072));
//! * [`Req::finished`] only reads `finished_reason`
//!   ([L1479–1481](https://github.com/sgl-project/sglang/blob/8f3d6944b76c428d884582cb6c82a39db1465360/python/sglang/srt/managers/schedule_batch.py#L1479-L1481));
//! * [`Req::update_finish_state`] moves `to_finish` into `finished_reason`,
//!   but only later in the loop
//!   ([L1842–1848](https://github.com/sgl-project/sglang/blob/8f3d6944b76c428d884582cb6c82a39db1465360/python/sglang/srt/managers/schedule_batch.py#L1842-L1848)).
//!
//! Between the first and the third call a rejected request looks alive to
//! every door that asks `finished()`. That window is the whole bug.

use std::fmt;

/// Why a request finished (upstream `BaseFinishReason` subclasses).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishReason {
    /// `FINISH_LENGTH`: `max_new_tokens` reached.
    Length { length: u32 },
    /// `FINISH_ABORT`: the request was aborted with an HTTP status.
    Abort { message: String, status_code: u16 },
}

impl FinishReason {
    /// HTTP status a client sees for this reason.
    pub fn status_code(&self) -> u16 {
        match self {
            FinishReason::Length { .. } => 200,
            FinishReason::Abort { status_code, .. } => *status_code,
        }
    }
}

impl FinishReason {
    /// The reason as a receipt signs it: typed fields, no rendering.
    pub fn signed(&self) -> kvw_evidence::FinishReason {
        match self {
            FinishReason::Length { length } => {
                kvw_evidence::FinishReason::Length { length: *length }
            }
            FinishReason::Abort {
                message,
                status_code,
            } => kvw_evidence::FinishReason::Abort {
                status_code: *status_code,
                message: message.clone(),
            },
        }
    }
}

impl fmt::Display for FinishReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FinishReason::Length { length } => write!(f, "FINISH_LENGTH(length={length})"),
            FinishReason::Abort {
                message,
                status_code,
            } => write!(f, "FINISH_ABORT(status={status_code}, {message:?})"),
        }
    }
}

/// A session the request belongs to (upstream `Session`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub id: String,
    /// Streaming sessions keep an active slot that a retired request must detach.
    pub streaming: bool,
    /// Whether this request currently occupies the session's active slot.
    pub holds_active_slot: bool,
}

/// KV saved when a running request is retracted under memory pressure
/// (upstream keeps it so the request can resume).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetractionBackup {
    pub tokens: usize,
}

/// The status of [`Req::prepare_abort`]: `HTTPStatus.INTERNAL_SERVER_ERROR`.
pub const PREPARE_ABORT_STATUS: u16 = 500;

/// One request as one worker (prefill or decode) sees it.
#[derive(Debug, Clone)]
pub struct Req {
    /// Request id, e.g. `acme-1`.
    pub rid: String,
    pub tenant: String,
    /// Prompt token ids. `set_finish_with_abort` replaces them with `[0]`.
    pub origin_input_ids: Vec<u32>,
    /// Generated token ids.
    pub output_ids: Vec<u32>,
    pub max_new_tokens: u32,
    /// A finish reason decided but not yet applied.
    pub to_finish: Option<FinishReason>,
    /// The applied finish reason; `finished()` reads only this.
    pub finished_reason: Option<FinishReason>,
    /// Index into the worker's metadata buffers once allocated.
    pub metadata_buffer_index: Option<usize>,
    pub retraction_backup: Option<RetractionBackup>,
    pub is_retracted: bool,
    /// Set when the request re-enters bootstrap (e.g. after a decode retry).
    pub is_rebootstrap: bool,
    pub session: Option<Session>,
    /// KV generation; bumps when the request's KV is rebuilt.
    pub generation: u32,
    /// Bootstrap room shared by the request's prefill and decode sides.
    pub bootstrap_room: u64,
}

impl Req {
    pub fn new(
        rid: &str,
        tenant: &str,
        input_ids: Vec<u32>,
        max_new_tokens: u32,
        room: u64,
    ) -> Self {
        Req {
            rid: rid.to_string(),
            tenant: tenant.to_string(),
            origin_input_ids: input_ids,
            output_ids: Vec::new(),
            max_new_tokens,
            to_finish: None,
            finished_reason: None,
            metadata_buffer_index: None,
            retraction_backup: None,
            is_retracted: false,
            is_rebootstrap: false,
            session: None,
            generation: 0,
            bootstrap_room: room,
        }
    }

    /// Record an abort and shrink the input to one placeholder token "to skip
    /// the long prefill", as upstream does. The abort is *recorded*, not
    /// applied: `finished()` stays false until [`Req::update_finish_state`].
    pub fn set_finish_with_abort(&mut self, message: &str, status_code: u16) {
        self.origin_input_ids = vec![0];
        self.to_finish = Some(FinishReason::Abort {
            message: message.to_string(),
            status_code,
        });
    }

    /// `set_finish_with_abort` for an abort found after the forward (a
    /// grammar or sampling-mask rejection of the first token): the input is
    /// already computed, so it is left as it is.
    pub fn set_finish_with_abort_keep_input(&mut self, message: &str, status_code: u16) {
        self.to_finish = Some(FinishReason::Abort {
            message: message.to_string(),
            status_code,
        });
    }

    /// Upstream `prepare_abort(req, error_message, status_code)`
    /// (`python/sglang/srt/disaggregation/utils.py`) as the PD prefill result
    /// path calls it for a first token the request's grammar refuses: the
    /// abort is *applied* at once (`finished_reason = FINISH_ABORT(...)`, so
    /// `finished()` is true before any result door asks), with status 500;
    /// the input stays as computed.
    pub fn prepare_abort(&mut self, message: &str) {
        self.to_finish = None;
        self.finished_reason = Some(FinishReason::Abort {
            message: message.to_string(),
            status_code: PREPARE_ABORT_STATUS,
        });
    }

    /// Upstream `Req.finished()`: true only once `finished_reason` is set.
    pub fn finished(&self) -> bool {
        self.finished_reason.is_some()
    }

    /// Upstream `Req.update_finish_state()`: apply a pending `to_finish`.
    pub fn update_finish_state(&mut self) {
        if let Some(reason) = self.to_finish.take() {
            self.finished_reason = Some(reason);
        }
    }

    /// `len(origin_input_ids)`.
    pub fn input_len(&self) -> usize {
        self.origin_input_ids.len()
    }

    /// Tokens whose KV the request holds: prompt plus generated tokens.
    pub fn seq_len(&self) -> usize {
        self.origin_input_ids.len() + self.output_ids.len()
    }

    /// The finish reason that decides the answer: applied first, pending second.
    pub fn effective_finish(&self) -> Option<&FinishReason> {
        self.finished_reason.as_ref().or(self.to_finish.as_ref())
    }
}

/// SGLang's per-request input cap, computed in one place (the evidence
/// crate, which receipts' configs share).
pub use kvw_evidence::max_req_input_len;

/// The scheduler's input-length check: returns the rejection message when
/// the prompt reaches the cap. Upstream's `validate_input_length` rejects
/// `len(origin_input_ids) >= max_req_input_len`, so a prompt of exactly
/// `cap` tokens is refused too (shown on the real releases by
/// `kvw upstream run`, case `input-cap`).
pub fn validate_input_length(input_len: usize, cap: u64) -> Option<String> {
    (input_len as u64 >= cap).then(|| {
        format!(
            "Input length ({input_len} tokens) exceeds the maximum allowed length ({cap} tokens)."
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abort_is_recorded_but_not_finished_until_update() {
        let mut r = Req::new("x-1", "x", vec![5; 100], 4, 1);
        r.set_finish_with_abort("too long", 400);
        assert_eq!(r.origin_input_ids, vec![0]);
        assert!(
            !r.finished(),
            "the incident's window: rejected yet not finished"
        );
        assert!(r.to_finish.is_some());
        r.update_finish_state();
        assert!(r.finished());
        assert!(r.to_finish.is_none());
        assert_eq!(
            r.effective_finish().map(FinishReason::status_code),
            Some(400)
        );
    }

    #[test]
    fn input_cap_rule_matches_the_incident_numbers() {
        assert_eq!(max_req_input_len(1_048_576, 681_280), 681_274);
        assert_eq!(max_req_input_len(1_048_576, 2_040_000), 1_048_570);
        assert!(validate_input_length(681_273, 681_274).is_none());
        assert!(
            validate_input_length(681_274, 681_274).is_some(),
            "upstream rejects len >= max_req_input_len"
        );
    }
}
