//! The KV transfer channel between prefill and decode.
//!
//! Modelled on an RDMA engine (Mooncake/NIXL style): decode's receiver
//! registers the destination pages of a bootstrap room (`init`), prefill's
//! sender posts page writes that land asynchronously, the final chunk carries
//! the completion flag (and, with `kv-checksum`, the checksum), and both
//! sides *poll* for the state. Nothing here checks that the pages written
//! cover the pages decode reserved — that is exactly the gap of the incident.
//!
//! Faults can be injected per room: extra delay, a dropped write, a write
//! that lands late (after an abort), a lost drain ack.

use std::collections::BTreeMap;

use crate::policy::KvPoll;
use crate::pool::WriterId;

/// Injected transfer fault: the receipt's vocabulary is the engine's, so a
/// randomized case is signed as it ran.
pub use kvw_evidence::scenario::FuzzFault as Fault;

/// A posted page write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageWrite {
    pub room: u64,
    pub src_page: u32,
    pub dst_page: u32,
    pub land_us: u64,
    pub writer: WriterId,
    /// Decode peer the write goes to.
    pub peer: u32,
}

/// State of one bootstrap room.
#[derive(Debug, Clone, Default)]
pub struct Room {
    /// Decode pages registered by `receiver.init`, in page-table order.
    pub dst_pages: Option<Vec<u32>>,
    /// Writes posted so far.
    pub posted: usize,
    /// Writes landed so far.
    pub landed: usize,
    /// The final chunk was posted.
    pub final_sent: bool,
    /// Checksum sent with the final chunk.
    pub checksum: Option<u32>,
    /// Prefill called `sender.abort()`.
    pub sender_aborted: bool,
    /// Decode acknowledged the drain of this room.
    pub acked: bool,
    pub faults: Vec<Fault>,
    /// Decode peers that acknowledged their drain.
    pub acked_peers: Vec<u32>,
    /// Decode peers whose ack target prefill dropped while their writes were
    /// still in flight (`CommonKVSender.clear()` without PR #40645): no ack
    /// will ever come for them.
    pub dropped_peers: Vec<u32>,
    /// Decode is done with the room (handoff accepted or aborted).
    pub cleared: bool,
    /// Decode closed the room to the sender: later chunks are not posted
    /// and an incomplete transfer polls `Failed` (the drain protocol of
    /// deferred release; without it the sender keeps writing into pages
    /// decode already gave back).
    pub closed: bool,
}

impl Room {
    /// Decode peers of the room (1 without fan-out).
    pub fn peers(&self) -> u32 {
        self.faults
            .iter()
            .find_map(|f| match f {
                Fault::FanOut { peers } => Some((*peers).max(1)),
                _ => None,
            })
            .unwrap_or(1)
    }
}

/// How decode peers acknowledge a drained room (deferred release's ack
/// rules, SGLang #38961 and the PRs that close its gaps).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckRules {
    /// Prefill keeps a peer's ack target until that peer's writes landed
    /// and acks then (PR #40645). Without it, prefill's
    /// `CommonKVSender.clear()` pops the target while the writes are still
    /// in flight (SGLang #38961, first gap): that peer is never acked, and
    /// decode gives its pages back at the release timeout.
    pub waits_for_writes: bool,
    /// Every peer acks (PR #41402); otherwise one ack stands for the room.
    pub every_peer: bool,
}

impl AckRules {
    pub const SHIPPED: AckRules = AckRules {
        waits_for_writes: true,
        every_peer: true,
    };
}

/// One `send_kv_chunk` call: prefill pages `src` go to the destination
/// pages at page-table indices `first..first + src.len()`.
#[derive(Debug, Clone, Copy)]
pub struct ChunkSend<'a> {
    pub room: u64,
    pub first: usize,
    pub src: &'a [u32],
    /// Virtual time the chunk is posted.
    pub at: u64,
    /// Final chunk: carries the completion flag.
    pub last: bool,
    /// `kv-checksum`: Adler-32 sent with the final chunk.
    pub checksum: Option<u32>,
    pub writer: WriterId,
}

/// All rooms and all writes in flight.
#[derive(Debug, Clone, Default)]
pub struct TransferChannel {
    rooms: BTreeMap<u64, Room>,
    pending: Vec<PageWrite>,
    /// Base latency of a page write.
    pub write_latency_us: u64,
    /// Extra latency per page within one chunk.
    pub per_page_us: u64,
}

impl TransferChannel {
    pub fn new(write_latency_us: u64, per_page_us: u64) -> Self {
        TransferChannel {
            write_latency_us,
            per_page_us,
            ..Default::default()
        }
    }

    /// Create the room (prefill's bootstrap registration).
    pub fn open(&mut self, room: u64) {
        self.rooms.entry(room).or_default();
    }

    pub fn inject(&mut self, room: u64, fault: Fault) {
        self.rooms.entry(room).or_default().faults.push(fault);
    }

    pub fn room(&self, room: u64) -> Option<&Room> {
        self.rooms.get(&room)
    }

    /// Decode's `receiver.init(kv_indices, ...)`.
    pub fn receiver_init(&mut self, room: u64, dst_pages: Vec<u32>) {
        self.rooms.entry(room).or_default().dst_pages = Some(dst_pages);
    }

    /// Prefill's bootstrap poll: ready once decode registered its pages.
    pub fn handshake_ready(&self, room: u64) -> bool {
        self.rooms.get(&room).is_some_and(|r| r.dst_pages.is_some())
    }

    /// Post the page writes of one chunk. Page-table indices beyond the
    /// registered destination table are not written (the sender only knows
    /// its own pages). Returns how many writes were posted.
    pub fn send_chunk(&mut self, c: ChunkSend<'_>) -> usize {
        let ChunkSend {
            room,
            first,
            src,
            at: now,
            last,
            checksum,
            writer,
        } = c;
        let base = self.write_latency_us;
        let per = self.per_page_us;
        let Some(r) = self.rooms.get_mut(&room) else {
            return 0;
        };
        let Some(dst) = r.dst_pages.clone() else {
            return 0;
        };
        if r.closed {
            return 0;
        }
        let mut sent = 0;
        let peers = r.peers();
        for (i, &s) in src.iter().enumerate() {
            let Some(&d) = dst.get(first + i) else { break };
            let peer = ((first + i) as u32) % peers;
            let nth = r.posted;
            r.posted += 1;
            sent += 1;
            let mut land = now + base + per * i as u64;
            let mut dropped = false;
            for f in &r.faults {
                match *f {
                    Fault::Delay { us } => land += us,
                    Fault::DropWrite { nth: n } if n as usize == nth => dropped = true,
                    Fault::LateWrite { nth: n, us } if n as usize == nth => land += us,
                    _ => {}
                }
            }
            if !dropped {
                self.pending.push(PageWrite {
                    room,
                    src_page: s,
                    dst_page: d,
                    land_us: land,
                    writer,
                    peer,
                });
            }
        }
        if last {
            r.final_sent = true;
            r.checksum = checksum;
        }
        sent
    }

    /// Decode's view of a chunk the prefill process posted
    /// ([`crate::sim::remote`]): `pages` more writes are on their way.
    pub fn remote_posted(&mut self, room: u64, pages: usize, last: bool, checksum: Option<u32>) {
        let r = self.rooms.entry(room).or_default();
        r.posted += pages;
        if last {
            r.final_sent = true;
            r.checksum = checksum;
        }
    }

    /// Decode's view of one write from the prefill process that landed.
    pub fn remote_landed(&mut self, room: u64) {
        if let Some(r) = self.rooms.get_mut(&room) {
            r.landed += 1;
        }
    }

    /// Prefill's best-effort `sender.abort()`. In the modelled backends the
    /// decode peer is not told: its receiver keeps polling until its own
    /// timeout (upstream measured a 300 s decode timeout before PR #38935).
    pub fn sender_abort(&mut self, room: u64) {
        if let Some(r) = self.rooms.get_mut(&room) {
            r.sender_aborted = true;
        }
    }

    /// Decode acknowledges that it drained the room (upstream's rules).
    pub fn ack(&mut self, room: u64) {
        self.ack_with(room, AckRules::SHIPPED);
    }

    /// Decode is done with `room`: each peer whose writes drained acks now;
    /// a peer with writes in flight acks once they land, or, when
    /// `waits_for_writes` is off, loses its ack target for good (only the
    /// first peer counts when `every_peer` is off). Returns the peers that
    /// acked.
    pub fn ack_with(&mut self, room: u64, rules: AckRules) -> Vec<u32> {
        let busy: Vec<u32> = self
            .pending
            .iter()
            .filter(|w| w.room == room)
            .map(|w| w.peer)
            .collect();
        let Some(r) = self.rooms.get_mut(&room) else {
            return Vec::new();
        };
        r.cleared = true;
        if r.faults.contains(&Fault::LostAck) {
            return Vec::new();
        }
        let peers = if rules.every_peer { r.peers() } else { 1 };
        let mut now = Vec::new();
        for p in 0..peers {
            if r.acked_peers.contains(&p) || r.dropped_peers.contains(&p) {
                continue;
            }
            if busy.contains(&p) {
                if !rules.waits_for_writes {
                    r.dropped_peers.push(p);
                }
                continue;
            }
            r.acked_peers.push(p);
            now.push(p);
        }
        r.acked = r.acked_peers.len() as u32 >= peers;
        now
    }

    /// Rooms decode already cleared whose outstanding writes have now landed:
    /// their remaining peers ack (the third gap of #38961 is that they never
    /// did). Returns `(room, peer)` of each ack.
    pub fn ack_cleared(&mut self, rules: AckRules) -> Vec<(u64, u32)> {
        let rooms: Vec<u64> = self
            .rooms
            .iter()
            .filter(|(_, r)| r.cleared && !r.acked)
            .map(|(id, _)| *id)
            .collect();
        let mut out = Vec::new();
        for room in rooms {
            for peer in self.ack_with(room, rules) {
                out.push((room, peer));
            }
        }
        out
    }

    /// Decode closes `room` to its sender.
    pub fn close(&mut self, room: u64) {
        if let Some(r) = self.rooms.get_mut(&room) {
            r.closed = true;
        }
    }

    /// Writes of `room` still in flight.
    /// Drop a room nothing will use again (the live engine's cleanup).
    pub fn forget(&mut self, room: u64) {
        self.rooms.remove(&room);
    }

    /// Rooms known.
    pub fn rooms(&self) -> usize {
        self.rooms.len()
    }

    pub fn inflight(&self, room: u64) -> usize {
        self.pending.iter().filter(|w| w.room == room).count()
    }

    /// Earliest landing time of a pending write.
    pub fn next_landing(&self) -> Option<u64> {
        self.pending.iter().map(|w| w.land_us).min()
    }

    /// Remove and return the writes that have landed by `now`, in landing order.
    pub fn take_landed(&mut self, now: u64) -> Vec<PageWrite> {
        let (mut due, rest): (Vec<_>, Vec<_>) =
            self.pending.drain(..).partition(|w| w.land_us <= now);
        self.pending = rest;
        due.sort_by_key(|w| (w.land_us, w.room, w.dst_page));
        for w in &due {
            if let Some(r) = self.rooms.get_mut(&w.room) {
                r.landed += 1;
            }
        }
        due
    }

    /// Receiver/sender poll: success once the final chunk was posted and
    /// every posted write landed. Transfer-complete says nothing about how
    /// many of the registered pages were written.
    pub fn poll(&self, room: u64) -> KvPoll {
        match self.rooms.get(&room) {
            Some(r) if r.final_sent && r.landed == r.posted => KvPoll::Success,
            Some(r) if r.closed => KvPoll::Failed,
            Some(_) | None => KvPoll::Transferring,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(room: u64, src: &[u32]) -> ChunkSend<'_> {
        ChunkSend {
            room,
            first: 0,
            src,
            at: 0,
            last: true,
            checksum: None,
            writer: WriterId {
                req: 0,
                generation: 0,
            },
        }
    }

    #[test]
    fn completes_after_final_chunk_even_if_short() {
        let mut c = TransferChannel::new(100, 10);
        c.open(1);
        assert!(!c.handshake_ready(1));
        c.receiver_init(1, vec![10, 11, 12, 13]);
        assert!(c.handshake_ready(1));
        assert_eq!(c.send_chunk(chunk(1, &[3])), 1);
        assert_eq!(c.poll(1), KvPoll::Transferring);
        assert!(c.take_landed(99).is_empty());
        let landed = c.take_landed(100);
        assert_eq!(landed.len(), 1);
        assert_eq!(landed[0].dst_page, 10);
        assert_eq!(
            c.poll(1),
            KvPoll::Success,
            "1 of 4 pages written, still complete"
        );
    }

    #[test]
    fn dropped_write_never_completes_and_late_write_lands_late() {
        let mut c = TransferChannel::new(100, 0);
        c.receiver_init(1, vec![1, 2]);
        c.inject(1, Fault::DropWrite { nth: 1 });
        c.send_chunk(chunk(1, &[5, 6]));
        c.take_landed(1_000);
        assert_eq!(c.poll(1), KvPoll::Transferring);

        c.receiver_init(2, vec![7]);
        c.inject(2, Fault::LateWrite { nth: 0, us: 5_000 });
        c.send_chunk(chunk(2, &[8]));
        assert_eq!(c.next_landing(), Some(5_100));
        assert_eq!(c.inflight(2), 1);
    }

    #[test]
    fn sender_abort_is_best_effort_and_never_reaches_decode() {
        let mut c = TransferChannel::new(1, 0);
        c.receiver_init(1, vec![4, 5]);
        c.sender_abort(1);
        assert!(c.room(1).unwrap().sender_aborted);
        assert_eq!(c.poll(1), KvPoll::Transferring, "decode keeps waiting");
    }

    #[test]
    fn lost_ack_is_never_recorded() {
        let mut c = TransferChannel::new(1, 0);
        c.open(1);
        c.inject(1, Fault::LostAck);
        c.ack(1);
        assert!(!c.room(1).unwrap().acked);
        c.open(2);
        c.ack(2);
        assert!(c.room(2).unwrap().acked);
    }
}
