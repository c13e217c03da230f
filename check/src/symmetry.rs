//! State-space reductions applied through stateright's `symmetry_fn`: two
//! states that behave the same are stored under one fingerprint.
//!
//! Stateright's depth-first checker calls [`representative`] on every
//! state it generates, looks up the representative's fingerprint, and
//! continues (when the fingerprint is new) from the state itself. That is
//! sound for any map `rep` with `rep(s) ~ s`, where `~` is a bisimulation
//! that the properties cannot tell apart: from `s` and `rep(s)` the same
//! actions are enabled, their successors are again related, and every
//! property has the same value on both. Two such relations are used, one
//! after the other.
//!
//! **Retired requests** ([`retire`]). A request whose prefill and decode
//! stages are both `Done`, with no router message queued, no page write in
//! flight, no deferred release, no ack in flight and no page held in its
//! prefill list or decode table, has no enabled action for the rest of the
//! run (`ClientAbort` needs an empty answer list, and every way into
//! decode's `Done` answers). No other request's transition reads its
//! `Req`s or its room: the channel reads a room only through that room's
//! writes, deferred releases and acks, all of which are gone. The
//! properties read of it only its answers, whether the client aborted it
//! and, through the shared violation list, what already broke. Its `Req`s
//! are therefore dropped and its room reset to one closed room; its
//! stages, answers and abort flag stay, and so does every page owner,
//! page writer and violation naming it. States that reached the same
//! point through different finish reasons, statuses on the room,
//! checksums or ack histories become one.
//!
//! **Request symmetry** ([`permute`]). Requests `r1..` have the same
//! prompt, and no transition or property reads a request's index or tenant
//! (isolation is per request; tenants only label pages for people).
//! Swapping two of them — in their own state, in page owners and writers,
//! in writes in flight, deferred releases and violations — gives a state
//! whose executions are the swapped executions. The sort by local state
//! only makes classes collide often; any permutation would be sound.
//! Request `r0` (the rejected one, with the longer prompt) is never moved.
//! Two choices of the model do follow index order — the arrival the
//! partial-order reduction takes first and the ack resolved first — but
//! both keep every terminal state of the unreduced graph reachable
//! ([`crate::handoff_model::PdModel`] explains why), the model is acyclic, and every
//! `always` property is decided by sticky facts of the terminal states that
//! extend a path (violations are never removed, answers never taken back),
//! so the verdicts agree for every member of a class. The `sometimes`
//! property is only ever witnessed on a state the search really reached,
//! so a reduction could at worst hide a witness (a false alarm), never
//! invent one.

use std::hash::{Hash, Hasher};

use crate::handoff_model::{Ack, DStage, PStage, Page, Rid, Room, State, Violation, Write, Writer};

fn local_key(r: &crate::handoff_model::ReqState) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    r.hash(&mut h);
    h.finish()
}

/// The representative of `s`: retired requests collapsed, then requests
/// `1..` in a canonical order.
pub fn representative(s: &State) -> State {
    let mut s = s.clone();
    retire(&mut s);
    permute(&s).unwrap_or(s)
}

/// Whether request `r` can never act again and nothing in flight names it.
pub fn is_retired(s: &State, r: Rid) -> bool {
    let rs = &s.reqs[r as usize];
    rs.pstage == PStage::Done
        && rs.dstage == DStage::Done
        && rs.to_prefill.is_empty()
        && rs.to_decode.is_empty()
        && rs.ppages.is_empty()
        && rs.table.is_empty()
        && rs.room.ack != Ack::Sent
        && rs.room.drain_ack != Ack::Sent
        && !s.writes.iter().any(|w| w.req == r)
        && !s.deferred.iter().any(|d| d.req == r)
}

/// Collapse every retired request to its canonical form (see the module
/// doc comment for why no transition or property can tell).
pub fn retire(s: &mut State) {
    for r in 0..s.reqs.len() {
        if is_retired(s, r as Rid) {
            let rs = &mut s.reqs[r];
            rs.preq = None;
            rs.dreq = None;
            rs.room = Room {
                closed: true,
                ..Room::OPEN
            };
        }
    }
}

/// `s` with requests `1..` sorted by their local state and every reference
/// renamed, or `None` when that order is already the identity.
fn permute(s: &State) -> Option<State> {
    let n = s.reqs.len();
    if n <= 2 {
        return None;
    }
    let mut order: Vec<usize> = (1..n).collect();
    let keys: Vec<u64> = s.reqs.iter().map(local_key).collect();
    order.sort_by_key(|&i| keys[i]);
    // new index of each old index
    let mut rename = vec![0 as Rid; n];
    for (new, &old) in order.iter().enumerate() {
        rename[old] = (new + 1) as Rid;
    }
    if rename
        .iter()
        .enumerate()
        .skip(1)
        .all(|(i, &r)| i == r as usize)
    {
        return None;
    }
    let map = |r: Rid| rename[r as usize];
    let map_writer = |w: Option<Writer>| match w {
        Some(Writer::Req(r, g)) => Some(Writer::Req(map(r), g)),
        other => other,
    };
    let map_page = |p: &Page| Page {
        owner: p.owner.map(map),
        writer: map_writer(p.writer),
    };
    let mut reqs = Vec::with_capacity(n);
    reqs.push(s.reqs[0].clone());
    for &old in &order {
        reqs.push(s.reqs[old].clone());
    }
    let mut writes: Vec<Write> = s
        .writes
        .iter()
        .map(|w| Write {
            req: map(w.req),
            ..*w
        })
        .collect();
    writes.sort_by_key(|w| w.req);
    let mut deferred: Vec<_> = s
        .deferred
        .iter()
        .map(|d| crate::handoff_model::Deferred {
            req: map(d.req),
            ..d.clone()
        })
        .collect();
    deferred.sort();
    let mut violations: Vec<Violation> = s
        .violations
        .iter()
        .map(|v| match *v {
            Violation::ForeignRead {
                reader,
                page,
                writer,
            } => Violation::ForeignRead {
                reader: map(reader),
                page,
                writer: map_writer(writer),
            },
            Violation::DoubleFree { side, req, page } => Violation::DoubleFree {
                side,
                req: map(req),
                page,
            },
            Violation::WriteAfterReassign { req, page, owner } => Violation::WriteAfterReassign {
                req: map(req),
                page,
                owner: owner.map(map),
            },
            Violation::AnsweredTwice { req } => Violation::AnsweredTwice { req: map(req) },
            Violation::RejectedGot200 { req } => Violation::RejectedGot200 { req: map(req) },
        })
        .collect();
    violations.sort();
    violations.dedup();
    Some(State {
        reqs,
        decode: s.decode.iter().map(map_page).collect(),
        decode_free: s.decode_free.clone(),
        prefill: s.prefill.iter().map(map_page).collect(),
        prefill_free: s.prefill_free.clone(),
        writes,
        deferred,
        aborts_left: s.aborts_left,
        late_writes_left: s.late_writes_left,
        lost_acks_left: s.lost_acks_left,
        violations,
    })
}
