//! CPU reference kernels.
//!
//! These are the kernels the engine runs when no GPU is present, and the
//! ground truth the CUDA kernels are compared against. Decode attention is
//! split over the KV sequence (flash-decoding style) and runs the splits on
//! all cores, because the incident-scale probe reads more than 10,000 pages
//! per decode step.
//!
//! Every output bit is fixed by the order of the floating-point operations,
//! and receipts quote tokens read out of these outputs, so that order is part
//! of the contract, whatever instructions carry it out:
//!
//! * a score is `q · k` summed in sixteen lane partials (element `16c + i`
//!   goes to partial `i`, chunks `c` in order, each partial starting at
//!   `+0.0`), then the partials added one after another onto `-0.0` (Rust's
//!   empty `f32` sum), then the sum of the elements past the last whole
//!   chunk, then multiplied by the softmax scale;
//! * per query head, keys are folded one at a time in table order: a score
//!   above the running maximum first rescales the running sum and every
//!   accumulator element by `exp(max - score)`, then the key's weight
//!   `exp(score - max)` is added to the sum and `weight * v[d]` to element `d`;
//! * splits of [`PAGES_PER_SPLIT`] pages are merged by [`combine`] in table
//!   order.
//!
//! No multiply and add are ever fused, bf16 widens to f32 exactly, and `exp`
//! is always `f32::exp` on one score at a time. The work is done a block of
//! keys at a time — scores first, then the softmax bookkeeping, then the V
//! sums — which reorders operations on *different* output elements only; each
//! element still sees the sequence above.
//!
//! The code is cut by concern: `softmax` holds the plain arithmetic (the
//! dot product in its order, the running softmax state), `fold` the block
//! fold of one split, `kernel` the code it runs on a block (portable, or
//! AVX2 in `kernel::avx2`), `ahead` the prefetch of the next block and
//! `aligned` the cache-line-aligned buffers. `same_bits` (tests only)
//! compares every way in with the fold this one replaced, kept verbatim in
//! `same_bits::reference`.

mod ahead;
mod aligned;
mod fold;
mod kernel;
#[cfg(test)]
mod same_bits;
mod softmax;

use rayon::prelude::*;

use crate::layout::{KvLayout, TagCheck, TagRefused};

use fold::fold_split;
use kernel::Kernel;
use softmax::Partial;

/// Inputs of one decode-attention call for one request.
#[derive(Debug, Clone, Copy)]
pub struct PagedAttention<'a> {
    pub layout: KvLayout,
    /// The whole pool (see [`crate::layout`]).
    pub kv: &'a [u16],
    /// The request's pages, in position order.
    pub page_table: &'a [u32],
    /// Positions `0..seq_len` are attended to.
    pub seq_len: usize,
    /// Queries, `num_q_heads * head_dim` values.
    pub q: &'a [f32],
    /// Query heads; a multiple of `layout.num_kv_heads` (GQA).
    pub num_q_heads: usize,
    /// Softmax scale applied to `q · k`.
    pub sm_scale: f32,
    /// Owner-tag check, fused into the page walk when present.
    pub tags: Option<TagCheck<'a>>,
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
    split_states_with(a, splits, queries, Kernel::detect(a.layout.head_dim))
}

/// [`split_states`] on a given kernel (the tests run every kernel this
/// machine has, and compare).
fn split_states_with(
    a: &PagedAttention<'_>,
    splits: std::ops::Range<usize>,
    queries: &[&[f32]],
    kernel: Kernel,
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
            fold_split(a, first, pages, queries, kernel)
        })
        .collect()
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

/// Adler-32 over the bytes of `pages`, in order (little-endian bf16 bytes).
/// This is the handoff checksum of SGLang PR #39500
/// (`--disaggregation-enable-kv-checksum`).
pub fn adler32_pages(layout: KvLayout, kv: &[u16], pages: &[u32]) -> u32 {
    let mut h = simd_adler32::Adler32::new();
    for &p in pages {
        h.write(bytemuck::cast_slice(layout.page(kv, p as usize)));
    }
    h.finish()
}

/// Zero the bytes of `pages`.
pub fn scrub_pages(layout: KvLayout, kv: &mut [u16], pages: &[u32]) {
    let n = layout.page_elems();
    for &p in pages {
        kv[p as usize * n..(p as usize + 1) * n].fill(0);
    }
}

#[cfg(test)]
mod tests {
    use super::softmax::{dot, widen};
    use super::*;
    use crate::layout::{bf16_to_f32, f32_to_bf16};
    use rand::{Rng, SeedableRng};

    fn layout() -> KvLayout {
        KvLayout {
            page_size: 16,
            num_kv_heads: 2,
            head_dim: 32,
        }
    }

    /// Dense softmax attention over gathered K/V: the plain definition.
    fn dense(a: &PagedAttention<'_>) -> Vec<f32> {
        let l = a.layout;
        let group = a.num_q_heads / l.num_kv_heads;
        let mut out = vec![0.0; a.num_q_heads * l.head_dim];
        for qh in 0..a.num_q_heads {
            let h = qh / group;
            let q = &a.q[qh * l.head_dim..(qh + 1) * l.head_dim];
            let mut scores = Vec::new();
            let mut vs = Vec::new();
            for pos in 0..a.seq_len {
                let page = a.page_table[pos / l.page_size] as usize;
                let ko = l.k_offset(page, pos % l.page_size, h);
                let vo = l.v_offset(page, pos % l.page_size, h);
                let mut k = vec![0.0; l.head_dim];
                widen(&a.kv[ko..ko + l.head_dim], &mut k);
                scores.push(dot(q, &k) * a.sm_scale);
                vs.push(&a.kv[vo..vo + l.head_dim]);
            }
            let m = scores.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
            let w: Vec<f32> = scores.iter().map(|s| (s - m).exp()).collect();
            let z: f32 = w.iter().sum();
            for (wi, v) in w.iter().zip(vs) {
                for d in 0..l.head_dim {
                    out[qh * l.head_dim + d] += wi / z * bf16_to_f32(v[d]);
                }
            }
        }
        out
    }

    #[test]
    fn split_kv_matches_dense_softmax() {
        let l = layout();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let pages = 40;
        let kv: Vec<u16> = (0..pages * l.page_elems())
            .map(|_| f32_to_bf16(rng.random_range(-1.0..1.0)))
            .collect();
        let mut table: Vec<u32> = (0..pages as u32).collect();
        table.reverse();
        let q: Vec<f32> = (0..4 * l.head_dim)
            .map(|_| rng.random_range(-1.0..1.0))
            .collect();
        let a = PagedAttention {
            layout: l,
            kv: &kv,
            page_table: &table[..30],
            seq_len: 29 * 16 + 5,
            q: &q,
            num_q_heads: 4,
            sm_scale: 0.5,
            tags: None,
        };
        let got = paged_decode_attention(&a).unwrap();
        let want = dense(&a);
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() < 1e-4, "{g} vs {w}");
        }
    }

    /// `pages` pages of random bf16 K/V and a table reading them backwards.
    fn random_pages(l: KvLayout, pages: usize, rng: &mut impl Rng) -> (Vec<u16>, Vec<u32>) {
        let kv = (0..pages * l.page_elems())
            .map(|_| f32_to_bf16(rng.random_range(-1.0..1.0)))
            .collect();
        (kv, (0..pages as u32).rev().collect())
    }

    #[test]
    fn several_splits_merge_to_the_dense_result() {
        let l = KvLayout {
            page_size: 2,
            num_kv_heads: 1,
            head_dim: 16,
        };
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let pages = 3 * PAGES_PER_SPLIT + 5;
        let (kv, table) = random_pages(l, pages, &mut rng);
        let q: Vec<f32> = (0..2 * l.head_dim)
            .map(|_| rng.random_range(-2.0..2.0))
            .collect();
        let a = PagedAttention {
            layout: l,
            kv: &kv,
            page_table: &table,
            seq_len: pages * 2 - 1,
            q: &q,
            num_q_heads: 2,
            sm_scale: 1.0,
            tags: None,
        };
        let got = paged_decode_attention(&a).unwrap();
        for (g, w) in got.iter().zip(&dense(&a)) {
            assert!((g - w).abs() < 1e-4, "{g} vs {w}");
        }
    }

    /// Splits read once for several queries give each query the bits a
    /// one-query call gives it, and full splits kept from a shorter read
    /// combine with a longer read's tail into that longer read's bits.
    #[test]
    fn several_queries_in_one_pass_give_each_the_bits_of_its_own_call() {
        let l = KvLayout {
            page_size: 2,
            num_kv_heads: 2,
            head_dim: 16,
        };
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let pages = 2 * PAGES_PER_SPLIT + 9;
        let (kv, table) = random_pages(l, pages, &mut rng);
        let queries: Vec<Vec<f32>> = (0..5)
            .map(|_| {
                (0..4 * l.head_dim)
                    .map(|_| rng.random_range(-2.0..2.0))
                    .collect()
            })
            .collect();
        let refs: Vec<&[f32]> = queries.iter().map(Vec::as_slice).collect();
        let short = pages * 2 - 7;
        fn at<'a>(
            l: KvLayout,
            kv: &'a [u16],
            table: &'a [u32],
            seq_len: usize,
            q: &'a [f32],
        ) -> PagedAttention<'a> {
            PagedAttention {
                layout: l,
                kv,
                page_table: table,
                seq_len,
                q,
                num_q_heads: 4,
                sm_scale: 0.7,
                tags: None,
            }
        }
        let full = 2;
        let kept = split_states(&at(l, &kv, &table, short, &queries[0]), 0..full, &refs);
        for (i, q) in queries.iter().enumerate() {
            let seq_len = short + i;
            let a = at(l, &kv, &table, seq_len, q);
            let want = paged_decode_attention(&a).unwrap();
            let tail = split_states(&a, full..split_count(&a), &[q]);
            let got = combine(
                kept.iter().map(|s| &s[i]).chain(tail.iter().map(|s| &s[0])),
                4,
                l.head_dim,
            );
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "query {i}");
        }
    }

    #[test]
    fn tag_check_refuses_foreign_page() {
        let l = layout();
        let kv = vec![0u16; 8 * l.page_elems()];
        let mut tags = vec![7u64; 8];
        tags[5] = 9;
        let q = vec![0.0; 2 * l.head_dim];
        let mut a = PagedAttention {
            layout: l,
            kv: &kv,
            page_table: &[0, 1, 5, 2],
            seq_len: 64,
            q: &q,
            num_q_heads: 2,
            sm_scale: 1.0,
            tags: Some(TagCheck {
                page_tags: &tags,
                expected: 7,
            }),
        };
        let err = paged_decode_attention(&a).unwrap_err();
        assert_eq!((err.index, err.page, err.found), (2, 5, 9));
        // Reading only the first two pages never touches page 5.
        a.seq_len = 32;
        assert!(paged_decode_attention(&a).is_ok());
    }

    /// The checksum is Adler-32 (RFC 1950) of the pages' little-endian
    /// bytes in table order, as the definition computes it.
    #[test]
    fn adler32_is_the_rfc_1950_sum_of_the_pages_bytes() {
        let l = layout();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let kv: Vec<u16> = (0..6 * l.page_elems()).map(|_| rng.random()).collect();
        let pages = [4, 0, 5, 2];
        let (mut a, mut b) = (1u32, 0u32);
        for &p in &pages {
            for &x in l.page(&kv, p as usize) {
                for byte in x.to_le_bytes() {
                    a = (a + byte as u32) % 65521;
                    b = (b + a) % 65521;
                }
            }
        }
        assert_eq!(adler32_pages(l, &kv, &pages), (b << 16) | a);
    }

    #[test]
    fn adler32_changes_with_page_set_and_scrub_zeroes() {
        let l = layout();
        let mut kv: Vec<u16> = (0..4 * l.page_elems()).map(|i| i as u16).collect();
        let one = adler32_pages(l, &kv, &[0]);
        let two = adler32_pages(l, &kv, &[0, 1]);
        assert_ne!(one, two);
        scrub_pages(l, &mut kv, &[1]);
        assert!(l.page(&kv, 1).iter().all(|&x| x == 0));
        assert!(l.page(&kv, 2).iter().any(|&x| x != 0));
        assert_eq!(adler32_pages(l, &kv, &[]), 1);
    }
}
