//! CPU reference kernels.
//!
//! These are the kernels the engine runs when no GPU is present, and the
//! ground truth the CUDA kernels are compared against. They are written for
//! clarity first and speed second, but decode attention is split over the KV
//! sequence (flash-decoding style) and runs the splits on all cores, because
//! the incident-scale probe reads more than 10,000 pages per decode step.

use rayon::prelude::*;

use crate::layout::{bf16_to_f32, KvLayout, TagCheck, TagRefused};

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

    /// Fold one key/value into the running softmax.
    #[inline]
    fn push(&mut self, score: f32, v: &[u16]) {
        if score > self.max {
            let rescale = (self.max - score).exp();
            self.sum *= rescale;
            self.acc.iter_mut().for_each(|a| *a *= rescale);
            self.max = score;
        }
        let w = (score - self.max).exp();
        self.sum += w;
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

/// `q · k` with `k` in bf16. Sixteen independent partial sums let the
/// compiler vectorise the loop (a single running sum would serialise it).
#[inline]
fn dot_bf16(q: &[f32], k: &[u16]) -> f32 {
    const LANES: usize = 16;
    let mut acc = [0.0f32; LANES];
    let mut qc = q.chunks_exact(LANES);
    let mut kc = k.chunks_exact(LANES);
    for (a, b) in (&mut qc).zip(&mut kc) {
        for i in 0..LANES {
            acc[i] += a[i] * bf16_to_f32(b[i]);
        }
    }
    let tail: f32 = qc
        .remainder()
        .iter()
        .zip(kc.remainder())
        .map(|(&a, &b)| a * bf16_to_f32(b))
        .sum();
    acc.iter().sum::<f32>() + tail
}

/// Pages per split. Fixed, not derived from the core count, so the order of
/// floating-point sums — and so every output bit — is the same on every
/// machine; 256 pages still give the incident's 10,646-page read 42 splits
/// to spread over the cores.
const PAGES_PER_SPLIT: usize = 256;

/// Decode attention over paged KV: one output vector per query head
/// (`num_q_heads * head_dim` values). With a tag check, the first page whose
/// tag is not the reader's stops the call and nothing is returned: the read
/// fails closed.
pub fn paged_decode_attention(a: &PagedAttention<'_>) -> Result<Vec<f32>, TagRefused> {
    let l = a.layout;
    assert!(
        a.num_q_heads.is_multiple_of(l.num_kv_heads),
        "GQA group must divide"
    );
    assert_eq!(a.q.len(), a.num_q_heads * l.head_dim);
    let group = a.num_q_heads / l.num_kv_heads;
    let used_pages = a.seq_len.div_ceil(l.page_size).min(a.page_table.len());
    let table = &a.page_table[..used_pages];
    let chunk = PAGES_PER_SPLIT;

    let partials: Vec<Result<Vec<Partial>, TagRefused>> = table
        .par_chunks(chunk)
        .enumerate()
        .map(|(split, pages)| {
            let mut parts = vec![Partial::empty(l.head_dim); a.num_q_heads];
            for (j, &page) in pages.iter().enumerate() {
                let index = split * chunk + j;
                if let Some(t) = a.tags {
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
                let slots = (a.seq_len - index * l.page_size).min(l.page_size);
                for slot in 0..slots {
                    for h in 0..l.num_kv_heads {
                        let ko = l.k_offset(page as usize, slot, h);
                        let vo = l.v_offset(page as usize, slot, h);
                        let k = &a.kv[ko..ko + l.head_dim];
                        let v = &a.kv[vo..vo + l.head_dim];
                        for g in 0..group {
                            let qh = h * group + g;
                            let q = &a.q[qh * l.head_dim..(qh + 1) * l.head_dim];
                            parts[qh].push(dot_bf16(q, k) * a.sm_scale, v);
                        }
                    }
                }
            }
            Ok(parts)
        })
        .collect();

    let mut total = vec![Partial::empty(l.head_dim); a.num_q_heads];
    for p in partials {
        for (t, s) in total.iter_mut().zip(p?) {
            t.merge(&s);
        }
    }
    let mut out = Vec::with_capacity(a.num_q_heads * l.head_dim);
    for t in total {
        let inv = if t.sum > 0.0 { 1.0 / t.sum } else { 0.0 };
        out.extend(t.acc.iter().map(|x| x * inv));
    }
    Ok(out)
}

/// Adler-32 over the bytes of `pages`, in order (little-endian bf16 bytes).
/// This is the handoff checksum of SGLang PR #39500
/// (`--disaggregation-enable-kv-checksum`).
pub fn adler32_pages(layout: KvLayout, kv: &[u16], pages: &[u32]) -> u32 {
    let mut h = adler2::Adler32::new();
    for &p in pages {
        h.write_slice(bytemuck::cast_slice(layout.page(kv, p as usize)));
    }
    h.checksum()
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
    use super::*;
    use crate::layout::f32_to_bf16;
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
                scores.push(dot_bf16(q, &a.kv[ko..ko + l.head_dim]) * a.sm_scale);
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

    #[test]
    fn several_splits_merge_to_the_dense_result() {
        let l = KvLayout {
            page_size: 2,
            num_kv_heads: 1,
            head_dim: 16,
        };
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let pages = 3 * PAGES_PER_SPLIT + 5;
        let kv: Vec<u16> = (0..pages * l.page_elems())
            .map(|_| f32_to_bf16(rng.random_range(-1.0..1.0)))
            .collect();
        let table: Vec<u32> = (0..pages as u32).rev().collect();
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
