//! How GPU results are compared with the CPU reference: the RMS-relative
//! error `|got - want| / |want|` over a whole output, with one tolerance.
//!
//! An absolute bound on single elements is blind at long contexts: decode
//! outputs are weighted means whose size shrinks like 1 / sqrt(tokens), so
//! at 64k tokens an absolute 1e-3 is about half the output itself and a
//! dropped page passes unseen. Relative to the output's own size, one
//! dropped page of `p` tokens out of `n` moves it by about sqrt(p / n):
//! 1.6e-2 for 16 of 65,536 tokens, far above the tolerance, while f32
//! arithmetic (and the tensor-core variant's split bf16 operands) stays
//! below 1e-4.

/// Largest accepted RMS-relative error of a decode output.
pub const TOLERANCE: f64 = 1e-3;

/// `|got - want|_2 / |want|_2` (the plain norm of the difference when
/// `want` is all zeros). Infinite when the lengths differ; NaN anywhere in
/// `got` gives NaN, which no tolerance accepts.
pub fn rms_relative(got: &[f32], want: &[f32]) -> f64 {
    if got.len() != want.len() {
        return f64::INFINITY;
    }
    let (mut num, mut den) = (0.0f64, 0.0f64);
    for (&g, &w) in got.iter().zip(want) {
        let e = g as f64 - w as f64;
        num += e * e;
        den += w as f64 * w as f64;
    }
    if den > 0.0 {
        (num / den).sqrt()
    } else {
        num.sqrt()
    }
}

/// Whether `got` matches `want` within [`TOLERANCE`].
pub fn within_tolerance(got: &[f32], want: &[f32]) -> bool {
    rms_relative(got, want) <= TOLERANCE
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::{paged_decode_attention, PagedAttention};
    use crate::layout::{f32_to_bf16, KvLayout};
    use rand::{Rng, SeedableRng};

    #[test]
    fn nan_and_shape_never_pass() {
        assert!(!within_tolerance(&[f32::NAN], &[1.0]));
        assert!(!within_tolerance(&[1.0], &[1.0, 2.0]));
        assert!(within_tolerance(&[1.0, 2.0], &[1.0, 2.0]));
        assert!(within_tolerance(&[0.0], &[0.0]));
    }

    /// The case the old absolute 1e-3 let through: one page of 16 dropped
    /// from a 64k-token request. The relative check must refuse it.
    #[test]
    fn a_dropped_page_at_64k_tokens_fails() {
        let layout = KvLayout {
            page_size: 16,
            num_kv_heads: 1,
            head_dim: 128,
        };
        let pages = 65_536 / 16;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let kv: Vec<u16> = (0..pages * layout.page_elems())
            .map(|_| f32_to_bf16(rng.random_range(-1.0..1.0)))
            .collect();
        let q: Vec<f32> = (0..8 * 128).map(|_| rng.random_range(-1.0..1.0)).collect();
        let table: Vec<u32> = (0..pages as u32).collect();
        let attend = |table: &[u32]| {
            paged_decode_attention(&PagedAttention {
                layout,
                kv: &kv,
                page_table: table,
                seq_len: table.len() * 16,
                q: &q,
                num_q_heads: 8,
                sm_scale: 1.0 / (128f32).sqrt(),
                tags: None,
            })
            .unwrap()
        };
        let full = attend(&table);
        let mut dropped = table.clone();
        dropped.remove(pages / 2);
        let short = attend(&dropped);
        let abs = full
            .iter()
            .zip(&short)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(abs < 1e-3, "the absolute bound passes it: {abs}");
        let rel = rms_relative(&short, &full);
        assert!(rel > 10.0 * TOLERANCE, "relative error {rel}");
    }
}
