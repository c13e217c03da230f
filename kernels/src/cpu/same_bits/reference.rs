//! The fold as it was before it took keys a block at a time, kept
//! verbatim (less the public struct and the checksum and scrub kernels,
//! which did not change): every output of the kernels in `cpu` must match
//! it bit for bit.

use rayon::prelude::*;

use crate::cpu::PagedAttention;
use crate::layout::{bf16_to_f32, TagRefused};

/// Partial softmax state of one split for one query head.
#[derive(Debug, Clone)]
struct Partial {
    max: f32,
    sum: f32,
    acc: Vec<f32>,
}

impl Partial {
    fn empty(head_dim: usize) -> Self {
        Partial {
            max: f32::NEG_INFINITY,
            sum: 0.0,
            acc: vec![0.0; head_dim],
        }
    }

    /// Take in one key's score: raise the running maximum if the score is
    /// above it (rescaling what is summed so far) and return its weight.
    #[inline]
    fn weigh(&mut self, score: f32) -> f32 {
        if score > self.max {
            let rescale = (self.max - score).exp();
            self.sum *= rescale;
            self.acc.iter_mut().for_each(|a| *a *= rescale);
            self.max = score;
        }
        let w = (score - self.max).exp();
        self.sum += w;
        w
    }

    /// Fold one key/value into the running softmax (`v` widened from bf16).
    #[inline]
    fn push(&mut self, score: f32, v: &[f32]) {
        let w = self.weigh(score);
        for (a, &b) in self.acc.iter_mut().zip(v) {
            *a += w * b;
        }
    }

    /// [`Partial::push`] with `v` still in bf16 (widened as it is read).
    #[inline]
    fn push_bf16(&mut self, score: f32, v: &[u16]) {
        let w = self.weigh(score);
        for (a, &b) in self.acc.iter_mut().zip(v) {
            *a += w * bf16_to_f32(b);
        }
    }

    /// Merge another split's state into this one (log-sum-exp merge).
    fn merge(&mut self, other: &Partial) {
        if other.sum == 0.0 {
            return;
        }
        let max = self.max.max(other.max);
        let a = if self.sum == 0.0 {
            0.0
        } else {
            (self.max - max).exp()
        };
        let b = (other.max - max).exp();
        for (x, &y) in self.acc.iter_mut().zip(&other.acc) {
            *x = *x * a + y * b;
        }
        self.sum = self.sum * a + other.sum * b;
        self.max = max;
    }
}

/// `q · k`, each element of `k` made an f32 by `widen`. Sixteen
/// independent partial sums let the compiler vectorise the loop (a single
/// running sum would serialise it).
#[inline(always)]
fn dot_of<T: Copy>(q: &[f32], k: &[T], widen: impl Fn(T) -> f32) -> f32 {
    const LANES: usize = 16;
    let mut acc = [0.0f32; LANES];
    let mut qc = q.chunks_exact(LANES);
    let mut kc = k.chunks_exact(LANES);
    for (a, b) in (&mut qc).zip(&mut kc) {
        for i in 0..LANES {
            acc[i] += a[i] * widen(b[i]);
        }
    }
    let tail: f32 = qc
        .remainder()
        .iter()
        .zip(kc.remainder())
        .map(|(&a, &b)| a * widen(b))
        .sum();
    acc.iter().sum::<f32>() + tail
}

/// `q · k` with `k` already widened from bf16.
#[inline]
fn dot(q: &[f32], k: &[f32]) -> f32 {
    dot_of(q, k, |x| x)
}

/// `q · k` with `k` still in bf16 (widened as it is read).
#[inline]
fn dot_bf16(q: &[f32], k: &[u16]) -> f32 {
    dot_of(q, k, bf16_to_f32)
}

/// Widen bf16 bits into `out` (exact).
#[inline]
fn widen(bits: &[u16], out: &mut [f32]) {
    for (o, &b) in out.iter_mut().zip(bits) {
        *o = bf16_to_f32(b);
    }
}

/// Pages per split. Fixed, not derived from the core count, so the order of
/// floating-point sums — and so every output bit — is the same on every
/// machine; 256 pages still give the incident's 10,646-page read 42 splits
/// to spread over the cores.
pub const PAGES_PER_SPLIT: usize = 256;

/// What one split of a page table contributes to one query: the running
/// softmax state of each query head. [`combine`] merges splits in table
/// order into the attention output.
#[derive(Debug, Clone)]
pub struct SplitState(Vec<Partial>);

/// Splits over the pages `a` reads.
pub fn split_count(a: &PagedAttention<'_>) -> usize {
    used_pages(a).div_ceil(PAGES_PER_SPLIT)
}

fn used_pages(a: &PagedAttention<'_>) -> usize {
    a.seq_len
        .div_ceil(a.layout.page_size)
        .min(a.page_table.len())
}

/// The owner-tag check: the first page `a` reads whose tag is not the
/// reader's, in table order.
pub fn check_tags(a: &PagedAttention<'_>) -> Result<(), TagRefused> {
    let Some(t) = a.tags else { return Ok(()) };
    for (index, &page) in a.page_table[..used_pages(a)].iter().enumerate() {
        let found = t.page_tags[page as usize];
        if found != t.expected {
            return Err(TagRefused {
                index,
                page,
                found,
                expected: t.expected,
            });
        }
    }
    Ok(())
}

/// The states of splits `splits` of `a`'s page table for each of `queries`
/// (each laid out like `a.q`; `a.q` itself is not read): `[split][query]`.
/// Each split's pages are read once for all the queries, and each query's
/// state is folded in exactly the order a one-query call folds it, so its
/// bits are the same. The tag check is [`check_tags`]'s, not done here.
pub fn split_states(
    a: &PagedAttention<'_>,
    splits: std::ops::Range<usize>,
    queries: &[&[f32]],
) -> Vec<Vec<SplitState>> {
    let l = a.layout;
    assert!(
        a.num_q_heads.is_multiple_of(l.num_kv_heads),
        "GQA group must divide"
    );
    let width = a.num_q_heads * l.head_dim;
    assert!(queries.iter().all(|q| q.len() == width));
    let table = &a.page_table[..used_pages(a)];
    let start = splits.start.min(table.len().div_ceil(PAGES_PER_SPLIT));
    let end = splits
        .end
        .min(table.len().div_ceil(PAGES_PER_SPLIT))
        .max(start);
    (start..end)
        .into_par_iter()
        .map(|split| {
            let first = split * PAGES_PER_SPLIT;
            let pages = &table[first..(first + PAGES_PER_SPLIT).min(table.len())];
            fold_split(a, first, pages, queries)
        })
        .collect()
}

/// Fold the pages of one split (`pages`, the first at table index `first`)
/// into a state per query. Every variant below rounds exactly as the
/// others do (bf16 widens to f32 exactly; no multiply and add are fused),
/// so the bits do not depend on which one runs.
fn fold_split(
    a: &PagedAttention<'_>,
    first: usize,
    pages: &[u32],
    queries: &[&[f32]],
) -> Vec<SplitState> {
    match queries {
        [q] => vec![fold_one(a, first, pages, q)],
        _ => fold_many(a, first, pages, queries),
    }
}

/// Call `f(head, k, v)` for every key the split's pages hold, in table
/// order (inlined into each caller, so it takes the caller's features).
#[inline(always)]
fn each_key(
    a: &PagedAttention<'_>,
    first: usize,
    pages: &[u32],
    mut f: impl FnMut(usize, &[u16], &[u16]),
) {
    let l = a.layout;
    for (j, &page) in pages.iter().enumerate() {
        let index = first + j;
        let slots = (a.seq_len - index * l.page_size).min(l.page_size);
        for slot in 0..slots {
            for h in 0..l.num_kv_heads {
                let ko = l.k_offset(page as usize, slot, h);
                let vo = l.v_offset(page as usize, slot, h);
                f(h, &a.kv[ko..ko + l.head_dim], &a.kv[vo..vo + l.head_dim]);
            }
        }
    }
}

/// One query: bf16 widened inside the dot product and the update, reading
/// each key once. Also compiled with AVX2 and AVX-512, picked at run time.
#[multiversion::multiversion(targets("x86_64+avx512f+avx512bw+avx2", "x86_64+avx2"))]
fn fold_one<'a>(a: &PagedAttention<'a>, first: usize, pages: &[u32], q: &[f32]) -> SplitState {
    let l = a.layout;
    let group = a.num_q_heads / l.num_kv_heads;
    let mut parts = vec![Partial::empty(l.head_dim); a.num_q_heads];
    each_key(a, first, pages, |h, k, v| {
        for qh in h * group..(h + 1) * group {
            let q = &q[qh * l.head_dim..(qh + 1) * l.head_dim];
            parts[qh].push_bf16(dot_bf16(q, k) * a.sm_scale, v);
        }
    });
    SplitState(parts)
}

/// Several queries: each key widened once, then every query's scores (they
/// do not depend on each other, so they overlap), then their updates. Also
/// compiled with AVX2 and AVX-512, picked at run time.
#[multiversion::multiversion(targets("x86_64+avx512f+avx512bw+avx2", "x86_64+avx2"))]
fn fold_many<'a>(
    a: &PagedAttention<'a>,
    first: usize,
    pages: &[u32],
    queries: &[&[f32]],
) -> Vec<SplitState> {
    let l = a.layout;
    let group = a.num_q_heads / l.num_kv_heads;
    let mut parts = vec![vec![Partial::empty(l.head_dim); a.num_q_heads]; queries.len()];
    let (mut k, mut v) = (vec![0.0; l.head_dim], vec![0.0; l.head_dim]);
    let mut scores = vec![0.0; queries.len() * group];
    each_key(a, first, pages, |h, kb, vb| {
        widen(kb, &mut k);
        widen(vb, &mut v);
        let heads = h * group * l.head_dim..(h + 1) * group * l.head_dim;
        for (q, s) in queries.iter().zip(scores.chunks_exact_mut(group)) {
            for (qg, sg) in q[heads.clone()].chunks_exact(l.head_dim).zip(s) {
                *sg = dot(qg, &k) * a.sm_scale;
            }
        }
        for (part, s) in parts.iter_mut().zip(scores.chunks_exact(group)) {
            for (p, &sg) in part[h * group..(h + 1) * group].iter_mut().zip(s) {
                p.push(sg, &v);
            }
        }
    });
    parts.into_iter().map(SplitState).collect()
}

/// Merge split states, in table order, into the attention output
/// (`num_q_heads * head_dim` values).
pub fn combine<'s>(
    states: impl IntoIterator<Item = &'s SplitState>,
    num_q_heads: usize,
    head_dim: usize,
) -> Vec<f32> {
    let mut total = vec![Partial::empty(head_dim); num_q_heads];
    for s in states {
        for (t, p) in total.iter_mut().zip(&s.0) {
            t.merge(p);
        }
    }
    let mut out = Vec::with_capacity(num_q_heads * head_dim);
    for t in total {
        let inv = if t.sum > 0.0 { 1.0 / t.sum } else { 0.0 };
        out.extend(t.acc.iter().map(|x| x * inv));
    }
    out
}

/// Decode attention over paged KV: one output vector per query head
/// (`num_q_heads * head_dim` values). With a tag check, the first page whose
/// tag is not the reader's stops the call and nothing is returned: the read
/// fails closed.
pub fn paged_decode_attention(a: &PagedAttention<'_>) -> Result<Vec<f32>, TagRefused> {
    assert_eq!(a.q.len(), a.num_q_heads * a.layout.head_dim);
    check_tags(a)?;
    let states = split_states(a, 0..split_count(a), &[a.q]);
    Ok(combine(
        states.iter().map(|s| &s[0]),
        a.num_q_heads,
        a.layout.head_dim,
    ))
}

// Not part of the old code: the bits of a state, for the comparisons
// (as `same_bits::state_bits` reads them).
pub fn state_bits(s: &SplitState) -> Vec<(u32, u32, Vec<u32>)> {
    s.0.iter()
        .map(|p| {
            let acc = p.acc.iter().map(|&x| super::bits_of(x)).collect();
            (super::bits_of(p.max), super::bits_of(p.sum), acc)
        })
        .collect()
}
