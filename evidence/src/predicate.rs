//! The probe predicate: what one probe run saw, step by step.
//!
//! A receipt's in-toto Statement carries this predicate. It is the contract
//! between the engine (which fills it), the verifier (which checks and
//! reproduces it) and the explorer (which draws it). Every field is plain data
//! so the same types compile natively and for `wasm32-unknown-unknown`.
//!
//! Unknown fields are refused everywhere (`deny_unknown_fields`): a receipt
//! that says more than this schema knows is not silently half-read.
//!
//! Two kinds of type are read back without serde's own derive, to keep the
//! browser build small: named values (the enums without data, which derive
//! only `Serialize`) through the table in [`crate::vocab`], and the tagged
//! enums [`EventKind`] and [`Claim`] through [`crate::tagged`].

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `predicateType` of every kvwitness probe receipt. The trailing `v3` is the
/// predicate version; a receipt with any other value is refused.
pub const PREDICATE_TYPE: &str = "https://kvwitness.dev/attestation/probe/v3";

/// Pinned SGLang commit that the public analysis of the incident cites.
pub const UPSTREAM_COMMIT: &str = "8f3d6944b76c428d884582cb6c82a39db1465360";

/// Upstream repository the pinned references point into.
pub const UPSTREAM_REPO: &str = "https://github.com/sgl-project/sglang";

/// Everything one probe run produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProbePredicate {
    pub probe: ProbeInfo,
    pub engine: EngineInfo,
    pub backend: BackendInfo,
    pub config: ProbeConfig,
    /// Every request of the run.
    pub requests: Vec<RequestInfo>,
    /// Every event of every request, in order.
    pub events: Vec<Event>,
    /// Exactly seven entries, `step` 1..=7, in order.
    pub steps: Vec<Step>,
    /// Model assumptions this run's outcome rests on.
    pub assumptions: Vec<Assumption>,
    pub verdict: Verdict,
    /// Lowercase hex SHA-256 of the JCS form of `{events, steps}` (engine
    /// line numbers left out).
    pub trace_sha256: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProbeInfo {
    /// Probe name, e.g. `incident`.
    pub name: String,
    /// Probe version; bumps when the scenario script changes.
    pub version: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EngineInfo {
    /// `kvw` crate version.
    pub version: String,
    /// Git commit the engine was built from (`unknown` outside a checkout).
    pub commit: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BackendInfo {
    pub kind: BackendKind,
    /// Human-readable device, e.g. `cpu (x86_64)` or `NVIDIA H200`.
    pub device: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    Cpu,
    Cuda,
}

/// Size preset of a probe run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Scale {
    /// A handful of pages, small enough to draw page by page.
    Walkthrough,
    /// The disclosed production numbers: context 1,048,576, prefill pool 681,280, page size 64.
    Incident,
}

/// Which end of the free list a pool reuses first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FreeListPolicy {
    /// Freed pages go to the back; the oldest free page is reused first.
    Fifo,
    /// Freed pages go to the front; the page freed last is reused first (worst case).
    Lifo,
}

/// Mode of `poison-on-free`, this project's own defense (not an upstream
/// switch): freed pages are marked, and decode checks its read set against
/// the marks before attention. Upstream's `--kv-canary` works differently
/// (canary slots written and verified around each forward) and is not
/// modelled here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PoisonMode {
    Off,
    /// Count and record reads of poisoned pages, let them go on.
    Log,
    /// Abort the request before attention reads a poisoned page.
    Refuse,
}

/// Which pages decode's KV checksum covers (model assumption: the record
/// does not say whether decode digests what it reserved or what arrived).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ChecksumScope {
    /// Decode digests every page it reserved for the request.
    Reserved,
    /// Decode digests only the pages the handoff wrote.
    Received,
}

/// What the unused tail of a request's last prefill page carries into the
/// transfer (a transfer moves whole pages).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PageTail {
    /// Whatever the prefill page held before (pages are not cleared).
    Carried,
    /// Zeros: the forward clears the tail.
    Zeroed,
}

/// A boolean defense switch of the fix matrix. The kebab-case name is the
/// switch name on the command line and in receipts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Fix {
    /// SGLang PR #36988: retire aborted prefill results.
    RetireAbortedPrefillResult,
    /// SGLang PR #38935: retire unadmitted rejects at the admission doors.
    RetireUnadmittedReject,
    /// SGLang PR #39500: Adler-32 checksum over the transferred pages.
    KvChecksum,
    /// Read-time page owner tags (Cloudflare prototype).
    PageTags,
    /// SGLang PRs #35049/#40645/#41404: keep pages of aborted requests until writes drain.
    DeferredRelease,
    /// Zero pages when they are freed (not an upstream default; a defense-in-depth baseline).
    ScrubOnFree,
}

impl Fix {
    /// Every boolean switch, in canonical order.
    pub const ALL: [Fix; 6] = [
        Fix::RetireAbortedPrefillResult,
        Fix::RetireUnadmittedReject,
        Fix::KvChecksum,
        Fix::PageTags,
        Fix::DeferredRelease,
        Fix::ScrubOnFree,
    ];
}

/// Full configuration of a probe run: re-running with it reproduces the trace.
/// Derived values (the per-request input cap) are computed, never stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProbeConfig {
    pub scale: Scale,
    /// Configured context length (tokens).
    pub context_len: u64,
    /// Prefill KV pool capacity (tokens).
    pub prefill_pool_tokens: u64,
    /// Decode KV pool capacity (tokens). Not in the record: a model assumption.
    pub decode_pool_tokens: u64,
    /// Tokens per KV page.
    pub page_size: u32,
    pub free_list: FreeListPolicy,
    /// Boolean switches that are on, in canonical order.
    pub fixes: Vec<Fix>,
    pub poison_on_free: PoisonMode,
    pub checksum_scope: ChecksumScope,
    pub page_tail: PageTail,
    /// Seed of the scheduler and of the tenants' documents.
    pub seed: u64,
    /// Decode gives up on a transfer after this many virtual seconds
    /// (`SGLANG_DISAGGREGATION_WAITING_TIMEOUT`, 300 by default upstream).
    pub waiting_timeout_s: u64,
    /// Tokens decode generates for the probed request.
    pub max_new_tokens: u32,
}

impl ProbeConfig {
    /// SGLang's per-request input cap for a worker with `pool_tokens`:
    /// `min(context_len - 1, pool - 1) - 5`. Context length is never
    /// rejected at start-up for exceeding the pool.
    pub fn input_cap(&self, pool_tokens: u64) -> u64 {
        crate::preset::max_req_input_len(self.context_len, pool_tokens)
    }

    /// The prefill worker's input cap (681,274 at incident scale).
    pub fn prefill_input_cap(&self) -> u64 {
        self.input_cap(self.prefill_pool_tokens)
    }

    /// The decode worker's own input cap.
    pub fn decode_input_cap(&self) -> u64 {
        self.input_cap(self.decode_pool_tokens)
    }
}

/// Where the behaviour of a step comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Provenance {
    /// Stated in the vendor's incident report.
    Disclosed,
    /// Asserted by an upstream unit test.
    UpstreamTest,
    /// Stated in an upstream pull request or issue.
    UpstreamThread,
    /// Read in upstream source code (file and function cited).
    UpstreamCode,
    /// Shown by a released upstream version's own code, run by
    /// `kvw upstream run` (an upstream-run receipt records it).
    UpstreamRun,
    /// Our own choice where the record is silent.
    ModelAssumption,
}

/// One of the seven steps of the incident, as this run lived it. The step
/// holds facts, not prose: readers' sentences are rendered from the facts
/// (by the words crate, `kvw-words`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// 1..=7.
    pub step: u8,
    /// Whether the probed request reached this step.
    pub reached: bool,
    /// Indices into the predicate's `events` of the probed request's events
    /// that belong to this step.
    pub events: Vec<u32>,
    /// What this step establishes, each with its own provenance.
    pub facts: Vec<Fact>,
    /// The probed request's state at this step's door, when the step has a door.
    pub state: Option<ReqState>,
    /// Page-level picture of the pools after this step, when the step touches pages.
    pub pages: Option<PageView>,
    /// Source lines (upstream pinned, and the engine's own) this step models.
    pub sources: Vec<SourceRef>,
}

/// One structured claim of a step and where it comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Fact {
    #[serde(with = "crate::tagged")]
    #[schemars(with = "Claim")]
    pub claim: Claim,
    pub provenance: Provenance,
    /// What backs the provenance: a PR, test, issue, source file or the
    /// assumption's id (e.g. `PR #38935`, `assumption:decode-pool`).
    pub basis: String,
}

/// The claims a step can make. Numbers are the run's own.
//
// On the wire a claim is one flat object whose `kind` names the variant;
// [`crate::tagged`] says why the derive is externally tagged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
#[schemars(tag = "kind")]
pub enum Claim {
    /// The router sent the prompt to prefill and decode with a bootstrap room.
    Dispatched { prompt_len: u64, room: u64 },
    /// A worker's input check rejected the prompt: `set_finish_with_abort`
    /// recorded it in `to_finish` and swapped the prompt for one token.
    InputRejected {
        worker: Worker,
        input_len: u64,
        cap: u64,
    },
    /// A worker's input check passed.
    InputAccepted {
        worker: Worker,
        input_len: u64,
        cap: u64,
    },
    /// A door looked at the request and decided.
    Door {
        door: DoorName,
        decision: DoorDecision,
        finished: bool,
        to_finish_set: bool,
    },
    /// Decode reserved pages for the request (`_pre_alloc`).
    Reserved {
        pages: u64,
        tokens: u64,
        page_size: u32,
        /// Reserved pages still holding bytes of earlier requests.
        previously_written: u64,
    },
    /// Nothing was reserved on decode for the request.
    NothingReserved,
    /// The prefill forward computed KV.
    Forwarded {
        tokens: u64,
        prompt_len: u64,
        pages: u64,
    },
    /// Prefill sent its pages with the final flag.
    HandoffSent {
        pages_sent: u64,
        pages_reserved: u64,
        tokens_covered: u64,
        prompt_len: u64,
        with_checksum: bool,
        /// Slots of the last sent page the forward did not write.
        stale_tail_slots: u64,
    },
    /// Prefill retired the aborted result: nothing sent, resources freed once.
    ResultRetired,
    /// Decode's receiver polled the handoff complete and decode admitted it.
    HandoffAccepted {
        pages_written: u64,
        pages_reserved: u64,
    },
    /// Decode aborted the request before batching it.
    HandoffAborted { cause: AbortCause, status: u16 },
    /// Decode attention read pages for the request's first step.
    Attended {
        pages_read: u64,
        positions: u64,
        foreign_pages: u64,
    },
    /// Decode attention read pages another request wrote, after the first step.
    LaterForeignReads { decode_step: u32, pages: u64 },
    /// `poison-on-free` found poisoned pages in the read set.
    PoisonFound { pages: u64, mode: PoisonMode },
    /// Page tags refused a page: the read failed closed.
    TagRefused { index: u64, page: u64 },
    /// Each worker's answer to the router, and what the client got.
    Answered {
        prefill_status: Option<u16>,
        decode_status: Option<u16>,
        status: u16,
        latency_us: u64,
        outcome: Outcome,
    },
    /// The request never reached this step.
    NotReached { because: StopCause },
}

/// A PD worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Worker {
    Router,
    Prefill,
    Decode,
    Client,
}

/// The doors of the PD lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DoorName {
    /// Prefill bootstrap queue entry (`PrefillBootstrapQueue.add`).
    PrefillBootstrapQueue,
    /// Prefill waiting queue (`get_new_batch_prefill`).
    PrefillWaitingQueue,
    /// Prefill result handling (`process_batch_result_disagg_prefill`).
    PrefillResult,
    /// Decode prealloc queue entry (`DecodePreallocQueue.add`).
    DecodePreallocQueue,
    /// Decode transfer queue (`DecodeTransferQueue.pop_transferred`).
    DecodeTransferQueue,
}

/// What a door decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DoorDecision {
    Admitted,
    /// Retired with its recorded rejection (PR #38935 / #36988).
    Retired,
    /// Dropped because `finished()` said it was done.
    Dropped,
    SentLastChunk,
    Aborted,
}

/// Why decode aborted a handoff.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AbortCause {
    /// The waiting timeout passed without a complete handoff.
    Timeout,
    /// The KV checksum did not match.
    ChecksumMismatch,
    /// The request was already finished when the handoff completed.
    AlreadyFinished,
    /// The transfer failed.
    TransferFailed,
}

/// Why a request stopped before a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StopCause {
    RetiredAtPrefillDoor,
    RetiredAtDecodeDoor,
    ResultRetired,
    AbortedBeforeBatch,
    RefusedBeforeRead,
    Other,
}

/// What the run amounts to for the probed request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Another tenant's data reached the response.
    Leak,
    /// HTTP 200, no foreign data, but not the request's own answer.
    WrongAnswer,
    /// HTTP 200 with the request's own answer.
    Correct,
    /// An error status, no foreign data.
    Refused,
}

/// The probed `Req` as a door saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReqState {
    /// Which door looked at the request.
    pub door: DoorName,
    /// `Req.to_finish` (`None` when empty).
    pub to_finish: Option<FinishReason>,
    /// `Req.finished_reason`.
    pub finished_reason: Option<FinishReason>,
    /// What `Req.finished()` returned.
    pub finished: bool,
    /// Prompt length the client sent.
    pub original_prompt_len: u64,
    /// `len(origin_input_ids)` at this point (1 after the placeholder swap).
    pub origin_input_len: u64,
    /// What the door decided.
    pub decision: DoorDecision,
}

/// Why a request finished, as upstream's `BaseFinishReason` subclasses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum FinishReason {
    /// `FINISH_LENGTH`: `max_new_tokens` reached.
    Length { length: u32 },
    /// `FINISH_ABORT`: aborted with an HTTP status and upstream's message.
    Abort { status_code: u16, message: String },
}

/// Page-level view of the decode pool (and the transfer) for one request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PageView {
    pub pool: PoolSide,
    pub pages_total: u64,
    pub page_size: u32,
    /// Pool pages grouped into runs of consecutive page ids with the same writer.
    pub runs: Vec<PageRun>,
    /// Pages reserved for the probed request, in page-table order.
    pub reserved: Vec<PageRange>,
    /// Pages the handoff wrote for the probed request.
    pub transferred: Vec<PageRange>,
    /// Pages decode attention read for the probed request.
    pub read: Vec<PageRange>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PoolSide {
    Prefill,
    Decode,
}

/// A run of `count` consecutive page ids starting at `first`, in page-table
/// order: upwards (`first, first + 1, …`) or, with `down`, downwards
/// (`first, first - 1, …`), the order in which a LIFO free list hands out
/// pages it took back in ascending order. Page tables at incident scale are
/// thousands of pages long; a downward run keeps them a few entries long.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PageRange {
    pub first: u64,
    pub count: u64,
    /// The run counts down from `first`; absent (false) when it counts up.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub down: bool,
}

impl PageRange {
    /// The upward run `[first, first + count)`.
    pub fn up(first: u64, count: u64) -> Self {
        PageRange {
            first,
            count,
            down: false,
        }
    }

    /// The downward run `first, first - 1, …, first - count + 1`.
    pub fn down(first: u64, count: u64) -> Self {
        PageRange {
            first,
            count,
            down: true,
        }
    }

    /// The lowest page id of the run (an empty run reports `first`).
    pub fn low(&self) -> u64 {
        if self.down && self.count > 0 {
            self.first.saturating_sub(self.count - 1)
        } else {
            self.first
        }
    }

    /// One past the highest page id of the run.
    pub fn end(&self) -> u64 {
        self.low().saturating_add(self.count)
    }

    /// Whether page `p` is in the run.
    pub fn contains(&self, p: u64) -> bool {
        self.low() <= p && p < self.end()
    }

    /// The same pages as an upward run.
    pub fn ascending(&self) -> PageRange {
        PageRange::up(self.low(), self.count)
    }

    /// The page ids in page-table order (a malformed downward run that
    /// would pass page 0 stops there).
    pub fn pages(&self) -> impl Iterator<Item = u64> {
        let (first, count, down) = (self.first, self.count, self.down);
        (0..count).map_while(move |i| {
            if down {
                first.checked_sub(i)
            } else {
                first.checked_add(i)
            }
        })
    }
}

/// A run of consecutive pool pages whose bytes came from the same writer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PageRun {
    pub first: u64,
    pub count: u64,
    /// Relation of the writer to the probed request.
    pub class: WriterClass,
    /// The last writer, `None` if never written (or scrubbed).
    pub writer: Option<Writer>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum WriterClass {
    /// Written by the probed request in its current generation.
    ThisRequest,
    /// Written by a request of another tenant.
    OtherTenant,
    /// Written by another request of the same tenant.
    SameTenant,
    /// Never written since the pool was created, or scrubbed.
    NeverWritten,
}

/// Who wrote a page's current bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Writer {
    pub tenant: String,
    /// Request id (`rid`).
    pub rid: String,
    /// Generation of the request's KV (bumps on re-bootstrap / retraction).
    pub generation: u32,
}

/// A pointer into source code: the pinned upstream file or the engine's own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SourceRef {
    pub origin: SourceOrigin,
    /// Path inside the repository.
    pub path: String,
    /// First line (1-based), if the reference is to specific lines.
    pub line_start: Option<u32>,
    /// Last line, inclusive.
    pub line_end: Option<u32>,
    /// What these lines do.
    pub label: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SourceOrigin {
    /// SGLang at [`UPSTREAM_COMMIT`].
    Upstream,
    /// This engine at the receipt's `engine.commit`.
    Engine,
}

/// One thing that happened to one request, at a virtual time. Events are
/// facts the simulator's mechanics report; they carry no prose. On the
/// wire an event is one flat object: `at_us`, `rid`, the `kind` naming the
/// variant and the variant's fields.
#[derive(Debug, Clone, PartialEq, Eq, JsonSchema)]
pub struct Event {
    /// Virtual time in microseconds since the run started.
    pub at_us: u64,
    /// Request id the event concerns.
    pub rid: String,
    #[schemars(flatten)]
    pub kind: EventKind,
}

impl Serialize for Event {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::Error;
        let mut fields = crate::tagged::flatten(&self.kind).map_err(S::Error::custom)?;
        crate::tagged::put(&mut fields, "at_us", self.at_us.into()).map_err(S::Error::custom)?;
        crate::tagged::put(&mut fields, "rid", self.rid.as_str().into())
            .map_err(S::Error::custom)?;
        fields.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use crate::tagged::{take, unflatten};
        use serde::de::Error;
        let mut fields = serde_json::Map::deserialize(deserializer)?;
        let read = |fields: &mut serde_json::Map<_, _>| -> Result<Event, serde_json::Error> {
            Ok(Event {
                at_us: take(fields, "at_us")?,
                rid: take(fields, "rid")?,
                kind: unflatten(std::mem::take(fields))?,
            })
        };
        read(&mut fields).map_err(D::Error::custom)
    }
}

/// What happened. `worker` names the component that acted.
//
// Written flat into its [`Event`]; [`crate::tagged`] says why the derive is
// externally tagged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
#[schemars(tag = "kind")]
pub enum EventKind {
    /// The router sent the request to prefill and decode.
    Dispatch { prompt_len: u64, room: u64 },
    /// A worker's input-length check (`validate_input_length`).
    InputCheck {
        worker: Worker,
        input_len: u64,
        cap: u64,
        rejected: bool,
    },
    /// A door decided, reading the request's state.
    Door {
        worker: Worker,
        door: DoorName,
        state: ReqState,
        decision: DoorDecision,
    },
    /// A KV sender (prefill) or receiver (decode) and a metadata buffer were created.
    Bootstrap {
        worker: Worker,
        room: u64,
        metadata_buffer: u64,
    },
    /// Decode reserved pages (`_pre_alloc`).
    Reserve { pages: Vec<PageRange>, tokens: u64 },
    /// Prefill saw decode's page table for the room.
    Handshake { room: u64 },
    /// The prefill forward wrote KV for token positions `from..to`.
    Forward { from: u64, to: u64, pages: u64 },
    /// Prefill posted pages to decode.
    KvSend {
        pages: u64,
        last: bool,
        checksum: Option<u32>,
    },
    /// Page writes landed in decode's pool. Landings that follow one another
    /// with no other event in between, for the same request, are one event:
    /// the first landed at `at_us`, the last at `until_us`.
    KvLanded {
        pages: Vec<PageRange>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        until_us: Option<u64>,
    },
    /// Best-effort `sender.abort()` on prefill.
    SenderAbort { room: u64 },
    /// A receiver poll that changed the request's course.
    Poll { worker: Worker, result: PollResult },
    /// Decode checked the KV checksum.
    ChecksumCheck {
        expected: u32,
        computed: u32,
        pages: u64,
    },
    /// Decode found poisoned pages in the read set.
    PoisonCheck { pages: u64, mode: PoisonMode },
    /// Decode attention ran one step.
    Attend {
        decode_step: u32,
        pages: u64,
        foreign_pages: u64,
        token: u32,
    },
    /// Page tags refused a page.
    TagRefused { index: u64, page: u64 },
    /// A worker aborted the request (`prepare_abort` / `set_finish_with_abort`).
    Abort {
        worker: Worker,
        status: u16,
        message: String,
    },
    /// Pages went back to a pool's free list (or were held back).
    Release {
        worker: Worker,
        pages: u64,
        deferred: bool,
    },
    /// A worker answered the router.
    WorkerAnswer {
        worker: Worker,
        status: u16,
        finish_reason: String,
    },
    /// The client received its response.
    Response { status: u16, text: String },
    /// A per-request resource other than KV pages was allocated, freed,
    /// detached or failed to be released (metadata buffer index, Mamba slot,
    /// HiCache entry, retraction backup, streaming-session slot, KV sender).
    /// Recorded by scenario and fuzz runs; probe v2 runs do not record it.
    Resource {
        worker: Worker,
        resource: ResourceKind,
        action: ResourceAction,
        /// The slot or buffer index (0 where the resource has none).
        index: u64,
    },
    /// A drain ack for a room from one decode peer reached the sender.
    DrainAck { room: u64, peer: u32 },
}

/// A per-request resource a worker holds besides KV pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ResourceKind {
    /// `metadata_buffer_index` from `req_to_metadata_buffer_idx_allocator`.
    MetadataBuffer,
    /// `kv.mamba_pool_idx`: the hybrid (Mamba) state slot.
    MambaSlot,
    /// The HiCache storage entry `tree_cache.release_aborted_request` clears.
    HicacheEntry,
    /// `kv.retraction_backup`: host KV kept for a retracted request.
    RetractionBackup,
    /// A streaming session's active slot.
    SessionSlot,
    /// The KV sender (`disagg_kv_sender`).
    KvSender,
}

/// What happened to a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ResourceAction {
    Allocate,
    Free,
    /// Freed again while already free (a double free).
    DoubleFree,
    /// A session's active slot was detached from the request.
    Detach,
    /// `sender.abort()` raised (transport down); cleanup went on.
    AbortFailed,
}

/// What a receiver poll said.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PollResult {
    Transferring,
    Success,
    Failed,
}

/// A request of the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RequestInfo {
    pub rid: String,
    pub tenant: String,
    pub prompt_len: u64,
    /// The canary string hidden in the tenant's document.
    pub canary: String,
    pub arrival_us: u64,
    /// The request the receipt is about.
    pub probed: bool,
}

/// A choice the engine makes where the public record is silent, and the
/// flag that runs the alternative.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Assumption {
    pub id: AssumptionId,
    /// Command-line flag of `kvw probe` that runs the alternative.
    pub alternative: String,
}

/// The model assumptions a run can rely on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum AssumptionId {
    /// The decode pool's size (and so whether decode's own input cap rejects).
    DecodePool,
    /// Page size 64 at incident scale (from #30233, on GLM-5.2).
    PageSize,
    /// The decode pool is warm: filled by earlier requests of other tenants.
    WarmPool,
    /// A whole-page transfer carries the stale tail of the last page.
    PageTail,
    /// Decode's checksum covers the reserved pages.
    ChecksumScope,
    /// The status a page-tag refusal answers.
    TagRefusalStatus,
    /// `poison-on-free` is this project's own defense.
    PoisonOnFree,
    /// `scrub-on-free` is this project's own defense.
    ScrubOnFree,
}

/// What the run amounts to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Verdict {
    pub outcome: Outcome,
    /// Another tenant's data reached the probed request's response.
    pub leak: bool,
    /// HTTP status the client of the probed request received.
    pub http_status: u16,
    /// Pages decode attention read whose bytes were written by another request.
    pub foreign_pages_read: u64,
    /// Other tenants' canary strings found verbatim in the response.
    pub canaries_leaked: Vec<String>,
    /// Tenants whose canaries leaked, in the order of `canaries_leaked`.
    pub tenants_leaked: Vec<String>,
    /// Virtual microseconds until the client got its answer.
    pub latency_us: u64,
    /// Response body text (completion text on 200, error message otherwise).
    pub response_text: String,
    /// The response equals what a correct engine would answer (the request's own prompt echo on 200).
    pub correct_answer: bool,
    /// Counters kept by the engine during the run.
    pub counters: Counters,
}

/// Engine counters at the end of a run.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Counters {
    /// Bootstrap rooms created for the probed request.
    pub bootstraps: u32,
    /// Metadata buffer indices allocated for the probed request.
    pub metadata_buffers: u32,
    /// KV senders created for the probed request on prefill.
    pub senders: u32,
    /// KV receivers created for the probed request on decode.
    pub receivers: u32,
    /// Prefill forward batches that carried the probed request (stub batches included).
    pub prefill_batches: u32,
    /// Transfers that ended in failure (checksum mismatch, timeout, abort).
    pub transfer_failures: u32,
    /// Page reads refused by the owner-tag check.
    pub tag_refusals: u32,
    /// Page reads that hit poisoned (freed) pages.
    pub poison_reads: u32,
    /// Pages freed twice (must stay 0).
    pub double_frees: u32,
}
