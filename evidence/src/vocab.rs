//! One vocabulary for names that appear on the command line, in receipts,
//! in file names and on pages: every switch, mode and named value of a
//! receipt parses from and prints as the same word its serde form uses.
//!
//! The types derive `Serialize` (and `JsonSchema`) with a `rename_all`
//! rule; reading them back goes through this table instead of serde's
//! derive, one string read and one lookup per type. A derived reader per
//! type and per JSON reader was a sizeable share of the explorer's
//! WebAssembly, and the table gives every surface the same error line. A
//! test checks each name against the serde form.

use std::fmt;
use std::str::FromStr;

use crate::predicate::{
    AbortCause, AssumptionId, BackendKind, ChecksumScope, DoorDecision, DoorName, Fix,
    FreeListPolicy, Outcome, PageTail, PoisonMode, PollResult, PoolSide, Provenance,
    ResourceAction, ResourceKind, Scale, SourceOrigin, StopCause, Worker, WriterClass,
};

/// An unknown name, with the names that are known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} '{found}' (known: {known})")]
pub struct UnknownName {
    pub what: &'static str,
    pub found: String,
    pub known: String,
}

impl UnknownName {
    /// Position of `found` in `names`, or the error listing them. Shared by
    /// every type of the vocabulary, so each adds only its table.
    fn lookup(what: &'static str, names: &[&'static str], found: &str) -> Result<usize, Self> {
        names
            .iter()
            .position(|n| *n == found)
            .ok_or_else(|| UnknownName {
                what,
                found: found.to_string(),
                known: names.join(", "),
            })
    }
}

/// Read a name from any serde reader and look it up in `names`.
fn deserialize_index<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
    what: &'static str,
    names: &[&'static str],
) -> Result<usize, D::Error> {
    let found = <String as serde::Deserialize>::deserialize(deserializer)?;
    UnknownName::lookup(what, names, &found).map_err(serde::de::Error::custom)
}

macro_rules! vocabulary {
    ($ty:ident, $what:literal, [$($variant:ident => $name:literal),+ $(,)?]) => {
        impl $ty {
            /// Every value, in canonical order.
            pub const VALUES: &'static [$ty] = &[$($ty::$variant),+];

            /// The names of [`Self::VALUES`], in the same order.
            const NAMES: &'static [&'static str] = &[$($name),+];

            /// The value's name as written on the command line and in receipts.
            pub fn name(self) -> &'static str {
                match self {
                    $($ty::$variant => $name),+
                }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }

        impl FromStr for $ty {
            type Err = UnknownName;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                UnknownName::lookup($what, Self::NAMES, s).map(|i| Self::VALUES[i])
            }
        }

        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                deserialize_index(deserializer, $what, Self::NAMES).map(|i| Self::VALUES[i])
            }
        }
    };
}

vocabulary!(Scale, "scale", [Walkthrough => "walkthrough", Incident => "incident"]);
vocabulary!(FreeListPolicy, "free-list policy", [Lifo => "lifo", Fifo => "fifo"]);
vocabulary!(PoisonMode, "poison-on-free mode", [Off => "off", Log => "log", Refuse => "refuse"]);
vocabulary!(ChecksumScope, "checksum scope", [Reserved => "reserved", Received => "received"]);
vocabulary!(PageTail, "page tail", [Carried => "carried", Zeroed => "zeroed"]);
vocabulary!(Fix, "fix", [
    RetireAbortedPrefillResult => "retire-aborted-prefill-result",
    RetireUnadmittedReject => "retire-unadmitted-reject",
    KvChecksum => "kv-checksum",
    PageTags => "page-tags",
    DeferredRelease => "deferred-release",
    ScrubOnFree => "scrub-on-free",
]);

vocabulary!(BackendKind, "backend", [
    Cpu => "cpu",
    Cuda => "cuda",
]);
vocabulary!(Provenance, "provenance", [
    Disclosed => "disclosed",
    UpstreamTest => "upstream-test",
    UpstreamThread => "upstream-thread",
    UpstreamCode => "upstream-code",
    UpstreamRun => "upstream-run",
    ModelAssumption => "model-assumption",
]);
vocabulary!(Worker, "worker", [
    Router => "router",
    Prefill => "prefill",
    Decode => "decode",
    Client => "client",
]);
vocabulary!(DoorName, "door", [
    PrefillBootstrapQueue => "prefill_bootstrap_queue",
    PrefillWaitingQueue => "prefill_waiting_queue",
    PrefillResult => "prefill_result",
    DecodePreallocQueue => "decode_prealloc_queue",
    DecodeTransferQueue => "decode_transfer_queue",
]);
vocabulary!(DoorDecision, "door decision", [
    Admitted => "admitted",
    Retired => "retired",
    Dropped => "dropped",
    SentLastChunk => "sent_last_chunk",
    Aborted => "aborted",
]);
vocabulary!(AbortCause, "abort cause", [
    Timeout => "timeout",
    ChecksumMismatch => "checksum_mismatch",
    AlreadyFinished => "already_finished",
    TransferFailed => "transfer_failed",
]);
vocabulary!(StopCause, "stop cause", [
    RetiredAtPrefillDoor => "retired_at_prefill_door",
    RetiredAtDecodeDoor => "retired_at_decode_door",
    ResultRetired => "result_retired",
    AbortedBeforeBatch => "aborted_before_batch",
    RefusedBeforeRead => "refused_before_read",
    Other => "other",
]);
vocabulary!(Outcome, "outcome", [
    Leak => "leak",
    WrongAnswer => "wrong-answer",
    Correct => "correct",
    Refused => "refused",
]);
vocabulary!(PoolSide, "pool side", [
    Prefill => "prefill",
    Decode => "decode",
]);
vocabulary!(WriterClass, "writer class", [
    ThisRequest => "this-request",
    OtherTenant => "other-tenant",
    SameTenant => "same-tenant",
    NeverWritten => "never-written",
]);
vocabulary!(SourceOrigin, "source origin", [
    Upstream => "upstream",
    Engine => "engine",
]);
vocabulary!(ResourceKind, "resource", [
    MetadataBuffer => "metadata_buffer",
    MambaSlot => "mamba_slot",
    HicacheEntry => "hicache_entry",
    RetractionBackup => "retraction_backup",
    SessionSlot => "session_slot",
    KvSender => "kv_sender",
]);
vocabulary!(ResourceAction, "resource action", [
    Allocate => "allocate",
    Free => "free",
    DoubleFree => "double_free",
    Detach => "detach",
    AbortFailed => "abort_failed",
]);
vocabulary!(PollResult, "poll result", [
    Transferring => "transferring",
    Success => "success",
    Failed => "failed",
]);
vocabulary!(AssumptionId, "assumption", [
    DecodePool => "decode-pool",
    PageSize => "page-size",
    WarmPool => "warm-pool",
    PageTail => "page-tail",
    ChecksumScope => "checksum-scope",
    TagRefusalStatus => "tag-refusal-status",
    PoisonOnFree => "poison-on-free",
    ScrubOnFree => "scrub-on-free",
]);

impl Fix {
    /// Parse a switch name; `None` if unknown.
    pub fn from_name(name: &str) -> Option<Fix> {
        name.parse().ok()
    }

    /// Where the switch comes from, for labels: the upstream change, or
    /// this project's own defense.
    pub fn origin(self) -> &'static str {
        match self {
            Fix::RetireAbortedPrefillResult => "SGLang PR #36988 (v0.5.20)",
            Fix::RetireUnadmittedReject => "SGLang PR #38935 (v0.5.21)",
            Fix::KvChecksum => "SGLang PR #39500",
            Fix::PageTags => "Cloudflare prototype",
            Fix::DeferredRelease => "SGLang PRs #35049, #40645, #41402, #41404; default per #41023",
            Fix::ScrubOnFree => "this project's own defense",
        }
    }

    /// `name (origin)`: the one label every surface uses for a switch.
    pub fn label(self) -> String {
        format!("{} ({})", self.name(), self.origin())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every name parses back to its value and is the value's serde form.
    fn check<T>(values: &[T])
    where
        T: Copy + PartialEq + fmt::Debug + fmt::Display + FromStr + serde::Serialize,
        T: serde::de::DeserializeOwned,
        <T as FromStr>::Err: fmt::Debug,
    {
        for &v in values {
            let name = v.to_string();
            assert_eq!(name.parse::<T>().unwrap(), v);
            let json = serde_json::to_string(&v).unwrap();
            assert_eq!(json, format!("\"{name}\""));
            assert_eq!(serde_json::from_str::<T>(&json).unwrap(), v);
        }
    }

    #[test]
    fn names_round_trip_and_match_serde() {
        check(Scale::VALUES);
        check(FreeListPolicy::VALUES);
        check(PoisonMode::VALUES);
        check(ChecksumScope::VALUES);
        check(PageTail::VALUES);
        check(Fix::VALUES);
        check(BackendKind::VALUES);
        check(Provenance::VALUES);
        check(Worker::VALUES);
        check(DoorName::VALUES);
        check(DoorDecision::VALUES);
        check(AbortCause::VALUES);
        check(StopCause::VALUES);
        check(Outcome::VALUES);
        check(PoolSide::VALUES);
        check(WriterClass::VALUES);
        check(SourceOrigin::VALUES);
        check(ResourceKind::VALUES);
        check(ResourceAction::VALUES);
        check(PollResult::VALUES);
        check(AssumptionId::VALUES);
        assert_eq!(Fix::VALUES, Fix::ALL);
        let e = "bogus".parse::<Scale>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown scale 'bogus' (known: walkthrough, incident)"
        );
        let e = serde_json::from_str::<Worker>("\"janitor\"").unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown worker 'janitor' (known: router, prefill, decode, client)"
        );
        assert!(serde_json::from_str::<Worker>("7").is_err());
    }
}
