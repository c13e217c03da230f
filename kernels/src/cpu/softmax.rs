//! The plain arithmetic whose order the `cpu` module documentation fixes:
//! a score's dot product ([`dot_of`]), the widening of bf16, and the running
//! softmax state of one query head ([`Partial`]), which takes in a block's
//! scores and merges splits. The kernels reproduce the dot product bit for
//! bit; the softmax bookkeeping is only ever done here.

use crate::layout::bf16_to_f32;

/// Partial softmax state of one split for one query head.
#[derive(Debug, Clone)]
pub(super) struct Partial {
    pub(super) max: f32,
    pub(super) sum: f32,
    pub(super) acc: Vec<f32>,
}

impl Partial {
    pub(super) fn empty(head_dim: usize) -> Self {
        Partial {
            max: f32::NEG_INFINITY,
            sum: 0.0,
            acc: vec![0.0; head_dim],
        }
    }

    /// Take in the scores of a block of keys, in order: raise the running
    /// maximum where a score is above it, rescaling the running sum, and
    /// add each key's weight to the sum. Each key's weight goes to
    /// `weights`; each rescale goes to `rescales` as (key index in the
    /// block, factor), for the V pass to apply to the accumulator just
    /// before that key's term — where a key-at-a-time fold applies it.
    /// These are the only `exp` calls of the fold, one score at a time.
    ///
    /// The maximum and the weights do not depend on the sum, so the sum is
    /// taken in a second pass, in the same order (rescale, then add): the
    /// `exp` calls of the first pass then overlap instead of waiting on it.
    pub(super) fn weigh(
        &mut self,
        scores: &[f32],
        weights: &mut [f32],
        rescales: &mut Vec<(usize, f32)>,
    ) {
        rescales.clear();
        for (j, (&score, w)) in scores.iter().zip(weights.iter_mut()).enumerate() {
            if score > self.max {
                rescales.push((j, (self.max - score).exp()));
                self.max = score;
            }
            *w = (score - self.max).exp();
        }
        let mut from = 0;
        for &(at, rescale) in rescales.iter() {
            self.sum = weights[from..at].iter().fold(self.sum, |s, &w| s + w);
            self.sum *= rescale;
            from = at;
        }
        self.sum = weights[from..].iter().fold(self.sum, |s, &w| s + w);
    }

    /// Merge another split's state into this one (log-sum-exp merge).
    pub(super) fn merge(&mut self, other: &Partial) {
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

/// `q · k`, each element of `k` made an f32 by `widen`: the score's sum in
/// its fixed order (sixteen lane partials, then the remainder; see the
/// `cpu` module documentation). The vector kernels reproduce it exactly.
#[inline(always)]
pub(super) fn dot_of<T: Copy>(q: &[f32], k: &[T], widen: impl Fn(T) -> f32) -> f32 {
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
pub(super) fn dot(q: &[f32], k: &[f32]) -> f32 {
    dot_of(q, k, |x| x)
}

/// `q · k` with `k` still in bf16 (widened as it is read).
#[inline]
pub(super) fn dot_bf16(q: &[f32], k: &[u16]) -> f32 {
    dot_of(q, k, bf16_to_f32)
}

/// Widen bf16 bits into `out` (exact).
#[inline]
pub(super) fn widen(bits: &[u16], out: &mut [f32]) {
    for (o, &b) in out.iter_mut().zip(bits) {
        *o = bf16_to_f32(b);
    }
}
