//! The AVX2 kernel (head_dim a multiple of 16).
//!
//! Its element order: bf16 widens by interleaving zero half-words below
//! each value, which AVX2 does within 128-bit halves, so 16 values widen
//! to two vectors holding elements `[0..4, 8..12]` and `[4..8, 12..16]` of
//! their chunk. Queries, widened rows and accumulators are all kept in that
//! order; every product and sum still pairs the same elements.
//!
//! Scores take four keys at a time: per key, two vectors hold its sixteen
//! lane partials, each updated as `partial + q * k` chunk after chunk, as
//! [`dot_of`] does. A 4×4 transpose within each 128-bit half then gathers
//! lane `i` of the four keys into one place, and once the block's keys are
//! all through, the lanes of eight keys at a time are added onto `-0.0` in
//! order 0, 1, …, 15 — the sequential sum of [`dot_of`], eight keys per
//! vector add, with no long chain of dependent adds inside the dot
//! products. The V sums hold up to 64 accumulator elements in registers
//! over all of a block's keys, where the key-at-a-time fold loaded and
//! stored the accumulator for every key.
//!
//! Intrinsics used: loads and stores, unpacks and shuffles (which move
//! values), and separate multiplies and adds, each rounding as the scalar
//! operation does. No fused multiply-add.
//!
//! [`dot_of`]: crate::cpu::softmax::dot_of

use super::Rows;
use crate::cpu::{ahead::Ahead, fold::BLOCK};
use std::arch::x86_64::*;

/// Where the rows of a block come from: a pointer to row `j`, and the
/// widened elements `16c..16c + 16` of a row, as the two vectors of the
/// kernel's order.
trait Load: Copy {
    type Elem;
    /// Safety: `j` below the row count.
    unsafe fn row(&self, j: usize) -> *const Self::Elem;
    unsafe fn load16(row: *const Self::Elem, c: usize) -> (__m256, __m256);
    /// One of the two vectors of [`Load::load16`].
    unsafe fn load8(row: *const Self::Elem, c: usize, half: usize) -> __m256;
}

/// Rows still in bf16 in the pool.
#[derive(Clone, Copy)]
struct Bf16<'a>(&'a [u16], &'a [usize]);

impl Load for Bf16<'_> {
    type Elem = u16;
    #[inline(always)]
    unsafe fn row(&self, j: usize) -> *const u16 {
        self.0.as_ptr().add(*self.1.get_unchecked(j))
    }
    #[inline(always)]
    unsafe fn load16(row: *const u16, c: usize) -> (__m256, __m256) {
        let x = _mm256_loadu_si256(row.add(16 * c) as *const __m256i);
        let z = _mm256_setzero_si256();
        (
            _mm256_castsi256_ps(_mm256_unpacklo_epi16(z, x)),
            _mm256_castsi256_ps(_mm256_unpackhi_epi16(z, x)),
        )
    }
    #[inline(always)]
    unsafe fn load8(row: *const u16, c: usize, half: usize) -> __m256 {
        let x = _mm256_loadu_si256(row.add(16 * c) as *const __m256i);
        let z = _mm256_setzero_si256();
        _mm256_castsi256_ps(if half == 0 {
            _mm256_unpacklo_epi16(z, x)
        } else {
            _mm256_unpackhi_epi16(z, x)
        })
    }
}

/// Rows widened into a buffer, already in the kernel's order.
#[derive(Clone, Copy)]
struct F32<'a>(&'a [f32], usize);

impl Load for F32<'_> {
    type Elem = f32;
    #[inline(always)]
    unsafe fn row(&self, j: usize) -> *const f32 {
        self.0.as_ptr().add(j * self.1)
    }
    #[inline(always)]
    unsafe fn load16(row: *const f32, c: usize) -> (__m256, __m256) {
        (
            _mm256_loadu_ps(row.add(16 * c)),
            _mm256_loadu_ps(row.add(16 * c + 8)),
        )
    }
    #[inline(always)]
    unsafe fn load8(row: *const f32, c: usize, half: usize) -> __m256 {
        _mm256_loadu_ps(row.add(16 * c + 8 * half))
    }
}

/// Into or out of the kernel's order: swap elements 4..8 and 8..12 of
/// every 16-element chunk.
pub(super) fn reorder(x: &mut [f32]) {
    for c in x.chunks_exact_mut(16) {
        let (a, b) = c.split_at_mut(8);
        a[4..8].swap_with_slice(&mut b[..4]);
    }
}

/// [`super::Kernel::widen`]. Safety: AVX2 present, every row inside
/// the pool, `out` one row per offset.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn widen(rows: Rows<'_>, out: &mut [f32], ahead: &mut Ahead) {
    let Rows::Pool(kv, at, hd) = rows else {
        unreachable!("only pool rows are widened")
    };
    let src = Bf16(kv, at);
    for (j, dst) in out.chunks_exact_mut(hd).enumerate() {
        ahead.tick();
        let row = src.row(j);
        for c in 0..hd / 16 {
            let (lo, hi) = Bf16::load16(row, c);
            _mm256_storeu_ps(dst[16 * c..].as_mut_ptr(), lo);
            _mm256_storeu_ps(dst[16 * c + 8..].as_mut_ptr(), hi);
        }
    }
}

/// [`super::Kernel::scores`]. Safety: as [`widen`], rows of `q.len()`
/// elements, `out` one score per row.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn scores(
    k: Rows<'_>,
    q: &[f32],
    scale: f32,
    out: &mut [f32],
    ahead: &mut Ahead,
) {
    match k {
        Rows::Pool(kv, at, _) => scores_from(Bf16(kv, at), q, scale, out, ahead),
        Rows::Widened(buf, hd) => scores_from(F32(buf, hd), q, scale, out, ahead),
    }
}

#[target_feature(enable = "avx2")]
unsafe fn scores_from<L: Load>(k: L, q: &[f32], scale: f32, out: &mut [f32], ahead: &mut Ahead) {
    let n = out.len();
    assert!(n <= BLOCK);
    let chunks = q.len() / 16;
    let qp = q.as_ptr();
    // lanes[i][j]: lane partial i of key j. Keys are taken in groups of
    // eight (past the block's last key, it is repeated and the scores
    // dropped), so every element read below has been written.
    let mut lanes = std::mem::MaybeUninit::<Lanes>::uninit();
    let lanes = lanes.as_mut_ptr().cast::<f32>();
    let lane = |i: usize, j: usize| lanes.add(i * BLOCK + j);
    for j in (0..n.next_multiple_of(8)).step_by(4) {
        // Past the block's last key, repeat it; those scores are dropped.
        let rows = [j, j + 1, j + 2, j + 3].map(|i| k.row(i.min(n - 1)));
        let mut lo = [_mm256_setzero_ps(); 4];
        let mut hi = [_mm256_setzero_ps(); 4];
        for c in 0..chunks {
            // About one tick per key (four per group of four keys at
            // head_dim 128), spread over the group.
            if c % 2 == 0 {
                ahead.tick();
            }
            let ql = _mm256_loadu_ps(qp.add(16 * c));
            let qh = _mm256_loadu_ps(qp.add(16 * c + 8));
            for r in 0..4 {
                let (kl, kh) = L::load16(rows[r], c);
                lo[r] = _mm256_add_ps(lo[r], _mm256_mul_ps(ql, kl));
                hi[r] = _mm256_add_ps(hi[r], _mm256_mul_ps(qh, kh));
            }
        }
        // Lanes (0, 8) .. (3, 11) come from `lo`, (4, 12) .. (7, 15)
        // from `hi`.
        for (p, (a, b)) in transpose(lo).into_iter().zip(transpose(hi)).enumerate() {
            _mm_storeu_ps(lane(p, j), _mm256_castps256_ps128(a));
            _mm_storeu_ps(lane(p + 8, j), _mm256_extractf128_ps::<1>(a));
            _mm_storeu_ps(lane(p + 4, j), _mm256_castps256_ps128(b));
            _mm_storeu_ps(lane(p + 12, j), _mm256_extractf128_ps::<1>(b));
        }
    }
    lane_sums(lanes, n, scale, out);
}

/// Lane partials of the block's keys, `lanes[i * BLOCK + j]` for lane
/// `i` of key `j`, for keys `0..n` rounded up to eight.
#[repr(C, align(64))]
struct Lanes([[f32; BLOCK]; 16]);

/// The scores from the lane partials, eight keys at a time: the lanes
/// added onto -0.0 in order 0..16, then `+ tail` (no elements past the
/// last whole chunk: an empty sum, -0.0), then the scale.
#[inline(always)]
unsafe fn lane_sums(lanes: *const f32, n: usize, scale: f32, out: &mut [f32]) {
    let neg_zero = _mm256_set1_ps(-0.0);
    let scale = _mm256_set1_ps(scale);
    for j in (0..n).step_by(8) {
        let mut s = neg_zero;
        for i in 0..16 {
            s = _mm256_add_ps(s, _mm256_loadu_ps(lanes.add(i * BLOCK + j)));
        }
        let s = _mm256_mul_ps(_mm256_add_ps(s, neg_zero), scale);
        let mut eight = [0.0f32; 8];
        _mm256_storeu_ps(eight.as_mut_ptr(), s);
        let m = (n - j).min(8);
        out[j..j + m].copy_from_slice(&eight[..m]);
    }
}

/// [`super::Kernel::scores_pair`]. Safety: as [`scores`].
#[target_feature(enable = "avx2")]
pub(super) unsafe fn scores_pair(
    k: Rows<'_>,
    q: [&[f32]; 2],
    scale: f32,
    out: [&mut [f32]; 2],
    ahead: &mut Ahead,
) {
    match k {
        Rows::Pool(kv, at, _) => scores_pair_from(Bf16(kv, at), q, scale, out, ahead),
        Rows::Widened(buf, hd) => scores_pair_from(F32(buf, hd), q, scale, out, ahead),
    }
}

/// Two query heads over the same keys: each K vector loaded once for
/// both. Sixteen accumulators (two heads, four keys, two halves) do not
/// fit the registers with the operands, so the two halves of each
/// chunk (lanes 0..4 and 8..12, then 4..8 and 12..16) take turns; each
/// lane partial still sums its chunks in order.
#[target_feature(enable = "avx2")]
unsafe fn scores_pair_from<L: Load>(
    k: L,
    q: [&[f32]; 2],
    scale: f32,
    out: [&mut [f32]; 2],
    ahead: &mut Ahead,
) {
    let n = out[0].len();
    assert!(n <= BLOCK && out[1].len() == n && q[0].len() == q[1].len());
    let chunks = q[0].len() / 16;
    let qp = q.map(<[f32]>::as_ptr);
    let mut lanes = [const { std::mem::MaybeUninit::<Lanes>::uninit() }; 2];
    let lanes = lanes.each_mut().map(|l| l.as_mut_ptr().cast::<f32>());
    let lane = |r: usize, i: usize, j: usize| lanes[r].add(i * BLOCK + j);
    for j in (0..n.next_multiple_of(8)).step_by(4) {
        let rows = [j, j + 1, j + 2, j + 3].map(|i| k.row(i.min(n - 1)));
        for half in 0..2 {
            let mut acc = [[_mm256_setzero_ps(); 4]; 2];
            for c in 0..chunks {
                // Eight key passes per group of four keys: four ticks
                // per half at head_dim 128.
                if c % 2 == 0 {
                    ahead.tick();
                }
                let q0 = _mm256_loadu_ps(qp[0].add(16 * c + 8 * half));
                let q1 = _mm256_loadu_ps(qp[1].add(16 * c + 8 * half));
                for r in 0..4 {
                    let x = L::load8(rows[r], c, half);
                    acc[0][r] = _mm256_add_ps(acc[0][r], _mm256_mul_ps(q0, x));
                    acc[1][r] = _mm256_add_ps(acc[1][r], _mm256_mul_ps(q1, x));
                }
            }
            for (h, acc) in acc.into_iter().enumerate() {
                for (p, a) in transpose(acc).into_iter().enumerate() {
                    let i = p + 4 * half;
                    _mm_storeu_ps(lane(h, i, j), _mm256_castps256_ps128(a));
                    _mm_storeu_ps(lane(h, i + 8, j), _mm256_extractf128_ps::<1>(a));
                }
            }
        }
    }
    for (lanes, out) in lanes.into_iter().zip(out) {
        lane_sums(lanes, n, scale, out);
    }
}

/// Four vectors of four keys' lane partials to one vector per lane
/// pair (i, i + 8): its low half holds lane i of the four keys, its
/// high half lane i + 8 (a 4×4 transpose within each 128-bit half).
#[inline(always)]
unsafe fn transpose(a: [__m256; 4]) -> [__m256; 4] {
    let t0 = _mm256_unpacklo_ps(a[0], a[1]);
    let t1 = _mm256_unpackhi_ps(a[0], a[1]);
    let t2 = _mm256_unpacklo_ps(a[2], a[3]);
    let t3 = _mm256_unpackhi_ps(a[2], a[3]);
    [
        _mm256_shuffle_ps::<0x44>(t0, t2),
        _mm256_shuffle_ps::<0xee>(t0, t2),
        _mm256_shuffle_ps::<0x44>(t1, t3),
        _mm256_shuffle_ps::<0xee>(t1, t3),
    ]
}

/// [`super::Kernel::accumulate`]. Safety: as [`widen`], rows of
/// `acc.len()` elements, one weight per row, rescale indices below the
/// row count.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn accumulate(
    v: Rows<'_>,
    acc: &mut [f32],
    weights: &[f32],
    rescales: &[(usize, f32)],
    ahead: &mut Ahead,
) {
    match v {
        Rows::Pool(kv, at, _) => accumulate_from(Bf16(kv, at), acc, weights, rescales, ahead),
        Rows::Widened(buf, hd) => accumulate_from(F32(buf, hd), acc, weights, rescales, ahead),
    }
}

/// The accumulator is taken up to 64 elements (eight vectors) at a
/// time, held in registers over all the block's keys.
#[target_feature(enable = "avx2")]
unsafe fn accumulate_from<L: Load>(
    v: L,
    acc: &mut [f32],
    weights: &[f32],
    rescales: &[(usize, f32)],
    ahead: &mut Ahead,
) {
    let chunks = acc.len() / 16;
    let mut c = 0;
    while c < chunks {
        let ptr = acc[16 * c..].as_mut_ptr();
        c += match chunks - c {
            1 => accumulate_chunks::<L, 1>(v, ptr, c, weights, rescales, ahead),
            2 => accumulate_chunks::<L, 2>(v, ptr, c, weights, rescales, ahead),
            3 => accumulate_chunks::<L, 3>(v, ptr, c, weights, rescales, ahead),
            _ => accumulate_chunks::<L, 4>(v, ptr, c, weights, rescales, ahead),
        };
    }
}

/// Chunks `first..first + G` of the accumulator at `acc`, over all the
/// keys; returns `G`.
#[inline(always)]
unsafe fn accumulate_chunks<L: Load, const G: usize>(
    v: L,
    acc: *mut f32,
    first: usize,
    weights: &[f32],
    rescales: &[(usize, f32)],
    ahead: &mut Ahead,
) -> usize {
    let mut r = [[_mm256_setzero_ps(); 2]; G];
    for (g, r) in r.iter_mut().enumerate() {
        *r = [
            _mm256_loadu_ps(acc.add(16 * g)),
            _mm256_loadu_ps(acc.add(16 * g + 8)),
        ];
    }
    let mut j = 0;
    for &(at, f) in rescales {
        add_terms(v, &mut r, first, j..at, weights, ahead);
        let f = _mm256_set1_ps(f);
        for r in r.iter_mut() {
            *r = [_mm256_mul_ps(r[0], f), _mm256_mul_ps(r[1], f)];
        }
        j = at;
    }
    add_terms(v, &mut r, first, j..weights.len(), weights, ahead);
    for (g, r) in r.iter().enumerate() {
        _mm256_storeu_ps(acc.add(16 * g), r[0]);
        _mm256_storeu_ps(acc.add(16 * g + 8), r[1]);
    }
    G
}

/// `acc += w * v` for the keys `keys`, element by element.
#[inline(always)]
unsafe fn add_terms<L: Load, const G: usize>(
    v: L,
    r: &mut [[__m256; 2]; G],
    first: usize,
    keys: std::ops::Range<usize>,
    weights: &[f32],
    ahead: &mut Ahead,
) {
    for j in keys {
        ahead.tick();
        let w = _mm256_set1_ps(*weights.get_unchecked(j));
        let row = v.row(j);
        for (g, r) in r.iter_mut().enumerate() {
            let (lo, hi) = L::load16(row, first + g);
            *r = [
                _mm256_add_ps(r[0], _mm256_mul_ps(w, lo)),
                _mm256_add_ps(r[1], _mm256_mul_ps(w, hi)),
            ];
        }
    }
}
