//! The probe predicate: what one probe run saw, step by step.
//!
//! A receipt's in-toto Statement carries this predicate. It is the contract
//! between the engine (which fills it), the verifier (which checks and
//! reproduces it) and the explorer (which draws it). Every field is plain data
//! so the same types compile natively and for `wasm32-unknown-unknown`.
//!
//! Unknown fields are refused everywhere (`deny_unknown_fields`): a receipt
//! that says more than this schema knows is not silently half-read.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `predicateType` of every kvwitness probe receipt. The trailing `v1` is the
/// predicate version; a receipt with any other value is refused.
pub const PREDICATE_TYPE: &str = "https://kvwitness.dev/attestation/probe/v1";

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
    /// Exactly seven entries, `step` 1..=7, in order.
    pub steps: Vec<Step>,
    pub verdict: Verdict,
    /// Lowercase hex SHA-256 of the canonical JSON of `steps`.
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    Cpu,
    Cuda,
}

/// Size preset of a probe run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Scale {
    /// A handful of pages, small enough to draw page by page.
    Walkthrough,
    /// The disclosed production numbers: context 1,048,576, prefill pool 681,280, page size 64.
    Incident,
}

/// Which end of the free list a pool reuses first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FreeListPolicy {
    /// Freed pages go to the back; the oldest free page is reused first.
    Fifo,
    /// Freed pages go to the front; the page freed last is reused first (worst case).
    Lifo,
}

/// `--kv-canary` mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum KvCanaryMode {
    Off,
    Log,
    Raise,
}

/// A boolean defense switch of the fix matrix. The kebab-case name is the
/// switch name on the command line and in receipts.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
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

    /// The switch name as written on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Fix::RetireAbortedPrefillResult => "retire-aborted-prefill-result",
            Fix::RetireUnadmittedReject => "retire-unadmitted-reject",
            Fix::KvChecksum => "kv-checksum",
            Fix::PageTags => "page-tags",
            Fix::DeferredRelease => "deferred-release",
            Fix::ScrubOnFree => "scrub-on-free",
        }
    }

    /// Parse a switch name; `None` if unknown.
    pub fn from_name(name: &str) -> Option<Fix> {
        Fix::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// Full configuration of a probe run: re-running with it reproduces the trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProbeConfig {
    pub scale: Scale,
    /// Configured context length (tokens).
    pub context_len: u64,
    /// Prefill KV pool capacity (tokens).
    pub prefill_pool_tokens: u64,
    /// Decode KV pool capacity (tokens).
    pub decode_pool_tokens: u64,
    /// Tokens per KV page.
    pub page_size: u32,
    /// Per-request input cap derived from the rule min(context-1, pool-1) - 5.
    pub max_req_input_len: u64,
    pub free_list: FreeListPolicy,
    /// Boolean switches that are on, in canonical order.
    pub fixes: Vec<Fix>,
    pub kv_canary: KvCanaryMode,
    /// Seed of the scheduler and of the tenants' documents.
    pub seed: u64,
    /// Decode gives up on a transfer after this many virtual seconds.
    pub waiting_timeout_s: u64,
    /// Tokens decode generates per request.
    pub max_new_tokens: u32,
}

/// Where the behaviour of a step comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Provenance {
    /// Stated in the vendor's incident report.
    Disclosed,
    /// Asserted by an upstream unit test.
    UpstreamTest,
    /// Stated in an upstream pull request or issue.
    UpstreamThread,
    /// Our own choice where the record is silent.
    ModelAssumption,
}

/// One of the seven steps of the incident, as this run lived it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// 1..=7.
    pub step: u8,
    /// Short name, e.g. `Bootstrap`.
    pub name: String,
    pub provenance: Provenance,
    /// One or two sentences: what happened at this step in this run.
    pub summary: String,
    /// The probed request's state at this step's door, when the step has a door.
    pub state: Option<ReqState>,
    /// Page-level picture of the pools after this step, when the step touches pages.
    pub pages: Option<PageView>,
    /// Source lines (upstream pinned, and the engine's own) this step models.
    pub sources: Vec<SourceRef>,
    /// Ordered events of this step.
    pub events: Vec<Event>,
}

/// The probed `Req` as a door saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReqState {
    /// Which door or point looked at the request, e.g. `prefill.waiting_queue`.
    pub door: String,
    /// `Req.to_finish`, rendered (`None` when empty).
    pub to_finish: Option<String>,
    /// `Req.finished_reason`, rendered.
    pub finished_reason: Option<String>,
    /// What `Req.finished()` returned.
    pub finished: bool,
    /// Prompt length the client sent.
    pub original_prompt_len: u64,
    /// `len(origin_input_ids)` at this point (1 after the placeholder swap).
    pub origin_input_len: u64,
    /// What the door decided, e.g. `admitted`, `retired`, `rejected`.
    pub decision: String,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PoolSide {
    Prefill,
    Decode,
}

/// Consecutive page ids `[first, first + count)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PageRange {
    pub first: u64,
    pub count: u64,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SourceOrigin {
    /// SGLang at [`UPSTREAM_COMMIT`].
    Upstream,
    /// This engine at the receipt's `engine.commit`.
    Engine,
}

/// One thing that happened, at a virtual time, somewhere in the system.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Event {
    /// Virtual time in microseconds since the run started.
    pub t_us: u64,
    /// Component that acted: `router`, `prefill`, `decode`, `transfer`, `client`.
    pub actor: String,
    /// Request id the event concerns.
    pub rid: String,
    /// Machine-readable event kind, e.g. `door`, `prealloc`, `kv_send`, `attend`.
    pub kind: String,
    /// Human-readable detail.
    pub detail: String,
}

/// What the run amounts to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Verdict {
    /// Another tenant's data reached the probed request's response.
    pub leak: bool,
    /// HTTP status the client of the probed request received.
    pub http_status: u16,
    /// Pages decode attention read whose bytes were written by another request.
    pub foreign_pages_read: u64,
    /// Other tenants' canary strings found verbatim in the response.
    pub canaries_leaked: Vec<String>,
    /// Virtual seconds until the client got its answer.
    pub latency_s: f64,
    /// Response body text (completion text on 200, error message otherwise).
    pub response_text: String,
    /// The response equals what a correct engine would answer (the request's own prompt echo on 200).
    pub correct_answer: bool,
    /// One-line outcome, e.g. `leak: HTTP 200 with tenant acme's canary`.
    pub outcome: String,
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
    /// Page reads that hit canary data.
    pub canary_reads: u32,
    /// Pages freed twice (must stay 0).
    pub double_frees: u32,
}
