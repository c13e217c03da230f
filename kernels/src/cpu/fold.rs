//! The fold of one split: its slots taken [`BLOCK`] keys at a time, and per
//! query head each block's scores, softmax bookkeeping and V sums, in the
//! order the `cpu` module documentation fixes. Which code computes the
//! scores and the sums is the [`Kernel`]'s business; the fold decides what
//! is read when, and where it is kept.

use super::ahead::Ahead;
use super::aligned::Aligned;
use super::kernel::{Kernel, Rows};
use super::softmax::Partial;
use super::{PagedAttention, SplitState};

/// Keys per block of the fold. A block's K and V, widened, take 16 KiB
/// each at head_dim 128: they stay in the core's nearest caches while every
/// query head reads them.
pub(super) const BLOCK: usize = 32;
const _: () = assert!(BLOCK.is_multiple_of(8));

/// Call `f(offset)` with the pool offset of every slot the split's pages
/// hold, in table order (the split's pages start at table index `first`).
/// A page that does not lie inside the pool stops the call here, so the
/// kernels never read outside it.
fn each_slot(a: &PagedAttention<'_>, first: usize, pages: &[u32], mut f: impl FnMut(usize)) {
    let l = a.layout;
    let slot_elems = l.slot_elems();
    for (j, &page) in pages.iter().enumerate() {
        let index = first + j;
        let slots = (a.seq_len - index * l.page_size).min(l.page_size);
        let base = l.k_offset(page as usize, 0, 0);
        assert!(
            base + slots * slot_elems <= a.kv.len(),
            "page {page} lies outside the pool"
        );
        for slot in 0..slots {
            f(base + slot * slot_elems);
        }
    }
}

/// Fold the pages of one split (`pages`, the first at table index `first`)
/// into a state per query.
///
/// The slots are taken [`BLOCK`] at a time, in table order. For each KV
/// head, each query head of its group (of every query) then runs three
/// passes over the block: the scores of all its keys (independent of each
/// other, so they are computed side by side, and for two query heads at
/// once where there are two, sharing the K reads); the softmax
/// bookkeeping, key by key ([`Partial::weigh`]); and the V sums, with the
/// accumulator held in registers across the block's keys and each rescale
/// applied just before the term of the key that raised the maximum. Each
/// query head's state thus goes through exactly the operations of a
/// key-at-a-time fold, in the same order; only operations of different
/// heads and different elements are interleaved differently. Where a block
/// is read by three or more query heads, its K and V are widened once into
/// a buffer; otherwise they are widened as they are read. Neither choice
/// changes a bit.
pub(super) fn fold_split(
    a: &PagedAttention<'_>,
    first: usize,
    pages: &[u32],
    queries: &[&[f32]],
    kernel: Kernel,
) -> Vec<SplitState> {
    let l = a.layout;
    let hd = l.head_dim;
    let group = a.num_q_heads / l.num_kv_heads;
    let widened = hd > 0 && queries.len() * group > 2;
    let width = a.num_q_heads * hd;
    let rows = queries.len() * a.num_q_heads;
    // The queries and the accumulators are kept in the kernel's element
    // order for the whole split (a permutation within each 16-element
    // chunk: it moves elements, it changes no value), in buffers that
    // start on a cache line.
    let mut qs = Aligned::zeroed(rows * hd);
    for (dst, q) in qs.as_mut().chunks_exact_mut(width).zip(queries) {
        dst.copy_from_slice(q);
        kernel.reorder(dst);
    }
    let mut accs = Aligned::zeroed(rows * hd);
    let empty = Partial {
        max: f32::NEG_INFINITY,
        sum: 0.0,
        acc: Vec::new(),
    };
    let mut parts = vec![empty; rows];
    let mut s = Scratch::new(hd, widened);
    let mut block = |slots: &[usize], ahead: &[usize]| {
        let n = slots.len();
        // One tick per key of each pass: each row's scores and V sums (one
        // pass per 64 elements), each widening.
        let passes = queries.len() * group * (1 + hd.div_ceil(64)) + 2 * usize::from(widened);
        let mut ahead = Ahead::new(a.kv, ahead, l.slot_elems(), l.num_kv_heads * passes * n);
        for h in 0..l.num_kv_heads {
            s.keys.clear();
            s.keys.extend(slots.iter().map(|&o| o + h * hd));
            s.values.clear();
            s.values
                .extend(slots.iter().map(|&o| o + (l.num_kv_heads + h) * hd));
            let (k, v) = if widened {
                let (k, v) = (&mut s.k.as_mut()[..n * hd], &mut s.v.as_mut()[..n * hd]);
                kernel.widen(a.kv, &s.keys, hd, k, &mut ahead);
                kernel.widen(a.kv, &s.values, hd, v, &mut ahead);
                (Rows::Widened(k, hd), Rows::Widened(v, hd))
            } else {
                (
                    Rows::pool(a.kv, &s.keys, hd),
                    Rows::pool(a.kv, &s.values, hd),
                )
            };
            // The rows (query, query head) this KV head serves, two at a
            // time where there are two: their scores share the K reads.
            s.rows.clear();
            s.rows.extend((0..queries.len()).flat_map(|query| {
                let first = query * a.num_q_heads + h * group;
                first..first + group
            }));
            for pair in s.rows.chunks(2) {
                let (s0, s1) = s.scores.split_at_mut(BLOCK);
                match *pair {
                    [r0, r1] => {
                        let q = [r0, r1].map(|r| &qs.as_ref()[r * hd..(r + 1) * hd]);
                        kernel.scores_pair(
                            k,
                            q,
                            a.sm_scale,
                            [&mut s0[..n], &mut s1[..n]],
                            &mut ahead,
                        );
                    }
                    [r] => {
                        let q = &qs.as_ref()[r * hd..(r + 1) * hd];
                        kernel.scores(k, q, a.sm_scale, &mut s0[..n], &mut ahead);
                    }
                    _ => unreachable!(),
                }
                for (&r, scores) in pair.iter().zip([&s0[..n], &s1[..n]]) {
                    parts[r].weigh(scores, &mut s.weights[..n], &mut s.rescales);
                    let acc = &mut accs.as_mut()[r * hd..(r + 1) * hd];
                    kernel.accumulate(v, acc, &s.weights[..n], &s.rescales, &mut ahead);
                }
            }
        }
        ahead.rest();
    };
    // Slots are gathered a block ahead, so that the next block's bytes can
    // be asked for while this one is folded.
    let (mut current, mut next) = (Vec::with_capacity(BLOCK), Vec::with_capacity(BLOCK));
    each_slot(a, first, pages, |o| {
        next.push(o);
        if next.len() == BLOCK {
            if !current.is_empty() {
                block(&current, &next);
            }
            std::mem::swap(&mut current, &mut next);
            next.clear();
        }
    });
    if !current.is_empty() {
        block(&current, &next);
    }
    if !next.is_empty() {
        block(&next, &[]);
    }
    for (p, acc) in parts
        .iter_mut()
        .zip(accs.as_mut().chunks_exact_mut(hd.max(1)))
    {
        kernel.reorder(acc);
        p.acc = acc.to_vec();
    }
    let mut parts = parts.into_iter();
    (0..queries.len())
        .map(|_| SplitState(parts.by_ref().take(a.num_q_heads).collect()))
        .collect()
}

/// Per-split working memory of [`fold_split`].
struct Scratch {
    /// Pool offsets of the block's K rows and V rows for one KV head.
    keys: Vec<usize>,
    values: Vec<usize>,
    /// The block's K and V widened (when they are).
    k: Aligned,
    v: Aligned,
    /// The rows (query, query head) of the KV head being folded.
    rows: Vec<usize>,
    /// The scores of two rows.
    scores: Vec<f32>,
    weights: Vec<f32>,
    rescales: Vec<(usize, f32)>,
}

impl Scratch {
    fn new(head_dim: usize, widened: bool) -> Self {
        let len = if widened { BLOCK * head_dim } else { 0 };
        Scratch {
            keys: Vec::with_capacity(BLOCK),
            values: Vec::with_capacity(BLOCK),
            k: Aligned::zeroed(len),
            v: Aligned::zeroed(len),
            rows: Vec::new(),
            scores: vec![0.0; 2 * BLOCK],
            weights: vec![0.0; BLOCK],
            rescales: Vec::with_capacity(BLOCK),
        }
    }
}
