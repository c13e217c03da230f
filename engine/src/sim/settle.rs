//! Forgetting a request the cluster is done with: the live engine's memory
//! bound.
//!
//! A probe keeps every request to the end, for its receipt. A live cluster
//! runs for days: once a request is answered and neither worker, the
//! transfer channel nor a deferred release holds it any more, [`Sim::forget`]
//! drops its prompt, its answer's text, its bootstrap room and what prefill
//! remembered of it; only the fixed-size [`super::Entry`] record of its
//! index stays. [`Sim::retained`] counts what is still kept per request, so
//! a test can bound it.

use super::Sim;

/// What the cluster keeps that grows with the requests it has seen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Retained {
    /// Requests whose prompt is still held.
    pub prompts: usize,
    /// Prompt tokens held across them.
    pub prompt_tokens: usize,
    /// Bootstrap rooms of the transfer channel.
    pub rooms: usize,
    /// Requests in a queue of either worker.
    pub queued: usize,
    /// Requests prefill remembers (page history, retired set).
    pub remembered: usize,
    /// Deferred releases waiting for a drain.
    pub deferred: usize,
    /// Decode pages handed to a request.
    pub decode_pages_held: usize,
    /// Prefill pages handed to a request.
    pub prefill_pages_held: usize,
    /// Pages given back while already free, since the cluster started
    /// (not kept memory, but what a test of "released exactly once" reads).
    pub double_frees: u32,
}

impl Sim<'_> {
    /// Whether request `req` is answered and held by nothing any more.
    pub fn settled(&self, req: u32) -> bool {
        let Some(e) = self.entries.get(req as usize) else {
            return false;
        };
        e.response.is_some()
            && !self.prefill.holds(req)
            && !self.decode.holds(req)
            && self.channel.inflight(e.room) == 0
            && !self.deferred.iter().flatten().any(|d| d.req == req)
    }

    /// Drop what the cluster keeps of a settled request; false (and nothing
    /// dropped) while something still holds it.
    pub fn forget(&mut self, req: u32) -> bool {
        if !self.settled(req) {
            return false;
        }
        let e = &mut self.entries[req as usize];
        e.arrival.prompt = Vec::new();
        e.arrival.canary = String::new();
        e.decode_answer = None;
        if let Some(r) = e.response.as_mut() {
            r.text = String::new();
            r.output_ids = Vec::new();
        }
        let room = e.room;
        self.channel.forget(room);
        self.room_index.remove(&room);
        self.prefill.forget(req);
        self.prefill_cached.remove(&req);
        true
    }

    /// What is kept now that grows with the requests seen.
    pub fn retained(&self) -> Retained {
        let held = self.entries.iter().filter(|e| !e.arrival.prompt.is_empty());
        Retained {
            prompts: held.clone().count(),
            prompt_tokens: held.map(|e| e.arrival.prompt.len()).sum(),
            rooms: self.channel.rooms(),
            queued: self.prefill.queued() + self.decode.queued(),
            remembered: self.prefill.remembered(),
            deferred: self.deferred.iter().map(Vec::len).sum(),
            decode_pages_held: self.decode_owner.iter().flatten().count(),
            prefill_pages_held: self.prefill_owner.iter().flatten().count(),
            double_frees: self.counters.double_frees,
        }
    }
}
