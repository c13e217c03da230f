"""Stubs and recorders the probes build real SGLang objects with.

The probes drive the installed release's own classes and functions (``Req``,
``PrefillBootstrapQueue``, ``DecodePreallocQueue``, the prefill result path).
What those objects talk to -- the KV transport, the tensor-parallel group,
the output streamer, the radix tree -- is replaced here by the smallest
object that records what the real code asked of it. Every stub a case uses
is named in its observation, so a receipt says what was not real.
"""

from __future__ import annotations

import contextlib
import types


class Recorder:
    """Counts of what the real code did to the stubs of one case."""

    def __init__(self):
        self.counts = {}
        self.bootstrap_room = None

    def hit(self, what):
        self.counts[what] = self.counts.get(what, 0) + 1

    def n(self, what):
        return self.counts.get(what, 0)


def recording_sender_class(rec):
    """A KV sender that records construction, init, send, abort and clear."""

    class StubKVSender:
        poll_state = None

        def __init__(self, mgr, bootstrap_addr, bootstrap_room, **kwargs):
            rec.hit("sender_created")
            rec.bootstrap_room = bootstrap_room
            self.kv_mgr = mgr

        def init(self, num_pages, metadata_buffer_index):
            rec.hit("sender_init")

        def pop_decode_prefix_len(self):
            return 0

        def poll(self):
            return StubKVSender.poll_state

        def send(self, *args, **kwargs):
            rec.hit("chunk_sent")

        def abort(self):
            rec.hit("sender_abort")

        def clear(self):
            rec.hit("sender_clear")

        def failure_exception(self):
            raise RuntimeError("stub transport failure")

        def get_transfer_metric(self):
            # No bytes measured: the release skips its transfer metrics.
            return types.SimpleNamespace(transfer_total_bytes=None, transfer_latency_s=None)

    return StubKVSender


def recording_receiver_class(rec):
    """A KV receiver that records construction and init."""

    class StubKVReceiver:
        poll_state = None

        def __init__(self, mgr, bootstrap_addr, bootstrap_room, **kwargs):
            rec.hit("receiver_created")
            rec.bootstrap_room = bootstrap_room

        def init(self, *args, **kwargs):
            rec.hit("receiver_init")

        def poll(self):
            return StubKVReceiver.poll_state

        def abort(self):
            rec.hit("receiver_abort")

        def clear(self):
            rec.hit("receiver_clear")

        def failure_exception(self):
            raise RuntimeError("stub transport failure")

    return StubKVReceiver


def recording_allocator(cls, size, rec):
    """The release's own ``ReqToMetadataIdxAllocator``, counting allocs and frees."""

    class CountingAllocator(cls):
        def alloc(self):
            idx = super().alloc()
            if idx is not None:
                rec.hit("metadata_alloc")
            return idx

        def free(self, free_index):
            rec.hit("metadata_free")
            return super().free(free_index)

    return CountingAllocator(size)


class StubStreamer:
    """Output streamer: records what reached the client and with which status."""

    def __init__(self, rec):
        self.rec = rec
        self.streamed = []

    def stream_output(self, reqs, return_logprob=False, *args, **kwargs):
        for req in reqs:
            self.rec.hit("streamed")
            reason = req.finished_reason
            self.streamed.append(reason)


class StubTreeCache:
    """Radix tree: records KV releases and unfinished-request caching."""

    def __init__(self, rec):
        self.rec = rec

    def cache_finished_req(self, req, *args, **kwargs):
        self.rec.hit("kv_release")
        if hasattr(req, "kv"):
            with contextlib.suppress(Exception):
                req.kv.holds_kv = False

    def cache_unfinished_req(self, req, *args, **kwargs):
        self.rec.hit("kv_cache_unfinished")

    def supports_mamba(self):
        return False

    def is_chunk_cache(self):
        return True

    def __getattr__(self, name):
        # Any other tree call is a no-op that is still counted.
        def call(*args, **kwargs):
            self.rec.hit("tree_" + name)

        return call


def namespace(**kw):
    return types.SimpleNamespace(**kw)


def status_of(reason):
    """(status code, message) of a finish reason, as the client would get it."""
    if reason is None:
        return None, None
    code = getattr(reason, "status_code", None)
    if code is None and type(reason).__name__ == "FINISH_LENGTH":
        code = 200
    msg = getattr(reason, "message", None)
    if msg is None and hasattr(reason, "to_json"):
        msg = reason.to_json().get("message")
    return (int(code) if code is not None else None), msg


def na(reason):
    """A field the release's API cannot show."""
    return {"na": reason}
