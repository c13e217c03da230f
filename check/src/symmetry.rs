//! Request symmetry: states that differ only by which fitting request is
//! which are explored once.
//!
//! Requests `r1..` have the same prompt and no transition or property reads
//! a request's index or tenant (isolation is per request, and tenants only
//! label pages for people). Swapping two of them — in their own state, in
//! page owners and writers, in writes in flight and in deferred releases —
//! gives a state that behaves the same. [`representative`] sorts `r1..` by
//! their local state and renames every reference accordingly, so the
//! checker stores one fingerprint per class. Any permutation is sound; the
//! sort only makes classes collide often. Request `r0` (the rejected one)
//! is never moved.

use std::hash::{Hash, Hasher};

use crate::model::{Page, Rid, State, Violation, Write, Writer};

fn local_key(r: &crate::model::ReqState) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    r.hash(&mut h);
    h.finish()
}

/// The state with requests `1..` in a canonical order.
pub fn representative(s: &State) -> State {
    let n = s.reqs.len();
    if n <= 2 {
        return s.clone();
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
        return s.clone();
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
        .map(|d| crate::model::Deferred {
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
    State {
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
    }
}
