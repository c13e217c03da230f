"""Probes: run one SGLang release's own PD scheduler code on given inputs.

Run with a release's venv interpreter:

    python upstream/probes/kvw_probe.py [--cases a,b] > observations.json

Each case builds real upstream objects (``Req``, ``PrefillBootstrapQueue``,
``DecodePreallocQueue``, the prefill result path of
``SchedulerDisaggregationPrefillMixin``) with the stubs of ``harness`` and
records what the real code did: the door's decision, the queue the request
ends in, what was created and released and how many times, the status and
message the client would get. A field the release's API cannot show is
``{"na": reason}``. The output is one JSON object on stdout; a case that
raises is recorded as ``{"error": ...}`` and makes the exit status 3.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import platform
import sys
import traceback
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import (  # noqa: E402
    Recorder,
    StubStreamer,
    StubTreeCache,
    na,
    namespace,
    recording_allocator,
    recording_receiver_class,
    recording_sender_class,
    status_of,
)

warnings.filterwarnings("ignore")
logging.disable(logging.CRITICAL)

# The incident's inputs at walkthrough scale: one shared context length, a
# prefill pool smaller than it and a decode pool larger, so the prompt is
# over prefill's cap and under decode's. The engine twin uses the same.
CONTEXT_LEN = 1024
PREFILL_POOL = 512
DECODE_POOL = 2048
OVERLONG = 600
VALID = 100
PAGE_SIZE = 64


def _imports():
    from sglang.srt.disaggregation import decode, prefill, utils
    from sglang.srt.managers import schedule_batch, scheduler, tp_worker
    from sglang.srt.managers import utils as mutils
    from sglang.srt.sampling.sampling_params import SamplingParams

    return namespace(
        prefill=prefill,
        decode=decode,
        utils=utils,
        sb=schedule_batch,
        scheduler=scheduler,
        tp_worker=tp_worker,
        mutils=mutils,
        SamplingParams=SamplingParams,
    )


M = None


def new_req(rid, n_tokens, room=7):
    req = M.sb.Req(
        rid,
        "",
        [1] * n_tokens,
        M.SamplingParams(max_new_tokens=8),
        bootstrap_host="127.0.0.1",
        bootstrap_port=8998,
        bootstrap_room=room,
    )
    return req


def input_cap(pool):
    """The release's cap: ``TpModelWorker.get_worker_info`` on a stub worker."""
    worker = namespace(
        model_config=namespace(context_len=CONTEXT_LEN),
        model_runner=namespace(
            effective_max_total_num_tokens=pool,
            effective_logical_max_total_num_tokens=pool,
            logical_max_total_num_tokens=pool,
            max_total_num_tokens=pool,
            token_to_kv_pool_allocator=namespace(page_size=PAGE_SIZE),
            req_to_token_pool=namespace(
                schedulable_token_capacity=lambda n: n, size=64, max_context_len=CONTEXT_LEN
            ),
            max_running_requests=64,
            forward_stream=None,
            token_to_kv_pool=namespace(size=pool),
        ),
        ps=namespace(attn_dcp_size=1),
        random_seed=0,
        device="cpu",
        dllm_algorithm=None,
    )
    saved = M.tp_worker.get_schedule
    M.tp_worker.get_schedule = lambda: namespace(max_prefill_tokens=pool, max_queued_requests=None)
    try:
        info = M.tp_worker.TpModelWorker.get_worker_info(worker)
    finally:
        M.tp_worker.get_schedule = saved
    return info[5]


def reject_if_overlong(req, cap):
    """The scheduler's intake check: ``validate_input_length`` then ``set_finish_with_abort``."""
    msg = M.mutils.validate_input_length(req, cap, False)
    if msg is not None:
        req.set_finish_with_abort(msg)
    return msg


class Scheduler:
    """The scheduler a queue calls back into, with the release's own methods."""

    def __init__(self, rec):
        self.rec = rec
        self.output_streamer = StubStreamer(rec)
        self.tree_cache = StubTreeCache(rec)
        self.enable_hisparse = False
        self.enable_overlap = False
        self.enable_hicache_storage = False
        self.chunked_req = None
        self.disagg_prefill_inflight_queue = []
        self.disagg_prefill_pending_chunk_rids = set()
        self.beam_coordinator = namespace(retire_group=lambda req: None)
        self.spec_algorithm = namespace(is_eagle=lambda: False, is_none=lambda: True)
        self.batch_result_processor = namespace(
            snapshot_auxiliary_output_starts=lambda b, r: None,
            move_logprobs_to_cpu=lambda **kw: None,
        )
        self.metrics_reporter = namespace(report_prefill_stats=lambda **kw: None, enable_metrics=False)
        self.ps = namespace(dp_rank=0, tp_rank=0, pp_rank=0, pp_size=1)
        self.token_to_kv_pool_allocator = namespace(page_size=PAGE_SIZE)
        self.attn_cp_cpu_group = None
        self.attn_tp_cpu_group = None
        self.retired = 0
        self.scheduler_stage_metrics = None
        self.processed_tokens_counter = 0

    def _release_aborted_request(self, req):
        self.rec.hit("release_aborted_request")

    def retire_unadmitted_request(self, req):
        self.retired += 1
        real = getattr(M.scheduler.Scheduler, "retire_unadmitted_request", None)
        real(self, req)

    def send_kv_chunk(self, req, last_chunk=False, end_idx=None):
        self.rec.hit("chunk_sent")
        if last_chunk:
            self.rec.hit("last_chunk_sent")

    def maybe_send_health_check_signal(self):
        pass

    def __getattr__(self, name):
        # The release's own prefill mixin methods, bound to this scheduler.
        mixin = M.prefill.SchedulerDisaggregationPrefillMixin
        if hasattr(mixin, name):
            return getattr(mixin, name).__get__(self)
        raise AttributeError(name)


def single_rank_poll(senders, *groups):
    """The TP/CP all-reduce of KV polls, for one rank: each sender's own poll."""
    return [s.poll() for s in senders]


# What the probes replace, named in every receipt.
STUBS = [
    "KV sender/receiver (get_kv_class): records construction, init, send, abort, clear; poll state set by the case",
    "TP/CP all-reduce of KV polls and of decode's hold flags: one rank's own values",
    "scheduler: output_streamer records what is streamed; beam_coordinator and _release_aborted_request no-ops; send_kv_chunk records calls",
    "radix tree and release_kv_cache: count calls and drop the request's KV row",
    "kv_manager: empty prefill_info_table (no network)",
    "TpModelWorker for get_worker_info: context length and pool size only; get_schedule() defaults",
    "config bags: get_spec (no speculative decoding), get_memory (radix cache on), get_exec (sampling-mask limit 64 tokens) where the release has them; parallel tp_rank=0",
    "streaming session: the release's own Session, marked in flight as create_req leaves it",
    "queues built with object.__new__ and only the attributes their methods read",
]

# The config bags the probed code reads, as a server with default flags
# would publish them: no speculative decoding, the radix cache on.
CONFIG = {
    "get_spec": lambda: namespace(speculative_algorithm=None),
    "get_memory": lambda: namespace(disable_radix_cache=False),
    "get_exec": lambda: namespace(features=namespace(sampling_mask_max_tokens=64)),
}


def fresh():
    """A recorder and the scheduler stub that reports into it."""
    rec = Recorder()
    return rec, Scheduler(rec)


@contextlib.contextmanager
def published_config():
    """Bind the default config bags wherever a loaded sglang module imported the getter."""
    from sglang.srt import runtime_context

    config = {name: stub for name, stub in CONFIG.items() if hasattr(runtime_context, name)}
    originals = {name: getattr(runtime_context, name) for name in config}
    saved = [(runtime_context, name) for name in config]
    for name, stub in config.items():
        setattr(runtime_context, name, stub)
    for mod in list(sys.modules.values()):
        if not getattr(mod, "__name__", "").startswith("sglang."):
            continue
        for name, stub in config.items():
            if mod is not runtime_context and getattr(mod, name, None) is originals[name]:
                saved.append((mod, name))
                setattr(mod, name, stub)
    try:
        yield
    finally:
        for mod, name in saved:
            setattr(mod, name, originals[name])


@contextlib.contextmanager
def patched(module, **attrs):
    """Replace module attributes for the block; one a release lacks is added, then removed."""
    missing = object()
    saved = {k: getattr(module, k, missing) for k in attrs}
    for k, v in attrs.items():
        setattr(module, k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is missing:
                delattr(module, k)
            else:
                setattr(module, k, v)


def prefill_queue(rec, sched, pool):
    q = object.__new__(M.prefill.PrefillBootstrapQueue)
    q.queue = []
    q.scheduler = sched
    q.max_total_num_tokens = pool
    q.max_input_len = pool  # 0.5.23 names the same cap max_input_len
    q.transfer_backend = M.utils.TransferBackend.MOONCAKE
    q.kv_manager = namespace(prefill_info_table={})
    q.tp_rank, q.pp_rank, q.pp_size, q.tp_size = 0, 0, 1, 1
    q.bootstrap_port = 8998
    q.scheduler_stage_metrics = None
    q.req_to_metadata_buffer_idx_allocator = recording_allocator(
        M.utils.ReqToMetadataIdxAllocator, 4, rec
    )
    sched.req_to_metadata_buffer_idx_allocator = q.req_to_metadata_buffer_idx_allocator
    return q


def decode_queue(rec, sched, pool):
    q = object.__new__(M.decode.DecodePreallocQueue)
    q.queue = []
    q.pending_reqs = []
    q.retracted_queue = []
    q.scheduler = sched
    q.max_total_num_tokens = pool
    q.transfer_backend = M.utils.TransferBackend.MOONCAKE
    q.kv_manager = namespace(prefill_info_table={})
    q.token_to_kv_pool = namespace()
    # No unified FULL/SWA byte budget: the pool-size check decides.
    q.token_to_kv_pool_allocator = namespace(
        page_size=PAGE_SIZE,
        prealloc_ceiling_fits=lambda full, swa: None,
        get_kvcache=lambda: q.token_to_kv_pool,
    )
    q.tp_rank, q.pp_rank, q.pp_size = 0, 0, 1
    q.num_reserved_decode_tokens = 512
    q.scheduler_stage_metrics = None
    q.req_to_metadata_buffer_idx_allocator = recording_allocator(
        M.utils.ReqToMetadataIdxAllocator, 4, rec
    )
    return q


def finish_fields(req, sched):
    """Status and message the client gets: what was streamed, else the pending reason."""
    streamed = [r for r in sched.output_streamer.streamed if r is not None]
    reason = streamed[-1] if streamed else (req.finished_reason or req.to_finish)
    code, msg = status_of(reason)
    return {
        "status": code,
        "message": msg,
        "finished": req.finished(),
        "to_finish_pending": req.to_finish is not None,
        "streamed": sched.output_streamer.rec.n("streamed"),
    }


def session_in_flight(*, streaming):
    """The release's own ``Session``, as ``create_req`` leaves it for the
    request it just made: a streaming session is marked in flight."""
    from sglang.srt.session.session_controller import Session

    session = Session(capacity_of_str_len=1 << 16, streaming=streaming)
    session._inflight = streaming
    return session


def door_prefill(
    req_len, *, metadata_index=None, retracted=False, backup=False, reject=True, session=None
):
    rec, sched = fresh()
    q = prefill_queue(rec, sched, PREFILL_POOL)
    req = new_req("r-prefill", req_len)
    cap = input_cap(PREFILL_POOL)
    msg = reject_if_overlong(req, cap) if reject else None
    if session is not None:
        req.session = session
    if metadata_index is not None:
        req.metadata_buffer_index = metadata_index
    if retracted:
        req.is_retracted = True
    if backup:
        req.kv.retraction_backup = namespace()
    sender = recording_sender_class(rec)
    with patched(M.prefill, get_kv_class=lambda backend, kind: sender):
        q.add(req, num_kv_heads=1)
    queued = req in q.queue
    waiting = False
    if queued:
        # The handshake completes: the release's own `pop_bootstrapped`
        # gives the request its metadata buffer and hands it to the waiting queue.
        sender.poll_state = M.utils.KVPoll.WaitingForInput
        with patched(M.prefill, poll_and_all_reduce_attn_cp_tp_group=single_rank_poll):
            waiting = req in q.pop_bootstrapped()
    out = {
        "rejected_at_intake": msg is not None,
        "door": "retire" if sched.retired else ("admit" if queued else "refuse"),
        "queue": "waiting" if waiting else ("bootstrap" if queued else "none"),
        "sender_created": rec.n("sender_created"),
        "bootstrap_room": rec.bootstrap_room is not None,
        "metadata_buffer": rec.n("metadata_alloc") > 0,
        "prompt_tokens_after_door": len(req.origin_input_ids),
    }
    if session is not None:
        out["session_attached"] = req.session is session
        out["session_in_flight"] = session._inflight
    out.update(finish_fields(req, sched))
    return out


def door_decode(
    req_len, *, retracted=False, rebootstrap=False, preempted=False, backup=False, reject=True
):
    """Decode's door. ``retracted``/``rebootstrap``: ``add`` is told so (the
    retract path); ``preempted``: the request itself carries ``is_retracted``
    and comes back through a plain ``add``."""
    rec, sched = fresh()
    q = decode_queue(rec, sched, PREFILL_POOL)
    req = new_req("r-decode", req_len)
    cap = input_cap(PREFILL_POOL)
    msg = reject_if_overlong(req, cap) if reject else None
    if preempted:
        req.is_retracted = True
    if backup:
        req.kv.retraction_backup = namespace()
    receiver = recording_receiver_class(rec)
    kwargs = {}
    if retracted:
        kwargs["is_retracted"] = True
    if rebootstrap:
        kwargs["is_rebootstrap"] = True
    with patched(M.decode, get_kv_class=lambda backend, kind: receiver):
        q.add(req, **kwargs)
    in_prealloc = any(d.req is req for d in q.queue)
    in_retracted = req in q.retracted_queue
    queue = "prealloc" if in_prealloc else ("retracted" if in_retracted else "none")
    out = {
        "rejected_at_intake": msg is not None,
        "door": "retire" if sched.retired else ("admit" if queue != "none" else "refuse"),
        "queue": queue,
        "receiver_created": rec.n("receiver_created"),
        "bootstrap_room": rec.bootstrap_room is not None,
        "prompt_tokens_after_door": len(req.origin_input_ids),
    }
    out.update(finish_fields(req, sched))
    return out


class NullScheduler(Scheduler):
    """A scheduler not disaggregated (``DisaggregationMode.NULL``) whose
    intake is the release's own ``Scheduler._add_request_to_queue``."""

    def __init__(self, rec):
        super().__init__(rec)
        self.disaggregation_mode = M.utils.DisaggregationMode.NULL
        self.waiting_queue = []
        self.enable_priority_scheduling = False
        self.abort_on_priority_when_disabled = False
        self.max_queued_requests = None
        self.enable_lmcache = False

    def __getattr__(self, name):
        real = getattr(M.scheduler.Scheduler, name, None)
        if callable(real):
            return real.__get__(self)
        raise AttributeError(name)


def case_null_mode():
    """A rejected prompt on a scheduler that is not disaggregated."""
    rec = Recorder()
    sched = NullScheduler(rec)
    req = new_req("r-null", OVERLONG)
    msg = reject_if_overlong(req, input_cap(PREFILL_POOL))
    sched._add_request_to_queue(req)
    out = {
        "rejected_at_intake": msg is not None,
        "queue": "waiting" if req in sched.waiting_queue else "none",
        "prompt_tokens_after_door": len(req.origin_input_ids),
    }
    out.update(finish_fields(req, sched))
    return out


def case_input_cap():
    cap = input_cap(PREFILL_POOL)
    at = new_req("r-at", cap)
    below = new_req("r-below", cap - 1)
    return {
        "input_cap": cap,
        "rejects_at_cap": M.mutils.validate_input_length(at, cap, False) is not None,
        "rejects_below_cap": M.mutils.validate_input_length(below, cap, False) is not None,
    }


def prefill_result(req, sched, *, last=True, mask_status=None):
    """One forward result for `req` through ``process_batch_result_disagg_prefill``.

    ``mask_status``: the sampling-mask status the forward reports for the
    request (a release without sampling-mask statuses never reads it)."""
    import torch

    batch = namespace(reqs=[req], spec_info=None, prefill_stats=None, dp_cooperation_info=None)
    logits_output = None
    if mask_status is not None:
        logits_output = namespace(
            sampling_mask_output=None,
            next_token_sampling_mask_status=[mask_status],
            next_token_logits=None,
        )
    result = namespace(
        logits_output=logits_output,
        next_token_ids=torch.tensor([5]),
        extend_input_len_per_req=None,
        extend_logprob_start_len_per_req=None,
        copy_done=None,
        auxiliary_host_output=None,
        routed_experts_output=None,
        indexer_topk_output=None,
        next_draft_input=None,
        can_run_cuda_graph=False,
    )
    if not last:
        req.inflight_middle_chunks = 1

    with patched(M.prefill, release_kv_cache=counting_release(sched)):
        sched.process_batch_result_disagg_prefill(batch, result)


def counting_release(sched):
    """``release_kv_cache`` stub: counts the call and drops the request's KV row."""

    def release_kv_cache(r, tree_cache, is_insert=True, **kwargs):
        sched.rec.hit("kv_release")
        if r.kv.holds_mamba:
            sched.rec.hit("mamba_release")
        r.kv.req_pool_idx = None
        r.kv.mamba_pool_idx = None

    return release_kv_cache


def bootstrapped_prefill_req(rec, sched, n_tokens):
    """A request past prefill's door and bootstrap: sender, metadata buffer, KV row."""
    q = prefill_queue(rec, sched, PREFILL_POOL)
    req = new_req("r-result", n_tokens)
    sender = recording_sender_class(rec)
    with patched(M.prefill, get_kv_class=lambda backend, kind: sender):
        q.add(req, num_kv_heads=1)
    req.metadata_buffer_index = q.req_to_metadata_buffer_idx_allocator.alloc()
    req.pending_bootstrap = False
    req.kv.req_pool_idx = 0
    return req


RESULT_FIELDS = (
    "queue",
    "chunk_sent",
    "sender_abort",
    "metadata_released",
    "kv_released",
    "status",
    "message",
    "finished",
    "to_finish_pending",
    "streamed",
)


def result_fields(req, sched):
    rec = sched.rec
    out = {
        "queue": "inflight" if req in sched.disagg_prefill_inflight_queue else "none",
        "chunk_sent": rec.n("chunk_sent"),
        "sender_abort": rec.n("sender_abort"),
        "metadata_released": rec.n("metadata_free"),
        "kv_released": rec.n("kv_release"),
    }
    out.update(finish_fields(req, sched))
    return out


def case_aborted_final_result():
    """An abort recorded while the request ran reaches its final prefill result."""
    rec, sched = fresh()
    req = bootstrapped_prefill_req(rec, sched, VALID)
    req.to_finish = M.sb.FINISH_ABORT("aborted by the client", 400)
    prefill_result(req, sched)
    out = result_fields(req, sched)
    # Then the inflight queue polls the transfer as done.
    if req.disagg_kv_sender is not None:
        type(req.disagg_kv_sender).poll_state = M.utils.KVPoll.Success
    with patched(
        M.prefill,
        poll_and_all_reduce_attn_cp_tp_group=single_rank_poll,
        release_kv_cache=counting_release(sched),
    ):
        done = sched.process_disagg_prefill_inflight_queue()
    code, msg = status_of(req.finished_reason)
    out["inflight_done"] = req in done
    out["final_status"] = code
    out["final_message"] = msg
    out["metadata_released_total"] = rec.n("metadata_free")
    return out


def case_delayed_result_after_retire():
    """A final result arriving for a request already retired (nothing held)."""
    rec, sched = fresh()
    req = bootstrapped_prefill_req(rec, sched, VALID)
    # Retired earlier (e.g. by a bootstrap failure): released and finished.
    M.prefill.maybe_release_metadata_buffer(req, sched.req_to_metadata_buffer_idx_allocator)
    req.kv.req_pool_idx = None
    M.utils.prepare_abort(req, "bootstrap failed", status_code=500)
    rec.counts.clear()
    prefill_result(req, sched)
    return result_fields(req, sched)


def case_aborted_middle_result():
    """An abort recorded while a chunked prefill runs reaches a middle chunk's result."""
    rec, sched = fresh()
    req = bootstrapped_prefill_req(rec, sched, VALID)
    req.to_finish = M.sb.FINISH_ABORT("aborted by the client", 400)
    # Its next chunk is already launched: the request is still chunking.
    sched.chunked_req = req
    prefill_result(req, sched, last=False)
    return result_fields(req, sched)


def case_mamba_before_kv():
    """An aborted request holding a Mamba slot and no KV row or metadata
    buffer (aborted while it waited for KV) reaches its result."""
    import torch

    rec, sched = fresh()
    req = bootstrapped_prefill_req(rec, sched, VALID)
    M.prefill.maybe_release_metadata_buffer(req, sched.req_to_metadata_buffer_idx_allocator)
    req.kv.req_pool_idx = None
    req.kv.mamba_pool_idx = torch.tensor([3])
    req.to_finish = M.sb.FINISH_ABORT("aborted by the client", 400)
    rec.counts.clear()
    prefill_result(req, sched)
    out = result_fields(req, sched)
    out["mamba_released"] = rec.n("mamba_release")
    return out


def has_sampling_mask_status():
    from sglang.srt.layers import logits_processor

    return hasattr(logits_processor, "SamplingMaskStatus")


def case_sampling_mask(status_name, transport_error):
    """The final result's sampling mask reports ``status_name``; with
    ``transport_error`` the sender's ``abort()`` raises."""
    if not has_sampling_mask_status():
        why = "this release has no sampling-mask status (SamplingMaskStatus first appears in 0.5.20)"
        return {f: na(why) for f in RESULT_FIELDS}
    from sglang.srt.layers.logits_processor import SamplingMaskStatus
    from sglang.srt.managers.scheduler_components.batch_result_processor import (
        SchedulerBatchResultProcessor,
    )

    rec, sched = fresh()
    sched.batch_result_processor.get_sampling_mask_finish_reason = lambda **kw: (
        SchedulerBatchResultProcessor.get_sampling_mask_finish_reason(None, **kw)
    )
    sched.batch_result_processor.materialize_sampling_mask_output = lambda *a, **kw: None
    req = bootstrapped_prefill_req(rec, sched, VALID)
    req.return_sampling_mask = True
    if transport_error:

        def failing_abort(self):
            rec.hit("sender_abort")
            raise RuntimeError("stub transport down")

        type(req.disagg_kv_sender).abort = failing_abort
    prefill_result(req, sched, mask_status=getattr(SamplingMaskStatus, status_name))
    return result_fields(req, sched)


def case_inflight_middle_chunk():
    """An aborted request's middle-chunk result arrives while its final
    chunk is already launched; then the final chunk's result arrives."""
    rec, sched = fresh()
    req = bootstrapped_prefill_req(rec, sched, VALID)
    req.to_finish = M.sb.FINISH_ABORT("aborted by the client", 400)
    # The final chunk is in flight: its extend range reaches the prompt's end
    # (`extend_range.end`, named `extend_end` from 0.5.23).
    req.extend_range = namespace(start=VALID // 2, end=VALID)
    req.extend_end = VALID
    prefill_result(req, sched, last=False)
    middle = {
        "after_middle_" + k: v
        for k, v in result_fields(req, sched).items()
        if k in ("chunk_sent", "kv_released", "metadata_released", "streamed")
    }
    prefill_result(req, sched)
    out = result_fields(req, sched)
    out.update(middle)
    return out


class RejectingGrammar:
    """A grammar that refuses every token (its matcher is the stub)."""

    finished = False

    def accept_token(self, token):
        raise ValueError(f"token {token} not allowed")

    def is_terminated(self):
        return False


def case_grammar_rejection():
    """The final chunk's first token is refused by the request's grammar."""
    rec, sched = fresh()
    req = bootstrapped_prefill_req(rec, sched, VALID)
    req.grammar = RejectingGrammar()
    prefill_result(req, sched)
    return result_fields(req, sched)


def case_sender_abort_fails():
    """An aborted final result whose ``sender.abort()`` raises (transport down)."""
    rec, sched = fresh()
    req = bootstrapped_prefill_req(rec, sched, VALID)
    req.to_finish = M.sb.FINISH_ABORT("aborted by the client", 400)

    def failing_abort(self):
        rec.hit("sender_abort")
        raise RuntimeError("stub transport down")

    type(req.disagg_kv_sender).abort = failing_abort
    escaped = False
    try:
        prefill_result(req, sched)
    except RuntimeError:
        escaped = True
    out = result_fields(req, sched)
    out["abort_error_escaped"] = escaped
    return out


def case_decode_timeout():
    """Decode's transfer queue when the transport's waiting timeout fires.

    The timeout lives in the KV transport (stubbed): when it fires the
    receiver polls ``KVPoll.Failed``. From there the release's own
    ``DecodeTransferQueue.pop_transferred`` decides the status and what
    it releases.
    """
    rec, sched = fresh()
    q = object.__new__(M.decode.DecodeTransferQueue)
    q.scheduler = sched
    sched.enable_decode_hicache = False
    q.enable_staging = False
    q.enable_deferred_kv_release = False
    q.tp_rank = 0
    q.gloo_group = None
    q.tree_cache = sched.tree_cache
    q.metadata_buffers = namespace(bootstrap_room=[0] * 4, clear_slot=lambda idx: None)
    q.req_to_metadata_buffer_idx_allocator = recording_allocator(
        M.utils.ReqToMetadataIdxAllocator, 4, rec
    )
    q.scheduler_stage_metrics = None
    req = new_req("r-decode", VALID)
    req.kv.req_pool_idx = 0
    receiver = recording_receiver_class(rec)(None, "127.0.0.1:8998", 7)
    receiver.abort_notified = False
    type(receiver).poll_state = M.utils.KVPoll.Failed
    decode_req = M.decode.DecodeRequest(req=req, kv_receiver=receiver)
    decode_req.metadata_buffer_index = q.req_to_metadata_buffer_idx_allocator.alloc()
    q.queue = [decode_req]
    rec.counts.clear()
    with patched(
        M.decode,
        poll_and_all_reduce=lambda pollers, group, **kw: [p.poll() for p in pollers],
        all_reduce_flags=lambda flags, group, op: flags,
        release_kv_cache=counting_release(sched),
    ):
        transferred = q.pop_transferred()
    out = {
        "queue": "transfer" if q.queue else "none",
        "transferred": req in transferred,
        "kv_released": rec.n("kv_release"),
        "metadata_released": rec.n("metadata_free"),
        "receiver_cleared": rec.n("receiver_clear"),
    }
    out.update(finish_fields(req, sched))
    return out


CASES = {
    "input-cap": case_input_cap,
    "test_rejected_request_is_retired_at_each_pd_door.prefill": lambda: door_prefill(OVERLONG),
    "test_rejected_request_is_retired_at_each_pd_door.decode": lambda: door_decode(OVERLONG),
    "test_valid_request_still_admitted.prefill": lambda: door_prefill(VALID),
    "test_valid_request_still_admitted.decode": lambda: door_decode(VALID),
    "test_reentering_prefill_request_is_not_retired.metadata_buffer_index": lambda: door_prefill(
        OVERLONG, metadata_index=0
    ),
    "test_reentering_prefill_request_is_not_retired.retraction_backup": lambda: door_prefill(
        OVERLONG, backup=True
    ),
    "test_preempted_reentry_is_not_retired.prefill": lambda: door_prefill(OVERLONG, retracted=True),
    "test_preempted_reentry_is_not_retired.decode": lambda: door_decode(OVERLONG, preempted=True),
    **{
        f"test_retracted_decode_request_is_not_retired.is_{flag}.{suffix}": (
            lambda flag=flag, backup=backup: door_decode(OVERLONG, backup=backup, **{flag: True})
        )
        for flag in ("retracted", "rebootstrap")
        for suffix, backup in (("backup", True), ("no_backup", False))
    },
    "test_null_mode_is_deliberately_untouched": case_null_mode,
    "test_retire_detaches_a_streaming_session": lambda: door_prefill(
        OVERLONG, session=session_in_flight(streaming=True)
    ),
    "test_retire_leaves_a_non_streaming_session_alone": lambda: door_prefill(
        OVERLONG, session=session_in_flight(streaming=False)
    ),
    "aborted-final-result": case_aborted_final_result,
    "aborted-middle-result": case_aborted_middle_result,
    "test_delayed_result_ignores_already_retired_request": case_delayed_result_after_retire,
    "decode-timeout": case_decode_timeout,
    "test_sender_abort_failure_does_not_skip_local_cleanup": case_sender_abort_fails,
    "test_aborted_middle_result_waits_for_inflight_chunk": case_inflight_middle_chunk,
    "test_aborted_result_releases_mamba_allocated_before_kv": case_mamba_before_kv,
    **{
        f"test_sampling_mask_abort_preserves_error_and_releases_once.{status.lower()}{suffix}": (
            lambda status=status, err=err: case_sampling_mask(status, err)
        )
        for status in ("OVERFLOW", "INVALID")
        for suffix, err in (("", False), (".transport_error", True))
    },
    "test_grammar_rejection_retires_prefill_before_transfer": case_grammar_rejection,
}


def main():
    global M
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    if args.list:
        print("\n".join(CASES))
        return 0
    names = [c for c in args.cases.split(",") if c] or list(CASES)
    unknown = [c for c in names if c not in CASES]
    if unknown:
        print(f"unknown case(s): {', '.join(unknown)}", file=sys.stderr)
        return 2
    with contextlib.redirect_stdout(io.StringIO()):
        M = _imports()
    import sglang
    import torch

    from sglang.srt.runtime_context import get_parallel

    out = {
        "release": sglang.__version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cases": {},
        "inputs": {
            "context_len": CONTEXT_LEN,
            "pool": PREFILL_POOL,
            "overlong": OVERLONG,
            "valid": VALID,
        },
        "stubs": STUBS,
    }
    failed = 0
    with get_parallel().override(tp_rank=0), published_config():
        for name in names:
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    out["cases"][name] = {"fields": CASES[name]()}
            except Exception as e:  # recorded, reported by the caller
                failed += 1
                tb = traceback.extract_tb(e.__traceback__)[-1]
                out["cases"][name] = {
                    "error": f"{type(e).__name__}: {e} ({os.path.basename(tb.filename)}:{tb.lineno})"
                }
    json.dump(out, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 3 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
