//! The PD handoff as a `stateright` model: actors, state and transitions.
//!
//! Why it exists: the simulator runs *one* interleaving per seed; this model
//! lets the checker enumerate *every* interleaving of the router, the
//! prefill scheduler, the transfer channel, the decode scheduler and both
//! page allocators, with injected faults. Every transition that decides an
//! outcome asks the engine: the admission doors ([`policy::entry_door`],
//! [`policy::prefill_admission_door`]), `Req::finished()` and
//! `set_finish_with_abort` / `update_finish_state` of the engine's [`Req`],
//! the result handling ([`policy::prefill_result_action`]), the handoff door
//! ([`policy::handoff_door`]), the release rule ([`policy::release_rule`])
//! and the router's answer ([`policy::router_answer`]: decode's, once both
//! workers answered). The model only moves requests between queues and
//! pages between owners.
//!
//! Upstream mechanisms the transitions follow (SGLang at
//! `8f3d6944b76c428d884582cb6c82a39db1465360`):
//!
//! * prefill validates the prompt against `min(context−1, pool−1)−5` and a
//!   rejection goes through `set_finish_with_abort`, which records it in
//!   `to_finish` and swaps the prompt for a one-token placeholder
//!   ([schedule_batch.py L2053–2072](https://github.com/sgl-project/sglang/blob/8f3d6944b76c428d884582cb6c82a39db1465360/python/sglang/srt/managers/schedule_batch.py#L2053-L2072)),
//!   while `finished()` reads `finished_reason`
//!   ([L1479–1481](https://github.com/sgl-project/sglang/blob/8f3d6944b76c428d884582cb6c82a39db1465360/python/sglang/srt/managers/schedule_batch.py#L1479-L1481))
//!   and `update_finish_state()` applies `to_finish` later
//!   ([L1842–1848](https://github.com/sgl-project/sglang/blob/8f3d6944b76c428d884582cb6c82a39db1465360/python/sglang/srt/managers/schedule_batch.py#L1842-L1848));
//! * decode's `_pre_alloc` reserves pages for the prompt length the client
//!   sent (decode's own view), and `receiver.init` registers them with the
//!   bootstrap room;
//! * prefill sends the pages it holds — for a rejected request only the
//!   placeholder's page — with the final flag, and the room polls complete
//!   once every posted write landed;
//! * decode's `abort_request` calls `kv_receiver.abort()` for requests in
//!   the prealloc and transfer queues (the next poll says `Failed`), and
//!   sets `to_finish` to the abort for running requests (their input is
//!   computed; `set_finish_with_abort`'s placeholder swap does not apply);
//! * with deferred release (PRs #35049, #40645, #41404) pages of a room stay
//!   allocated until its writes drained and the peer's drain ack arrived —
//!   on decode, at most until the release timeout
//!   ([`policy::DEFERRED_RELEASE_TIMEOUT_US`], 30 s in PR #35049), after
//!   which they go back without the ack (the use-after-free window of
//!   SGLang #38961); decode closes the room, and prefill posts nothing to a
//!   closed room;
//! * an abort cancels no write already on the wire: every posted write
//!   lands, before or after its room closed.
//!
//! Model assumptions (where the record is silent; each is a choice, not a
//! finding):
//!
//! * **one chunk, one output token**: prefill runs a request in one forward
//!   and sends one last chunk; decode runs one step (`max_new_tokens = 1`),
//!   whose KV slot lies in the last reserved page;
//! * **no timing**: the decode transfer timeout may fire at any moment a
//!   poll says `Transferring`, and the release timeout at any moment a
//!   deferral waits; every write may land at any moment;
//! * **router order**: the router's messages to one worker about one request
//!   arrive in the order it sent them (the dispatch before any abort); it
//!   never forwards a prefill error to decode (SGLang's `mini_lb` gathers
//!   both answers and returns decode's, [`policy::router_answer`]);
//! * **late writes**: a timeout (decode's transfer timeout or the release
//!   timeout) fires with a write of the room still on the wire only as an
//!   injected *late write* (budgeted): the write is later than the timeout.
//!   A client abort needs no such fault — the writes on the wire when decode
//!   answers the abort land after the close;
//! * **lost acks**: a drain ack may be lost (budgeted); the sender then
//!   never sees it;
//! * **client aborts** (budgeted) reach both workers through the router and
//!   are answered, when decode answers them itself, with status 499;
//! * **prefill's `abort_request`** records the abort with
//!   `set_finish_with_abort` on any request it still holds, and a request
//!   whose receiver failed before the handshake leaves the bootstrap queue;
//! * **allocators** are LIFO free lists (the worst case of the engine's two
//!   policies); the decode pool starts warm: every page holds KV of an
//!   earlier request of tenant `page % tenants`;
//! * **checksum**: the Adler-32 of PR #39500 is abstracted to "the same
//!   pages with the same writers" (no collisions);
//! * **retraction and re-bootstrap** are not modelled: the KV generation of
//!   every request stays 0.

use std::hash::{Hash, Hasher};
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use kvw_engine::policy::{self, Door, FixSet, HandoffDecision, KvPoll, Release, ResultAction};
use kvw_engine::req::{max_req_input_len, validate_input_length, FinishReason, Req};
use kvw_evidence::Fix;
use stateright::{Model, Property};

/// Tokens per KV page in the model.
pub const PAGE_SIZE: usize = 4;
/// Configured context length: far above both pools, as in the incident.
pub const CONTEXT_LEN: u64 = 1024;
/// Decode's transfer timeout in the engine's units; only "reached or not" matters.
const TIMEOUT_US: u64 = 300_000_000;
/// Status of a request the client aborted (model assumption).
pub const CLIENT_ABORT_STATUS: u16 = 499;

/// A request index in the model (`r0`, `r1`, ...).
pub type Rid = u8;

/// Everything the model is built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelConfig {
    pub requests: u8,
    pub tenants: u8,
    pub decode_pages: u8,
    pub prefill_pages: u8,
    pub fixes: FixSet,
    pub aborts: u8,
    pub late_writes: u8,
    pub lost_acks: u8,
}

/// Who wrote a page's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Writer {
    /// KV left by a request of this tenant before the checked window.
    Earlier(u8),
    /// A checked request in a KV generation.
    Req(Rid, u32),
}

/// One KV page's bookkeeping: who holds it, who wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Page {
    pub owner: Option<Rid>,
    pub writer: Option<Writer>,
}

/// A page write posted on the transfer channel: prefill page `src` to decode page `dst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Write {
    pub req: Rid,
    pub src: u8,
    pub dst: u8,
}

/// Which worker's pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Side {
    Prefill,
    Decode,
}

/// Pages held back by deferred release.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Deferred {
    pub side: Side,
    pub req: Rid,
    pub pages: Vec<u8>,
}

/// A router message to one worker about one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Msg {
    Dispatch,
    Abort(u16),
}

/// Where a request is on prefill.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PStage {
    None,
    /// `PrefillBootstrapQueue`: sender, room and metadata buffer exist.
    Bootstrap,
    /// Waiting queue: decode registered its pages.
    Waiting,
    /// Inflight queue: the last chunk was sent.
    Inflight,
    Done,
}

/// Where a request is on decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DStage {
    None,
    /// `DecodePreallocQueue`.
    Prealloc,
    /// `DecodeTransferQueue`: pages reserved and registered.
    Transfer,
    /// Running batch.
    Running,
    Done,
}

/// An ack between the two sides of a room.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ack {
    None,
    Sent,
    Delivered,
    Lost,
}

/// One bootstrap room (the transfer channel's per-request state).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Room {
    /// Decode pages registered by `receiver.init`.
    pub dst: Option<Vec<u8>>,
    pub posted: u8,
    pub landed: u8,
    pub final_sent: bool,
    /// `kv-checksum`: pages covered and the generation that wrote them.
    pub checksum: Option<(u8, u32)>,
    pub sender_aborted: bool,
    /// `kv_receiver.abort()` was called, or decode gave up on the room.
    pub receiver_aborted: bool,
    /// Decode released the request: writes still on the wire are orphans.
    pub closed: bool,
    /// Decode's ack that it is done with the room (prefill's peer ack).
    pub ack: Ack,
    /// Prefill's drain ack: it will post nothing more to the room (decode's
    /// peer ack, PRs #40645 / #41402).
    pub drain_ack: Ack,
}

impl Room {
    /// A room before decode registered any page.
    pub const OPEN: Room = Room {
        dst: None,
        posted: 0,
        landed: 0,
        final_sent: false,
        checksum: None,
        sender_aborted: false,
        receiver_aborted: false,
        closed: false,
        ack: Ack::None,
        drain_ack: Ack::None,
    };
}

/// The engine's [`Req`] as model state. `Req` has no `Hash`; this hashes
/// and compares every field except `rid`, `tenant` and `bootstrap_room`,
/// which the request's index fixes (leaving them out lets request symmetry
/// merge states). The prompt counts by its length: its tokens are fixed.
///
/// The `Req` sits behind an [`Arc`] and is copied on write
/// ([`Arc::make_mut`] through [`DerefMut`]): the checker clones a whole
/// state per transition, and most transitions leave both `Req`s of most
/// requests untouched, so a clone costs a reference count instead of the
/// `Req`'s strings and token vectors.
#[derive(Debug, Clone)]
pub struct ModelReq(Arc<Req>);

impl Deref for ModelReq {
    type Target = Req;
    fn deref(&self) -> &Req {
        &self.0
    }
}

impl DerefMut for ModelReq {
    fn deref_mut(&mut self) -> &mut Req {
        Arc::make_mut(&mut self.0)
    }
}

impl ModelReq {
    pub fn new(req: Req) -> Self {
        ModelReq(Arc::new(req))
    }

    fn fields(&self) -> impl Hash + PartialEq + '_ {
        let Req {
            rid: _,
            tenant: _,
            origin_input_ids,
            output_ids,
            max_new_tokens,
            to_finish,
            finished_reason,
            metadata_buffer_index,
            retraction_backup,
            is_retracted,
            is_rebootstrap,
            session,
            generation,
            bootstrap_room: _,
        } = &*self.0;
        (
            origin_input_ids.len(),
            output_ids,
            max_new_tokens,
            (
                to_finish.as_ref().map(reason_key),
                finished_reason.as_ref().map(reason_key),
            ),
            metadata_buffer_index,
            retraction_backup.as_ref().map(|b| b.tokens),
            (is_retracted, is_rebootstrap),
            session.as_ref().map(|s| (s.streaming, s.holds_active_slot)),
            generation,
        )
    }
}

/// A finish reason as hashable facts (status and kind; messages are fixed per status).
fn reason_key(r: &FinishReason) -> (u8, u32) {
    match r {
        FinishReason::Length { length } => (0, *length),
        FinishReason::Abort { status_code, .. } => (1, u32::from(*status_code)),
    }
}

impl Hash for ModelReq {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.fields().hash(state);
    }
}

impl PartialEq for ModelReq {
    fn eq(&self, other: &Self) -> bool {
        self.fields() == other.fields()
    }
}
impl Eq for ModelReq {}

/// One request across router, both workers and its room.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReqState {
    pub client_aborted: bool,
    /// Router → prefill messages, oldest first.
    pub to_prefill: Vec<Msg>,
    /// Router → decode messages, oldest first.
    pub to_decode: Vec<Msg>,
    pub pstage: PStage,
    pub preq: Option<ModelReq>,
    pub ppages: Vec<u8>,
    pub dstage: DStage,
    pub dreq: Option<ModelReq>,
    pub table: Vec<u8>,
    pub room: Room,
    /// HTTP statuses the client received.
    pub answers: Vec<u16>,
}

/// What broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Violation {
    /// Decode attended to `page`, last written by `writer`, not by `reader` now.
    ForeignRead {
        reader: Rid,
        page: u8,
        writer: Option<Writer>,
    },
    DoubleFree {
        side: Side,
        req: Rid,
        page: u8,
    },
    /// A write of `req` landed on a page it no longer holds.
    WriteAfterReassign {
        req: Rid,
        page: u8,
        owner: Option<Rid>,
    },
    AnsweredTwice {
        req: Rid,
    },
    RejectedGot200 {
        req: Rid,
    },
}

/// The whole cluster.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    pub reqs: Vec<ReqState>,
    pub decode: Vec<Page>,
    /// Free decode pages; the last one is handed out first (LIFO).
    pub decode_free: Vec<u8>,
    pub prefill: Vec<Page>,
    pub prefill_free: Vec<u8>,
    /// Writes in flight, sorted.
    pub writes: Vec<Write>,
    /// Deferred releases, sorted.
    pub deferred: Vec<Deferred>,
    pub aborts_left: u8,
    pub late_writes_left: u8,
    pub lost_acks_left: u8,
    /// Every invariant broken on the way here, sorted.
    pub violations: Vec<Violation>,
}

/// One transition, by actor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// The client gives up; the router tells both workers.
    ClientAbort(Rid),
    /// Prefill takes the next router message.
    PrefillRecv(Rid),
    /// Bootstrap queue: decode's page registration arrived (or its receiver failed).
    PrefillHandshake(Rid),
    /// Waiting-queue door, forward and result processing, in one loop iteration.
    PrefillForward(Rid),
    /// Inflight queue poll: the room completed or failed; prefill pages go back.
    PrefillPoll(Rid),
    /// Decode takes the next router message.
    DecodeRecv(Rid),
    /// Prealloc queue: entry door, receiver poll, `_pre_alloc`.
    DecodePrealloc(Rid),
    /// Transfer queue poll and handoff door.
    DecodePoll(Rid),
    /// The transfer queue's waiting timeout fires.
    DecodeTimeout(Rid),
    /// One decode step over the whole page table, then the answer.
    DecodeStep(Rid),
    /// A posted write lands (a *late write* if its room closed).
    Land(Write),
    /// An ack reaches its peer: `Side::Decode`'s ack reaches prefill,
    /// `Side::Prefill`'s drain ack reaches decode.
    AckDelivered(Side, Rid),
    /// An ack is lost.
    AckLost(Side, Rid),
    /// A deferred release is retried and the release rule now says yes.
    Release(Side, Rid),
    /// Decode's deferred release runs out its timeout: the pages go back
    /// without the drain ack ([`policy::Release::TimedOut`]).
    ReleaseTimeout(Rid),
}

impl Action {
    pub fn req(self) -> Rid {
        match self {
            Action::ClientAbort(r)
            | Action::PrefillRecv(r)
            | Action::PrefillHandshake(r)
            | Action::PrefillForward(r)
            | Action::PrefillPoll(r)
            | Action::DecodeRecv(r)
            | Action::DecodePrealloc(r)
            | Action::DecodePoll(r)
            | Action::DecodeTimeout(r)
            | Action::DecodeStep(r)
            | Action::AckDelivered(_, r)
            | Action::AckLost(_, r)
            | Action::Release(_, r)
            | Action::ReleaseTimeout(r) => r,
            Action::Land(w) => w.req,
        }
    }

    /// Stable snake-case id.
    pub fn id(self) -> &'static str {
        match self {
            Action::ClientAbort(_) => "client_abort",
            Action::PrefillRecv(_) => "prefill_recv",
            Action::PrefillHandshake(_) => "prefill_handshake",
            Action::PrefillForward(_) => "prefill_forward",
            Action::PrefillPoll(_) => "prefill_poll",
            Action::DecodeRecv(_) => "decode_recv",
            Action::DecodePrealloc(_) => "decode_prealloc",
            Action::DecodePoll(_) => "decode_poll",
            Action::DecodeTimeout(_) => "decode_timeout",
            Action::DecodeStep(_) => "decode_step",
            Action::Land(_) => "land",
            Action::AckDelivered(Side::Decode, _) => "ack_delivered",
            Action::AckLost(Side::Decode, _) => "ack_lost",
            Action::AckDelivered(Side::Prefill, _) => "drain_ack_delivered",
            Action::AckLost(Side::Prefill, _) => "drain_ack_lost",
            Action::Release(Side::Prefill, _) => "release_prefill",
            Action::Release(Side::Decode, _) => "release_decode",
            Action::ReleaseTimeout(_) => "release_timeout",
        }
    }

    pub fn actor(self) -> &'static str {
        match self {
            Action::ClientAbort(_) => "client",
            Action::PrefillRecv(_)
            | Action::PrefillHandshake(_)
            | Action::PrefillForward(_)
            | Action::PrefillPoll(_)
            | Action::Release(Side::Prefill, _) => "prefill",
            Action::DecodeRecv(_)
            | Action::DecodePrealloc(_)
            | Action::DecodePoll(_)
            | Action::DecodeTimeout(_)
            | Action::DecodeStep(_)
            | Action::Release(Side::Decode, _)
            | Action::ReleaseTimeout(_) => "decode",
            Action::Land(_) | Action::AckDelivered(..) | Action::AckLost(..) => "channel",
        }
    }
}

/// A prefill admission door the model asks. The shipped door is
/// [`policy::prefill_admission_door`]; tests swap in alternatives to show
/// the verdict depends on it.
pub type PrefillDoor = fn(&Req) -> Door;

/// The model: bounds, switches and the doors it asks.
#[derive(Clone)]
pub struct PdModel {
    pub config: ModelConfig,
    pub prefill_door: PrefillDoor,
    /// Prompt length (tokens) of each request.
    pub prompt_len: Vec<usize>,
    /// Whether prefill's input cap rejects each request.
    pub rejected: Vec<bool>,
    /// Prefill's input cap, `min(context−1, pool−1)−5` (tokens).
    pub prefill_cap: u64,
    /// Decode's own input cap over its pool (tokens).
    pub decode_cap: u64,
    /// Partial-order reduction of independent arrivals (on by default).
    pub reduce: bool,
}

impl std::fmt::Debug for PdModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PdModel")
            .field("config", &self.config)
            .field("prompt_len", &self.prompt_len)
            .finish_non_exhaustive()
    }
}

/// Property names, in the order the model declares them.
pub mod prop {
    pub const ISOLATION: &str = "isolation";
    pub const NO_DOUBLE_FREE: &str = "no-double-free";
    pub const NO_WRITE_AFTER_REASSIGN: &str = "no-write-after-reassignment";
    pub const ANSWERED_AT_MOST_ONCE: &str = "answered-at-most-once";
    pub const REJECTED_NEVER_200: &str = "rejected-never-200";
    pub const COMPLETES_NORMALLY: &str = "completes-normally";
    pub const ADMITTED_ANSWERED: &str = "admitted-answered";
}

impl PdModel {
    /// Request 0 is the incident's request: its prompt exceeds prefill's
    /// input cap by one token. The others fit: two pages each.
    pub fn new(config: ModelConfig) -> Self {
        let ps = PAGE_SIZE as u64;
        let prefill_cap = max_req_input_len(CONTEXT_LEN, u64::from(config.prefill_pages) * ps);
        let decode_cap = max_req_input_len(CONTEXT_LEN, u64::from(config.decode_pages) * ps);
        let prompt_len: Vec<usize> = (0..config.requests)
            .map(|i| {
                if i == 0 {
                    prefill_cap as usize + 1
                } else {
                    PAGE_SIZE + 2
                }
            })
            .collect();
        let rejected = prompt_len
            .iter()
            .map(|&n| validate_input_length(n, prefill_cap).is_some())
            .collect();
        PdModel {
            config,
            prefill_door: policy::prefill_admission_door,
            prompt_len,
            rejected,
            prefill_cap,
            decode_cap,
            reduce: true,
        }
    }

    pub fn rid(&self, r: Rid) -> String {
        format!("r{r}")
    }

    pub fn tenant(&self, r: Rid) -> String {
        format!("t{}", r % self.config.tenants.max(1))
    }

    fn fixes(&self) -> FixSet {
        self.config.fixes
    }

    fn new_req(&self, r: Rid) -> Req {
        Req::new(
            &self.rid(r),
            &self.tenant(r),
            vec![1; self.prompt_len[r as usize]],
            1,
            u64::from(r),
        )
    }

    /// The room poll both sides see (the engine's `TransferChannel::poll`
    /// plus the receiver's failure).
    pub fn poll(room: &Room) -> KvPoll {
        if room.receiver_aborted {
            KvPoll::Failed
        } else if room.final_sent && room.landed == room.posted {
            KvPoll::Success
        } else {
            KvPoll::Transferring
        }
    }

    fn inflight(state: &State, r: Rid) -> usize {
        state.writes.iter().filter(|w| w.req == r).count()
    }

    /// Whether a write of `r` is on the wire or may still be posted: prefill
    /// holds the request in a queue, or has yet to take it in and its entry
    /// door will admit it (the door's decision at arrival depends only on
    /// the request, so taking the arrival first changes nothing here).
    /// Decode's transfer timeout firing then means those writes are later
    /// than it: the late-write fault.
    fn writes_to_come(&self, state: &State, r: Rid) -> bool {
        let rs = &state.reqs[r as usize];
        Self::inflight(state, r) > 0
            || match rs.pstage {
                PStage::Bootstrap | PStage::Waiting | PStage::Inflight => true,
                PStage::Done => false,
                PStage::None => {
                    let mut req = self.new_req(r);
                    if let Some(m) = validate_input_length(req.input_len(), self.prefill_cap) {
                        req.set_finish_with_abort(&m, 400);
                    }
                    policy::entry_door(&req, self.fixes()) != Door::Retire
                }
            }
    }

    /// The peer ack `release_rule` asks for: decode's pages wait for
    /// prefill's drain ack; prefill's pages wait for decode's ack unless no
    /// write ever read from them.
    fn acked(room: &Room, side: Side) -> bool {
        match side {
            Side::Decode => room.drain_ack == Ack::Delivered,
            Side::Prefill => room.ack == Ack::Delivered || room.posted == 0,
        }
    }

    /// An enabled arrival that commutes with every other action and no
    /// other action can disable, if any — a persistent set of size one
    /// (Godefroid's stubborn sets; the model is acyclic, so every terminal
    /// state, hence every sticky violation, stays reachable):
    ///
    /// * decode taking in its dispatch only creates its own `Req`: other
    ///   actions of the request push to the back of `to_decode` (commutes
    ///   with the pop at the front) or need the request to be in a queue;
    /// * prefill taking in its dispatch creates its own `Req`; when the
    ///   entry door retires it, it also pushes the relayed abort to
    ///   `to_decode`, which commutes unless a client abort could push
    ///   there too.
    fn independent_arrival(&self, s: &State) -> Option<Action> {
        for (i, rs) in s.reqs.iter().enumerate() {
            let r = i as Rid;
            if rs.to_decode.first() == Some(&Msg::Dispatch) {
                return Some(Action::DecodeRecv(r));
            }
            if rs.to_prefill.first() == Some(&Msg::Dispatch) {
                let can_abort = s.aborts_left > 0 && !rs.client_aborted && rs.answers.is_empty();
                let mut req = self.new_req(r);
                if let Some(m) = validate_input_length(req.input_len(), self.prefill_cap) {
                    req.set_finish_with_abort(&m, 400);
                }
                if !can_abort || policy::entry_door(&req, self.fixes()) != Door::Retire {
                    return Some(Action::PrefillRecv(r));
                }
            }
        }
        None
    }

    /// Whether `state` has no enabled action.
    ///
    /// The liveness property asks this of every state, so the common cases
    /// answer without listing actions: a write in flight can always land, a
    /// queued router message can always be taken in (or is
    /// the arrival the reduction picks), an ack in flight can always be
    /// delivered, and a request in decode's transfer queue or running batch
    /// always has its poll, timeout or step. Anything else asks [`Model::actions`].
    pub fn is_terminal(&self, state: &State) -> bool {
        if !state.writes.is_empty()
            || state.reqs.iter().any(|r| {
                !r.to_prefill.is_empty()
                    || !r.to_decode.is_empty()
                    || r.room.ack == Ack::Sent
                    || r.room.drain_ack == Ack::Sent
                    || matches!(r.dstage, DStage::Transfer | DStage::Running)
            })
        {
            return false;
        }
        let mut actions = Vec::new();
        self.actions(state, &mut actions);
        actions.is_empty()
    }

    fn answer(&self, s: &mut State, r: Rid, status: u16) {
        let rs = &mut s.reqs[r as usize];
        rs.answers.push(status);
        if rs.answers.len() > 1 {
            add(s, Violation::AnsweredTwice { req: r });
        }
        if self.rejected[r as usize] && status == 200 {
            add(s, Violation::RejectedGot200 { req: r });
        }
    }

    /// Give pages back now or defer them (`policy::release_rule`).
    fn release(&self, s: &mut State, side: Side, r: Rid, pages: Vec<u8>) {
        if pages.is_empty() {
            return;
        }
        let acked = Self::acked(&s.reqs[r as usize].room, side);
        match policy::release_rule(Self::inflight(s, r), acked, self.fixes()) {
            Release::Now | Release::TimedOut => self.free(s, side, r, &pages),
            Release::Defer => {
                s.deferred.push(Deferred {
                    side,
                    req: r,
                    pages,
                });
                s.deferred.sort();
            }
        }
    }

    fn free(&self, s: &mut State, side: Side, r: Rid, pages: &[u8]) {
        let scrub = self.fixes().has(Fix::ScrubOnFree);
        for &p in pages {
            let (pool, free) = match side {
                Side::Prefill => (&mut s.prefill, &mut s.prefill_free),
                Side::Decode => (&mut s.decode, &mut s.decode_free),
            };
            let page = &mut pool[p as usize];
            let double = page.owner != Some(r);
            page.owner = None;
            if scrub {
                page.writer = None;
            }
            if !free.contains(&p) {
                free.push(p);
            }
            if double {
                add(
                    s,
                    Violation::DoubleFree {
                        side,
                        req: r,
                        page: p,
                    },
                );
            }
        }
    }

    fn alloc(free: &mut Vec<u8>, pool: &mut [Page], r: Rid, n: usize) -> Option<Vec<u8>> {
        if free.len() < n {
            return None;
        }
        let pages: Vec<u8> = (0..n).filter_map(|_| free.pop()).collect();
        for &p in &pages {
            pool[p as usize].owner = Some(r);
        }
        Some(pages)
    }

    /// Decode gives up on or finishes a request: answer, close the room, release.
    fn decode_finish(&self, s: &mut State, r: Rid, status: u16, receiver_failed: bool) {
        self.answer(s, r, status);
        let rs = &mut s.reqs[r as usize];
        rs.dstage = DStage::Done;
        if let Some(req) = rs.dreq.as_mut() {
            req.update_finish_state();
        }
        if receiver_failed {
            rs.room.receiver_aborted = true;
        }
        rs.room.closed = true;
        let table = std::mem::take(&mut rs.table);
        self.release(s, Side::Decode, r, table);
    }

    /// An ack leaves its sender. While a lost ack is still in the fault
    /// budget it travels (and may be lost); otherwise it is delivered at
    /// once — a late ack only keeps deferred pages allocated longer, which
    /// no property can observe except as a wait (model assumption).
    fn send(s: &mut State, r: Rid, side: Side) {
        let in_flight = if s.lost_acks_left > 0 {
            Ack::Sent
        } else {
            Ack::Delivered
        };
        let ack = ack_of(&mut s.reqs[r as usize].room, side);
        if *ack == Ack::None {
            *ack = in_flight;
        }
    }

    fn send_ack(s: &mut State, r: Rid) {
        Self::send(s, r, Side::Decode);
    }

    /// Prefill is done with the room: nothing more will be posted.
    fn send_drain_ack(s: &mut State, r: Rid) {
        Self::send(s, r, Side::Prefill);
    }

    fn decode_decision(&self, s: &mut State, r: Rid, decision: HandoffDecision) {
        match decision {
            HandoffDecision::Wait => {}
            HandoffDecision::Admit => {
                Self::send_ack(s, r);
                s.reqs[r as usize].dstage = DStage::Running;
            }
            HandoffDecision::Abort { status, .. } => {
                Self::send_ack(s, r);
                self.decode_finish(s, r, status, true);
            }
        }
    }

    /// The handoff decision decode's transfer queue would take now.
    pub fn handoff(&self, s: &State, r: Rid, timed_out: bool) -> Option<HandoffDecision> {
        let rs = &s.reqs[r as usize];
        let req = rs.dreq.as_deref()?;
        let poll = Self::poll(&rs.room);
        let checksum_ok =
            (self.fixes().has(Fix::KvChecksum) && poll == KvPoll::Success).then(|| {
                let me = Writer::Req(r, req.generation);
                rs.room.checksum.is_some_and(|(n, generation)| {
                    usize::from(n) == rs.table.len()
                        && generation == req.generation
                        && rs
                            .table
                            .iter()
                            .all(|&p| s.decode[p as usize].writer == Some(me))
                })
            });
        let waited = if timed_out { TIMEOUT_US } else { 0 };
        Some(policy::handoff_door(
            req,
            poll,
            waited,
            TIMEOUT_US,
            checksum_ok,
        ))
    }

    fn step(&self, s: &mut State, action: Action) -> Option<()> {
        match action {
            Action::ClientAbort(r) => {
                s.aborts_left -= 1;
                let rs = &mut s.reqs[r as usize];
                rs.client_aborted = true;
                rs.to_prefill.push(Msg::Abort(CLIENT_ABORT_STATUS));
                rs.to_decode.push(Msg::Abort(CLIENT_ABORT_STATUS));
            }
            Action::PrefillRecv(r) => {
                let msg = s.reqs[r as usize].to_prefill.remove(0);
                match msg {
                    Msg::Dispatch => self.prefill_arrive(s, r),
                    Msg::Abort(status) => {
                        let rs = &mut s.reqs[r as usize];
                        if matches!(
                            rs.pstage,
                            PStage::Bootstrap | PStage::Waiting | PStage::Inflight
                        ) {
                            if let Some(req) = rs.preq.as_mut() {
                                req.set_finish_with_abort("Aborted by AbortReq.", status);
                            }
                        }
                    }
                }
            }
            Action::PrefillHandshake(r) => {
                let rs = &mut s.reqs[r as usize];
                if rs.room.receiver_aborted {
                    rs.pstage = PStage::Done;
                    Self::send_drain_ack(s, r);
                } else {
                    rs.pstage = PStage::Waiting;
                }
            }
            Action::PrefillForward(r) => self.prefill_forward(s, r)?,
            Action::PrefillPoll(r) => {
                let rs = &mut s.reqs[r as usize];
                rs.pstage = PStage::Done;
                let pages = std::mem::take(&mut rs.ppages);
                self.release(s, Side::Prefill, r, pages);
            }
            Action::DecodeRecv(r) => {
                let msg = s.reqs[r as usize].to_decode.remove(0);
                let rs = &mut s.reqs[r as usize];
                match msg {
                    Msg::Dispatch => {
                        let mut req = self.new_req(r);
                        if let Some(m) = validate_input_length(req.input_len(), self.decode_cap) {
                            req.set_finish_with_abort(&m, 400);
                        }
                        rs.dreq = Some(ModelReq::new(req));
                        rs.dstage = DStage::Prealloc;
                    }
                    // `abort_request`: `kv_receiver.abort()` for queued requests;
                    // a running one gets `to_finish = FINISH_ABORT(...)`
                    // directly (its input already computed, nothing swapped),
                    // not `set_finish_with_abort`. The abort cancels nothing
                    // already on the wire.
                    Msg::Abort(status) => match rs.dstage {
                        DStage::Prealloc | DStage::Transfer => rs.room.receiver_aborted = true,
                        DStage::Running => {
                            if let Some(req) = rs.dreq.as_mut() {
                                req.to_finish = Some(FinishReason::Abort {
                                    message: "Aborted by AbortReq.".into(),
                                    status_code: status,
                                });
                            }
                        }
                        DStage::None | DStage::Done => {}
                    },
                }
            }
            Action::DecodePrealloc(r) => self.decode_prealloc(s, r)?,
            Action::DecodePoll(r) => {
                let d = self.handoff(s, r, false)?;
                if d == HandoffDecision::Wait {
                    return None;
                }
                self.decode_decision(s, r, d);
            }
            Action::DecodeTimeout(r) => {
                if self.writes_to_come(s, r) {
                    s.late_writes_left = s.late_writes_left.checked_sub(1)?;
                }
                let d = self.handoff(s, r, true)?;
                self.decode_decision(s, r, d);
            }
            Action::DecodeStep(r) => self.decode_step(s, r),
            Action::Land(w) => {
                let i = s.writes.iter().position(|x| *x == w)?;
                s.writes.remove(i);
                s.reqs[w.req as usize].room.landed += 1;
                let bytes = s.prefill[w.src as usize].writer;
                let page = &mut s.decode[w.dst as usize];
                page.writer = bytes;
                let owner = page.owner;
                if owner != Some(w.req) {
                    add(
                        s,
                        Violation::WriteAfterReassign {
                            req: w.req,
                            page: w.dst,
                            owner,
                        },
                    );
                }
            }
            Action::AckDelivered(side, r) => {
                *ack_of(&mut s.reqs[r as usize].room, side) = Ack::Delivered
            }
            Action::AckLost(side, r) => {
                s.lost_acks_left -= 1;
                *ack_of(&mut s.reqs[r as usize].room, side) = Ack::Lost;
            }
            Action::Release(side, r) => {
                let i = s
                    .deferred
                    .iter()
                    .position(|d| d.side == side && d.req == r)?;
                let d = s.deferred.remove(i);
                self.free(s, side, r, &d.pages);
            }
            Action::ReleaseTimeout(r) => {
                let i = s
                    .deferred
                    .iter()
                    .position(|d| d.side == Side::Decode && d.req == r)?;
                // A write still on the wire at the release timeout is later
                // than it (the late-write fault).
                if Self::inflight(s, r) > 0 {
                    s.late_writes_left = s.late_writes_left.checked_sub(1)?;
                }
                let d = s.deferred.remove(i);
                self.free(s, Side::Decode, r, &d.pages);
            }
        }
        Some(())
    }

    /// A request reaches prefill: validate, then the bootstrap-queue entry door.
    fn prefill_arrive(&self, s: &mut State, r: Rid) {
        let mut req = self.new_req(r);
        if let Some(m) = validate_input_length(req.input_len(), self.prefill_cap) {
            req.set_finish_with_abort(&m, 400);
        }
        match policy::entry_door(&req, self.fixes()) {
            Door::Retire => {
                // Prefill's answer goes to the router, which waits for
                // decode's and returns that ([`policy::router_answer`]):
                // nothing reaches decode.
                req.update_finish_state();
                let rs = &mut s.reqs[r as usize];
                rs.preq = Some(ModelReq::new(req));
                rs.pstage = PStage::Done;
                Self::send_drain_ack(s, r);
            }
            Door::Admit | Door::DropFinished => {
                req.metadata_buffer_index = Some(0);
                let rs = &mut s.reqs[r as usize];
                rs.preq = Some(ModelReq::new(req));
                rs.pstage = PStage::Bootstrap;
            }
        }
    }

    fn prefill_forward(&self, s: &mut State, r: Rid) -> Option<()> {
        let req = s.reqs[r as usize].preq.as_deref()?;
        match (self.prefill_door)(req) {
            Door::DropFinished | Door::Retire => {
                s.reqs[r as usize].pstage = PStage::Done;
                Self::send_drain_ack(s, r);
                return Some(());
            }
            Door::Admit => {}
        }
        let need = req.input_len().div_ceil(PAGE_SIZE);
        let generation = req.generation;
        let pages = Self::alloc(&mut s.prefill_free, &mut s.prefill, r, need)?;
        for &p in &pages {
            s.prefill[p as usize].writer = Some(Writer::Req(r, generation));
        }
        let fixes = self.fixes();
        let rs = &mut s.reqs[r as usize];
        rs.ppages = pages;
        let preq = rs.preq.as_deref_mut()?;
        match policy::prefill_result_action(preq, true, fixes) {
            ResultAction::SendChunk | ResultAction::SendLastChunk => {
                // Deferred release's drain protocol: decode closed the room
                // to the sender, which posts nothing more to it.
                let dst = if fixes.has(Fix::DeferredRelease) && rs.room.closed {
                    Vec::new()
                } else {
                    rs.room.dst.clone().unwrap_or_default()
                };
                let mut sent = 0u8;
                for (i, &src) in rs.ppages.iter().enumerate() {
                    let Some(&d) = dst.get(i) else { break };
                    rs.room.posted += 1;
                    sent += 1;
                    s.writes.push(Write {
                        req: r,
                        src,
                        dst: d,
                    });
                }
                // Canonical order: by request, each room's writes in post order.
                s.writes.sort_by_key(|w| w.req);
                rs.room.final_sent = true;
                if fixes.has(Fix::KvChecksum) {
                    rs.room.checksum = Some((sent, generation));
                }
                preq.update_finish_state();
                rs.pstage = PStage::Inflight;
                Self::send_drain_ack(s, r);
            }
            ResultAction::Retire => {
                rs.room.sender_aborted = true;
                preq.update_finish_state();
                rs.pstage = PStage::Done;
                let pages = std::mem::take(&mut rs.ppages);
                Self::send_drain_ack(s, r);
                self.release(s, Side::Prefill, r, pages);
            }
        }
        Some(())
    }

    fn decode_prealloc(&self, s: &mut State, r: Rid) -> Option<()> {
        let rs = &s.reqs[r as usize];
        let req = rs.dreq.as_deref()?;
        if policy::entry_door(req, self.fixes()) == Door::Retire {
            let status = req
                .effective_finish()
                .map_or(500, FinishReason::status_code);
            self.answer(s, r, status);
            let rs = &mut s.reqs[r as usize];
            rs.dstage = DStage::Done;
            rs.dreq.as_deref_mut()?.update_finish_state();
            return Some(());
        }
        if rs.room.receiver_aborted {
            let d = policy::handoff_door(req, KvPoll::Failed, 0, TIMEOUT_US, None);
            self.decode_decision(s, r, d);
            return Some(());
        }
        // `_pre_alloc`: pages for decode's own view of the prompt length.
        let need = req.input_len().div_ceil(PAGE_SIZE);
        let table = Self::alloc(&mut s.decode_free, &mut s.decode, r, need)?;
        let rs = &mut s.reqs[r as usize];
        rs.dreq.as_deref_mut()?.metadata_buffer_index = Some(0);
        rs.room.dst = Some(table.clone());
        rs.table = table;
        rs.dstage = DStage::Transfer;
        Some(())
    }

    fn decode_step(&self, s: &mut State, r: Rid) {
        let rs = &s.reqs[r as usize];
        let Some(req) = rs.dreq.as_deref() else {
            return;
        };
        let me = Writer::Req(r, req.generation);
        let seq_len = req.seq_len();
        let used = seq_len.div_ceil(PAGE_SIZE).min(rs.table.len());
        let read: Vec<u8> = rs.table[..used].to_vec();
        let foreign: Vec<(u8, Option<Writer>)> = read
            .iter()
            .map(|&p| (p, s.decode[p as usize].writer))
            .filter(|(_, w)| *w != Some(me))
            .collect();
        if self.fixes().has(Fix::PageTags) && !foreign.is_empty() {
            // Read-time tags refuse the read: fail closed.
            self.decode_finish(s, r, 500, false);
            return;
        }
        for (page, writer) in foreign {
            add(
                s,
                Violation::ForeignRead {
                    reader: r,
                    page,
                    writer,
                },
            );
        }
        // The new token's KV goes into the slot after the prompt.
        let rs = &mut s.reqs[r as usize];
        if let Some(&p) = rs.table.get(seq_len / PAGE_SIZE) {
            s.decode[p as usize].writer = Some(me);
        }
        let Some(req) = rs.dreq.as_deref_mut() else {
            return;
        };
        req.output_ids.push(1);
        if req.to_finish.is_none() && req.output_ids.len() as u32 >= req.max_new_tokens {
            req.to_finish = Some(FinishReason::Length {
                length: req.max_new_tokens,
            });
        }
        req.update_finish_state();
        let status = req
            .finished_reason
            .as_ref()
            .map_or(500, FinishReason::status_code);
        self.decode_finish(s, r, status, false);
    }
}

fn ack_of(room: &mut Room, side: Side) -> &mut Ack {
    match side {
        Side::Decode => &mut room.ack,
        Side::Prefill => &mut room.drain_ack,
    }
}

fn add(s: &mut State, v: Violation) {
    if let Err(i) = s.violations.binary_search(&v) {
        s.violations.insert(i, v);
    }
}

impl Model for PdModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let c = &self.config;
        let tenants = c.tenants.max(1);
        let room = Room::OPEN;
        // The router has sent every request to both workers; when each
        // worker takes it in is part of the interleaving.
        let req = ReqState {
            client_aborted: false,
            to_prefill: vec![Msg::Dispatch],
            to_decode: vec![Msg::Dispatch],
            pstage: PStage::None,
            preq: None,
            ppages: Vec::new(),
            dstage: DStage::None,
            dreq: None,
            table: Vec::new(),
            room,
            answers: Vec::new(),
        };
        vec![State {
            reqs: vec![req; c.requests as usize],
            decode: (0..c.decode_pages)
                .map(|p| Page {
                    owner: None,
                    writer: Some(Writer::Earlier(p % tenants)),
                })
                .collect(),
            // Reversed so page 0 is handed out first.
            decode_free: (0..c.decode_pages).rev().collect(),
            prefill: vec![
                Page {
                    owner: None,
                    writer: None
                };
                c.prefill_pages as usize
            ],
            prefill_free: (0..c.prefill_pages).rev().collect(),
            writes: Vec::new(),
            deferred: Vec::new(),
            aborts_left: c.aborts,
            late_writes_left: c.late_writes,
            lost_acks_left: c.lost_acks,
            violations: Vec::new(),
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        // Partial-order reduction: an arrival that touches only its own
        // request and commutes with every other action is taken alone.
        if self.reduce {
            if let Some(a) = self.independent_arrival(s) {
                actions.push(a);
                return;
            }
        }
        // An ack in flight is delivered or lost before anything else moves
        // (its timing only delays a deferred release; see `send`).
        for (i, rs) in s.reqs.iter().enumerate() {
            for side in [Side::Decode, Side::Prefill] {
                let ack = match side {
                    Side::Decode => rs.room.ack,
                    Side::Prefill => rs.room.drain_ack,
                };
                if ack == Ack::Sent {
                    actions.push(Action::AckDelivered(side, i as Rid));
                    if s.lost_acks_left > 0 {
                        actions.push(Action::AckLost(side, i as Rid));
                    }
                    return;
                }
            }
        }
        for (i, rs) in s.reqs.iter().enumerate() {
            let r = i as Rid;
            if s.aborts_left > 0 && !rs.client_aborted && rs.answers.is_empty() {
                actions.push(Action::ClientAbort(r));
            }
            if !rs.to_prefill.is_empty() {
                actions.push(Action::PrefillRecv(r));
            }
            match rs.pstage {
                PStage::Bootstrap if rs.room.dst.is_some() || rs.room.receiver_aborted => {
                    actions.push(Action::PrefillHandshake(r))
                }
                PStage::Waiting => {
                    let need = rs
                        .preq
                        .as_ref()
                        .map_or(0, |q| q.input_len().div_ceil(PAGE_SIZE));
                    if s.prefill_free.len() >= need {
                        actions.push(Action::PrefillForward(r));
                    }
                }
                PStage::Inflight if Self::poll(&rs.room) != KvPoll::Transferring => {
                    actions.push(Action::PrefillPoll(r))
                }
                _ => {}
            }
            if !rs.to_decode.is_empty() {
                actions.push(Action::DecodeRecv(r));
            }
            match rs.dstage {
                DStage::Prealloc => {
                    let need = rs
                        .dreq
                        .as_ref()
                        .map_or(0, |q| q.input_len().div_ceil(PAGE_SIZE));
                    let door = rs
                        .dreq
                        .as_ref()
                        .map(|q| policy::entry_door(q, self.fixes()));
                    if s.decode_free.len() >= need
                        || rs.room.receiver_aborted
                        || door == Some(Door::Retire)
                    {
                        actions.push(Action::DecodePrealloc(r));
                    }
                }
                DStage::Transfer => match Self::poll(&rs.room) {
                    KvPoll::Transferring
                        if !self.writes_to_come(s, r) || s.late_writes_left > 0 =>
                    {
                        actions.push(Action::DecodeTimeout(r))
                    }
                    KvPoll::Transferring => {}
                    KvPoll::Success | KvPoll::Failed => actions.push(Action::DecodePoll(r)),
                },
                DStage::Running => actions.push(Action::DecodeStep(r)),
                _ => {}
            }
        }
        // A room's writes complete in the order they were posted (one RDMA
        // queue pair per room); rooms interleave freely.
        for (i, &w) in s.writes.iter().enumerate() {
            if i > 0 && s.writes[i - 1].req == w.req {
                continue;
            }
            actions.push(Action::Land(w));
        }
        for d in &s.deferred {
            let acked = Self::acked(&s.reqs[d.req as usize].room, d.side);
            let inflight = Self::inflight(s, d.req);
            if policy::release_rule(inflight, acked, self.fixes()) == Release::Now {
                actions.push(Action::Release(d.side, d.req));
            } else if d.side == Side::Decode
                && policy::deferred_release_rule(
                    inflight,
                    acked,
                    policy::DEFERRED_RELEASE_TIMEOUT_US,
                    self.fixes(),
                ) == Release::TimedOut
                && (inflight == 0 || s.late_writes_left > 0)
            {
                actions.push(Action::ReleaseTimeout(d.req));
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        self.step(&mut s, action)?;
        Some(s)
    }

    fn format_action(&self, action: &Action) -> String {
        format!(
            "{} {} ({})",
            action.actor(),
            action.id(),
            self.rid(action.req())
        )
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(prop::ISOLATION, |_: &PdModel, s: &State| {
                !s.violations
                    .iter()
                    .any(|v| matches!(v, Violation::ForeignRead { .. }))
            }),
            Property::always(prop::NO_DOUBLE_FREE, |_: &PdModel, s: &State| {
                !s.violations
                    .iter()
                    .any(|v| matches!(v, Violation::DoubleFree { .. }))
            }),
            Property::always(prop::NO_WRITE_AFTER_REASSIGN, |_: &PdModel, s: &State| {
                !s.violations
                    .iter()
                    .any(|v| matches!(v, Violation::WriteAfterReassign { .. }))
            }),
            Property::always(prop::ANSWERED_AT_MOST_ONCE, |_: &PdModel, s: &State| {
                !s.violations
                    .iter()
                    .any(|v| matches!(v, Violation::AnsweredTwice { .. }))
            }),
            Property::always(prop::REJECTED_NEVER_200, |_: &PdModel, s: &State| {
                !s.violations
                    .iter()
                    .any(|v| matches!(v, Violation::RejectedGot200 { .. }))
            }),
            Property::sometimes(prop::COMPLETES_NORMALLY, |m: &PdModel, s: &State| {
                s.violations.is_empty()
                    && s.reqs
                        .iter()
                        .enumerate()
                        .any(|(i, r)| !m.rejected[i] && !r.client_aborted && r.answers == [200])
            }),
            // Bounded liveness: every transition consumes a finite budget
            // (queues, stages, writes, fault budgets), so every execution
            // ends in a state with no enabled action; there, every request
            // the router dispatched must have its answer. Checked as an
            // `always` over terminal states, which (unlike stateright's
            // `eventually`) stays exact where paths join.
            Property::always(prop::ADMITTED_ANSWERED, |m: &PdModel, s: &State| {
                let all_answered = s.reqs.iter().all(|r| !r.answers.is_empty());
                all_answered || !m.is_terminal(s)
            }),
        ]
    }
}
