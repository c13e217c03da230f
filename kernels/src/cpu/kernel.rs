//! The code that computes a block's scores and V sums. [`Kernel`] picks it
//! at run time: AVX2 intrinsics (`avx2`) where the machine and head_dim
//! allow, else a portable path in plain Rust. All give the same bits; they
//! differ in speed only. [`Rows`] says where a block's K or V rows are.

#[cfg(target_arch = "x86_64")]
mod avx2;

use super::ahead::Ahead;
use super::softmax::{dot, dot_bf16, widen};
use crate::layout::bf16_to_f32;

/// The K or V rows of a block, `head_dim` elements each.
#[derive(Debug, Clone, Copy)]
pub(super) enum Rows<'a> {
    /// In the pool, still bf16, at these offsets (each checked to lie
    /// inside the pool when built, by [`Rows::pool`], the only place that
    /// builds one).
    Pool(&'a [u16], &'a [usize], usize),
    /// Widened by [`Kernel::widen`] into a buffer, one row after another.
    Widened(&'a [f32], usize),
}

impl<'a> Rows<'a> {
    pub(super) fn pool(kv: &'a [u16], at: &'a [usize], head_dim: usize) -> Self {
        assert!(at.iter().all(|&o| o + head_dim <= kv.len()));
        Rows::Pool(kv, at, head_dim)
    }

    fn len(&self) -> usize {
        match *self {
            Rows::Pool(_, at, _) => at.len(),
            Rows::Widened(buf, hd) => buf.len() / hd,
        }
    }

    /// What the AVX2 kernel needs before it reads without bounds checks:
    /// AVX2 present, rows of `len` elements, a multiple of 16, and whole
    /// rows in a buffer (rows in the pool were checked by [`Rows::pool`]).
    #[cfg(target_arch = "x86_64")]
    fn check_avx2(&self, len: usize) {
        assert_eq!(Kernel::detect(len), Kernel::Avx2);
        match *self {
            Rows::Pool(_, _, hd) => assert_eq!(hd, len),
            Rows::Widened(buf, hd) => assert!(hd == len && buf.len().is_multiple_of(hd)),
        }
    }
}

/// Which code computes the scores and the V sums of a block. All give the
/// same bits; they differ in speed only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kernel {
    /// Plain Rust, also compiled for AVX2 and AVX-512 and picked at run
    /// time; any head_dim.
    Portable,
    /// AVX2 intrinsics; head_dim a multiple of 16.
    #[cfg(target_arch = "x86_64")]
    Avx2,
}

impl Kernel {
    /// The fastest kernel this machine runs for `head_dim`.
    pub(super) fn detect(head_dim: usize) -> Kernel {
        #[cfg(target_arch = "x86_64")]
        if head_dim > 0
            && head_dim.is_multiple_of(16)
            && std::arch::is_x86_feature_detected!("avx2")
        {
            return Kernel::Avx2;
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = head_dim;
        Kernel::Portable
    }

    /// Put a query (or an accumulator) into the kernel's element order, or
    /// back: the order is its own inverse.
    pub(super) fn reorder(self, x: &mut [f32]) {
        match self {
            Kernel::Portable => {}
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => avx2::reorder(x),
        }
    }

    /// Widen the bf16 rows of `kv` at offsets `at` into `out`, in the
    /// kernel's element order.
    pub(super) fn widen(
        self,
        kv: &[u16],
        at: &[usize],
        head_dim: usize,
        out: &mut [f32],
        ahead: &mut Ahead,
    ) {
        match self {
            Kernel::Portable => {
                ahead.tick();
                for (&o, row) in at.iter().zip(out.chunks_exact_mut(head_dim)) {
                    widen(&kv[o..o + head_dim], row);
                }
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => {
                let rows = Rows::pool(kv, at, head_dim);
                rows.check_avx2(head_dim);
                assert_eq!(out.len(), at.len() * head_dim);
                // SAFETY: checked just above.
                unsafe { avx2::widen(rows, out, ahead) }
            }
        }
    }

    /// `out[j]` = the score of row `j` of `k` for query head `q`.
    pub(super) fn scores(
        self,
        k: Rows<'_>,
        q: &[f32],
        scale: f32,
        out: &mut [f32],
        ahead: &mut Ahead,
    ) {
        assert_eq!(out.len(), k.len());
        match self {
            Kernel::Portable => {
                ahead.tick();
                scores_portable(k, q, scale, out)
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => {
                k.check_avx2(q.len());
                // SAFETY: checked just above.
                unsafe { avx2::scores(k, q, scale, out, ahead) }
            }
        }
    }

    /// [`Kernel::scores`] for two query heads of one KV head at once.
    pub(super) fn scores_pair(
        self,
        k: Rows<'_>,
        q: [&[f32]; 2],
        scale: f32,
        out: [&mut [f32]; 2],
        ahead: &mut Ahead,
    ) {
        match self {
            Kernel::Portable => {
                let [o0, o1] = out;
                self.scores(k, q[0], scale, o0, ahead);
                self.scores(k, q[1], scale, o1, ahead);
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => {
                for (q, out) in q.iter().zip(&out) {
                    assert_eq!(out.len(), k.len());
                    k.check_avx2(q.len());
                }
                // SAFETY: checked just above.
                unsafe { avx2::scores_pair(k, q, scale, out, ahead) }
            }
        }
    }

    /// Add each row of `v` with its weight into `acc`, applying each
    /// rescale (key index, factor) just before that key's term.
    pub(super) fn accumulate(
        self,
        v: Rows<'_>,
        acc: &mut [f32],
        weights: &[f32],
        rescales: &[(usize, f32)],
        ahead: &mut Ahead,
    ) {
        assert_eq!(weights.len(), v.len());
        assert!(rescales.iter().all(|&(j, _)| j < weights.len()));
        match self {
            Kernel::Portable => {
                ahead.tick();
                accumulate_portable(v, acc, weights, rescales)
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => {
                v.check_avx2(acc.len());
                // SAFETY: checked just above.
                unsafe { avx2::accumulate(v, acc, weights, rescales, ahead) }
            }
        }
    }
}

/// [`Kernel::scores`] in plain Rust: [`dot_of`] key by key.
///
/// [`dot_of`]: super::softmax::dot_of
#[multiversion::multiversion(targets("x86_64+avx512f+avx512bw+avx2", "x86_64+avx2"))]
fn scores_portable<'a>(k: Rows<'a>, q: &[f32], scale: f32, out: &mut [f32]) {
    match k {
        Rows::Pool(kv, at, hd) => {
            for (o, &at) in out.iter_mut().zip(at) {
                *o = dot_bf16(q, &kv[at..at + hd]) * scale;
            }
        }
        Rows::Widened(buf, hd) => {
            for (o, row) in out.iter_mut().zip(buf.chunks_exact(hd)) {
                *o = dot(q, row) * scale;
            }
        }
    }
}

/// [`Kernel::accumulate`] in plain Rust, key by key.
#[multiversion::multiversion(targets("x86_64+avx512f+avx512bw+avx2", "x86_64+avx2"))]
fn accumulate_portable<'a>(
    v: Rows<'a>,
    acc: &mut [f32],
    weights: &[f32],
    rescales: &[(usize, f32)],
) {
    let mut rescales = rescales.iter().peekable();
    for (j, &w) in weights.iter().enumerate() {
        if let Some(&(_, r)) = rescales.next_if(|&&(at, _)| at == j) {
            acc.iter_mut().for_each(|a| *a *= r);
        }
        match v {
            Rows::Pool(kv, at, hd) => {
                for (a, &b) in acc.iter_mut().zip(&kv[at[j]..at[j] + hd]) {
                    *a += w * bf16_to_f32(b);
                }
            }
            Rows::Widened(buf, hd) => {
                for (a, &b) in acc.iter_mut().zip(&buf[j * hd..(j + 1) * hd]) {
                    *a += w * b;
                }
            }
        }
    }
}
