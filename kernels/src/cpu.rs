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
    fn weigh(&mut self, scores: &[f32], weights: &mut [f32], rescales: &mut Vec<(usize, f32)>) {
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

/// `q · k`, each element of `k` made an f32 by `widen`: the score's sum in
/// its fixed order (sixteen lane partials, then the remainder; see the
/// module documentation). The vector kernels reproduce it exactly.
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

/// Keys per block of the fold. A block's K and V, widened, take 16 KiB
/// each at head_dim 128: they stay in the core's nearest caches while every
/// query head reads them.
const BLOCK: usize = 32;
const _: () = assert!(BLOCK.is_multiple_of(8));

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
fn fold_split(
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

/// The next block's bytes, asked for (prefetched) a few cache lines at a
/// time while the current block is folded, so that reading memory overlaps
/// the arithmetic instead of alternating with it. The kernels call
/// [`Ahead::tick`] once per key of each pass over the block (scores,
/// widening, each 64 elements of the V sums); the block's end asks for
/// whatever is left. A prefetch reads nothing and changes no value.
struct Ahead {
    /// The next line to ask for, and the end of its run of adjacent slots.
    at: *const u8,
    end: *const u8,
    /// Lines not yet asked for.
    left: usize,
    /// All the runs: (start, end) addresses; `runs[next]` comes after
    /// the current one.
    runs: [(*const u8, *const u8); BLOCK],
    next: usize,
    /// Lines asked for per tick.
    per_tick: usize,
}

impl Ahead {
    /// The lines of `slots` (each `slot_elems` values, inside `kv`),
    /// spread over `ticks`. Adjacent slots (those of one page) make one
    /// run of lines.
    fn new(kv: &[u16], slots: &[usize], slot_elems: usize, ticks: usize) -> Self {
        assert!(slots.len() <= BLOCK);
        let base = kv.as_ptr().cast::<u8>();
        let bytes = 2 * slot_elems;
        let mut runs = [(base, base); BLOCK];
        let mut count = 0;
        for &o in slots {
            // Addresses only (wrapping arithmetic): nothing is read through
            // them but prefetches, which cannot fault.
            let start = base.wrapping_add(2 * o);
            if count > 0 && runs[count - 1].1 == start {
                runs[count - 1].1 = start.wrapping_add(bytes);
            } else {
                runs[count] = (start, start.wrapping_add(bytes));
                count += 1;
            }
        }
        // The lines `ask` walks: each run's, from its start, 64 bytes apart.
        let left = runs[..count]
            .iter()
            .map(|&(start, end)| (end as usize - start as usize).div_ceil(64))
            .sum();
        Ahead {
            at: runs[0].0,
            end: runs[0].1,
            left,
            runs,
            next: 1,
            per_tick: left.div_ceil(ticks.max(1)),
        }
    }

    /// Ask for the next few lines. Inlined into the kernels' loops, with
    /// no call and no vector register: a call there would make the caller
    /// save its accumulators around it.
    #[inline(always)]
    fn tick(&mut self) {
        for _ in 0..self.per_tick.min(self.left) {
            self.ask();
        }
    }

    /// Ask for every line not yet asked for.
    fn rest(&mut self) {
        while self.left > 0 {
            self.ask();
        }
    }

    /// Ask for the next line; there is one (`left > 0`).
    #[inline(always)]
    fn ask(&mut self) {
        if self.at >= self.end {
            (self.at, self.end) = self.runs[self.next];
            self.next += 1;
        }
        prefetch(self.at);
        self.at = self.at.wrapping_add(64);
        self.left -= 1;
    }
}

/// Ask for the cache line holding `p` (a hint: it reads nothing).
#[inline(always)]
fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch does not access memory as far as the program can
    // tell, whatever the address; it cannot fault.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
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

/// f32 values starting on a cache line, so that no vector load from them
/// straddles two lines (such loads cost about a third of the loads'
/// throughput).
struct Aligned(Vec<Line>, usize);

#[derive(Debug, Clone, Copy)]
#[repr(C, align(64))]
struct Line([f32; 16]);

// SAFETY: sixteen f32 and nothing else: any bits are a valid value, no
// padding (64 bytes at alignment 64).
unsafe impl bytemuck::Zeroable for Line {}
// SAFETY: as above.
unsafe impl bytemuck::Pod for Line {}

impl Aligned {
    fn zeroed(len: usize) -> Self {
        Aligned(vec![Line([0.0; 16]); len.div_ceil(16)], len)
    }
}

impl AsRef<[f32]> for Aligned {
    fn as_ref(&self) -> &[f32] {
        &bytemuck::cast_slice(&self.0)[..self.1]
    }
}

impl AsMut<[f32]> for Aligned {
    fn as_mut(&mut self) -> &mut [f32] {
        &mut bytemuck::cast_slice_mut(&mut self.0)[..self.1]
    }
}

/// The K or V rows of a block, `head_dim` elements each.
#[derive(Debug, Clone, Copy)]
enum Rows<'a> {
    /// In the pool, still bf16, at these offsets (each checked to lie
    /// inside the pool when built, by [`Rows::pool`], the only place that
    /// builds one).
    Pool(&'a [u16], &'a [usize], usize),
    /// Widened by [`Kernel::widen`] into a buffer, one row after another.
    Widened(&'a [f32], usize),
}

impl<'a> Rows<'a> {
    fn pool(kv: &'a [u16], at: &'a [usize], head_dim: usize) -> Self {
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
enum Kernel {
    /// Plain Rust, also compiled for AVX2 and AVX-512 and picked at run
    /// time; any head_dim.
    Portable,
    /// AVX2 intrinsics; head_dim a multiple of 16.
    #[cfg(target_arch = "x86_64")]
    Avx2,
}

impl Kernel {
    /// The fastest kernel this machine runs for `head_dim`.
    fn detect(head_dim: usize) -> Kernel {
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
    fn reorder(self, x: &mut [f32]) {
        match self {
            Kernel::Portable => {}
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => avx2::reorder(x),
        }
    }

    /// Widen the bf16 rows of `kv` at offsets `at` into `out`, in the
    /// kernel's element order.
    fn widen(self, kv: &[u16], at: &[usize], head_dim: usize, out: &mut [f32], ahead: &mut Ahead) {
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
    fn scores(self, k: Rows<'_>, q: &[f32], scale: f32, out: &mut [f32], ahead: &mut Ahead) {
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
    fn scores_pair(
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
    fn accumulate(
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

/// The AVX2 kernel (head_dim a multiple of 16).
///
/// Its element order: bf16 widens by interleaving zero half-words below
/// each value, which AVX2 does within 128-bit halves, so 16 values widen
/// to two vectors holding elements `[0..4, 8..12]` and `[4..8, 12..16]` of
/// their chunk. Queries, widened rows and accumulators are all kept in that
/// order; every product and sum still pairs the same elements.
///
/// Scores take four keys at a time: per key, two vectors hold its sixteen
/// lane partials, each updated as `partial + q * k` chunk after chunk, as
/// [`dot_of`] does. A 4×4 transpose within each 128-bit half then gathers
/// lane `i` of the four keys into one place, and once the block's keys are
/// all through, the lanes of eight keys at a time are added onto `-0.0` in
/// order 0, 1, …, 15 — the sequential sum of [`dot_of`], eight keys per
/// vector add, with no long chain of dependent adds inside the dot
/// products. The V sums hold up to 64 accumulator elements in registers
/// over all of a block's keys, where the key-at-a-time fold loaded and
/// stored the accumulator for every key.
///
/// Intrinsics used: loads and stores, unpacks and shuffles (which move
/// values), and separate multiplies and adds, each rounding as the scalar
/// operation does. No fused multiply-add.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{Ahead, Rows, BLOCK};
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
    unsafe fn scores_from<L: Load>(
        k: L,
        q: &[f32],
        scale: f32,
        out: &mut [f32],
        ahead: &mut Ahead,
    ) {
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

    /// The bits of `x`, except that every NaN reads as one: which NaN an
    /// operation on two NaNs returns is not specified (Rust leaves it open,
    /// and the compiler may swap the operands of an add), so the old fold's
    /// NaN bits were never fixed either. Every other value — infinities,
    /// zeros of either sign, subnormals — is compared bit for bit.
    fn bits_of(x: f32) -> u32 {
        if x.is_nan() {
            f32::NAN.to_bits()
        } else {
            x.to_bits()
        }
    }

    /// The bits of a state: (max, sum, accumulator) per query head.
    fn state_bits(s: &SplitState) -> Vec<(u32, u32, Vec<u32>)> {
        s.0.iter()
            .map(|p| {
                let acc = p.acc.iter().map(|&x| bits_of(x)).collect();
                (bits_of(p.max), bits_of(p.sum), acc)
            })
            .collect()
    }

    /// The kernels this machine runs: each is compared, not only the one
    /// [`split_states`] picks.
    fn kernels_here(head_dim: usize) -> Vec<Kernel> {
        let mut k = vec![Kernel::Portable];
        if Kernel::detect(head_dim) != Kernel::Portable {
            k.push(Kernel::detect(head_dim));
        }
        k
    }

    /// How a random case's values are drawn.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Fill {
        /// Uniform in (-1, 1).
        Uniform,
        /// The engine's codes: K the one-hot digits of a position (a few
        /// positions only, so many keys share the top score exactly), V a
        /// one-hot token, queries the code of a position.
        Codes,
        /// K rows copies of three random rows: exact ties of scores.
        Ties,
        /// Values from a list of awkward ones: ±0, ±1, subnormal, tiny,
        /// huge (scores overflow to infinity), with uniform ones.
        Special,
        /// Uniform times 30: scores far apart, most weights underflow.
        Wide,
        /// Any bits at all, NaN and infinity included.
        Raw,
    }

    const FILLS: [Fill; 6] = [
        Fill::Uniform,
        Fill::Codes,
        Fill::Ties,
        Fill::Special,
        Fill::Wide,
        Fill::Raw,
    ];

    /// One random call: pool, table, queries and shape.
    struct Case {
        layout: KvLayout,
        kv: Vec<u16>,
        table: Vec<u32>,
        seq_len: usize,
        num_q_heads: usize,
        sm_scale: f32,
        queries: Vec<Vec<f32>>,
    }

    impl Case {
        fn at<'a>(&'a self, q: &'a [f32]) -> PagedAttention<'a> {
            PagedAttention {
                layout: self.layout,
                kv: &self.kv,
                page_table: &self.table,
                seq_len: self.seq_len,
                q,
                num_q_heads: self.num_q_heads,
                sm_scale: self.sm_scale,
                tags: None,
            }
        }
    }

    /// One-hot digits of `pos` (four digits of base `head_dim / 4`), as
    /// the engine codes positions at head_dim 128.
    fn code(pos: usize, head_dim: usize) -> Vec<f32> {
        let base = (head_dim / 4).max(1);
        let mut k = vec![0.0; head_dim];
        let mut p = pos;
        for j in 0..4.min(head_dim) {
            k[j * base + p % base] = 1.0;
            p /= base;
        }
        k
    }

    fn special(rng: &mut impl Rng) -> f32 {
        const VALUES: [f32; 10] = [
            0.0,
            -0.0,
            1.0,
            -1.0,
            1e-40,
            -3e-39,
            f32::MIN_POSITIVE,
            1e30,
            -2e38,
            0.5,
        ];
        if rng.random_bool(0.5) {
            VALUES[rng.random_range(0..VALUES.len())]
        } else {
            rng.random_range(-1.0..1.0)
        }
    }

    fn random_case(seed: u64, fill: Fill) -> Case {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let head_dim = [16, 32, 48, 64, 128, 128, 8, 20, 40][rng.random_range(0..9)];
        let num_kv_heads = rng.random_range(1..=3);
        let num_q_heads = num_kv_heads * [1, 1, 2, 3, 4][rng.random_range(0..5)];
        // Now and then more than one split (small pages keep it cheap).
        let (page_size, used) = if rng.random_bool(0.15) {
            (
                rng.random_range(1..=3),
                PAGES_PER_SPLIT + rng.random_range(1..70),
            )
        } else {
            (rng.random_range(1..=64), rng.random_range(1..=24))
        };
        let layout = KvLayout {
            page_size,
            num_kv_heads,
            head_dim,
        };
        let pool = used + rng.random_range(0..3);
        let mut table: Vec<u32> = (0..pool as u32).collect();
        for i in (1..table.len()).rev() {
            table.swap(i, rng.random_range(0..=i));
        }
        table.truncate(used);
        // Ending anywhere in the last page.
        let seq_len = (used - 1) * page_size + rng.random_range(1..=page_size);
        let bf = |x: f32| f32_to_bf16(x);
        let protos: Vec<Vec<u16>> = (0..3)
            .map(|_| {
                (0..head_dim)
                    .map(|_| bf(rng.random_range(-1.0..1.0)))
                    .collect()
            })
            .collect();
        let mut kv = vec![0u16; pool * layout.page_elems()];
        for page in 0..pool {
            // Some pages stay zero.
            if rng.random_bool(0.1) {
                continue;
            }
            for slot in 0..page_size {
                for h in 0..num_kv_heads {
                    let ko = layout.k_offset(page, slot, h);
                    let vo = layout.v_offset(page, slot, h);
                    for d in 0..head_dim {
                        let (k, v) = match fill {
                            Fill::Uniform => (
                                bf(rng.random_range(-1.0..1.0)),
                                bf(rng.random_range(-1.0..1.0)),
                            ),
                            Fill::Codes | Fill::Ties => (0, 0),
                            Fill::Special => (bf(special(&mut rng)), bf(special(&mut rng))),
                            Fill::Wide => (
                                bf(rng.random_range(-30.0..30.0)),
                                bf(rng.random_range(-30.0..30.0)),
                            ),
                            Fill::Raw => (rng.random(), rng.random()),
                        };
                        kv[ko + d] = k;
                        kv[vo + d] = v;
                    }
                    match fill {
                        Fill::Codes => {
                            let k = code(rng.random_range(0..6), head_dim);
                            for (x, y) in kv[ko..ko + head_dim].iter_mut().zip(k) {
                                *x = bf(y);
                            }
                            if head_dim > 0 {
                                kv[vo + rng.random_range(0..head_dim)] = bf(1.0);
                            }
                        }
                        Fill::Ties => {
                            let k = &protos[rng.random_range(0..3)];
                            kv[ko..ko + head_dim].copy_from_slice(k);
                            for x in &mut kv[vo..vo + head_dim] {
                                *x = bf(rng.random_range(-1.0..1.0));
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        let count = [1, 2, 3, 5, 20][rng.random_range(0..5)];
        let queries = (0..count)
            .map(|_| {
                (0..num_q_heads)
                    .flat_map(|_| match fill {
                        Fill::Codes => code(rng.random_range(0..6), head_dim),
                        Fill::Special | Fill::Raw => {
                            (0..head_dim).map(|_| special(&mut rng)).collect()
                        }
                        _ => (0..head_dim).map(|_| rng.random_range(-2.0..2.0)).collect(),
                    })
                    .collect()
            })
            .collect();
        let sm_scale = match fill {
            Fill::Codes => 8.0,
            _ => [1.0, 0.5, 0.088, 8.0, 1e-3][rng.random_range(0..5)],
        };
        Case {
            layout,
            kv,
            table,
            seq_len,
            num_q_heads,
            sm_scale,
            queries,
        }
    }

    /// Every way into the fold — one query, several queries, a range of
    /// splits, the whole call — on every kernel here, against the old
    /// fold, bit for bit.
    fn assert_matches_reference(c: &Case, what: &str) {
        let refs: Vec<&[f32]> = c.queries.iter().map(Vec::as_slice).collect();
        let a = c.at(&c.queries[0]);
        let splits = split_count(&a);
        assert_eq!(splits, reference::split_count(&a));
        let want_bits = |states: &[Vec<reference::SplitState>]| {
            states
                .iter()
                .map(|s| s.iter().map(reference::state_bits).collect::<Vec<_>>())
                .collect::<Vec<_>>()
        };
        let got_bits = |states: &[Vec<SplitState>]| {
            states
                .iter()
                .map(|s| s.iter().map(state_bits).collect::<Vec<_>>())
                .collect::<Vec<_>>()
        };
        let bits = |v: &[f32]| v.iter().map(|&x| bits_of(x)).collect::<Vec<_>>();
        let many = want_bits(&reference::split_states(&a, 0..splits, &refs));
        let none = reference::split_states(&a, 0..splits, &[]);
        let got = split_states(&a, 0..splits, &[]);
        assert!(
            none.iter().map(Vec::len).eq(got.iter().map(Vec::len)),
            "{what}: no queries"
        );
        let later = 1.min(splits)..splits;
        let many_later = want_bits(&reference::split_states(&a, later.clone(), &refs));
        for kernel in kernels_here(c.layout.head_dim) {
            let got = got_bits(&split_states_with(&a, 0..splits, &refs, kernel));
            assert!(got == many, "{what}: {kernel:?}, {} queries", refs.len());
            let got = got_bits(&split_states_with(&a, later.clone(), &refs, kernel));
            assert!(got == many_later, "{what}: {kernel:?}, splits {later:?}");
        }
        for q in refs.iter().take(3) {
            let a = c.at(q);
            let one = want_bits(&reference::split_states(&a, 0..splits, &[q]));
            for kernel in kernels_here(c.layout.head_dim) {
                let got = got_bits(&split_states_with(&a, 0..splits, &[q], kernel));
                assert!(got == one, "{what}: {kernel:?}, one query");
            }
            let want = reference::paged_decode_attention(&a).unwrap();
            let got = paged_decode_attention(&a).unwrap();
            assert!(bits(&got) == bits(&want), "{what}: output");
        }
    }

    /// Random shapes (head_dim 8 to 128, multiples of 16 or not, 1 to 3 KV
    /// heads, GQA groups up to 4, pages of 1 to 64 slots, reads ending
    /// mid-page, one split or several, 1 to 20 queries) and random values
    /// of every kind: the folds give the old fold's bits.
    #[test]
    fn folds_match_the_old_fold_bit_for_bit() {
        // Fewer cases where the random number generator is not optimised
        // (it, not the folds, takes the time there).
        let cases = if cfg!(debug_assertions) { 200 } else { 600 };
        for seed in 0..cases {
            let fill = FILLS[seed as usize % FILLS.len()];
            let c = random_case(seed, fill);
            let what = format!(
                "seed {seed}, {fill:?}, {:?}, {} q heads, seq_len {}",
                c.layout, c.num_q_heads, c.seq_len
            );
            assert_matches_reference(&c, &what);
        }
    }

    /// The engine's shape (pages of 64, head_dim 128, one KV head, one query
    /// head) and its values: positional codes, where many keys tie for the
    /// top score, and twenty queries at once as lookahead asks them, over
    /// two splits.
    #[test]
    fn engine_shape_with_positional_codes_gives_the_old_bits() {
        let layout = KvLayout {
            page_size: 64,
            num_kv_heads: 1,
            head_dim: 128,
        };
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(17);
        let pages = PAGES_PER_SPLIT + 20;
        let seq_len = pages * 64 - 23;
        let mut kv = vec![0u16; pages * layout.page_elems()];
        let mut table: Vec<u32> = (0..pages as u32).collect();
        for i in (1..table.len()).rev() {
            table.swap(i, rng.random_range(0..=i));
        }
        for pos in 0..seq_len {
            let page = table[pos / 64] as usize;
            let ko = layout.k_offset(page, pos % 64, 0);
            let vo = layout.v_offset(page, pos % 64, 0);
            // Positions repeat every 700, so every query's top score is
            // shared by many keys.
            for (x, y) in kv[ko..ko + 128].iter_mut().zip(code(pos % 700, 128)) {
                *x = f32_to_bf16(y);
            }
            kv[vo + rng.random_range(32..127)] = f32_to_bf16(1.0);
        }
        let queries: Vec<Vec<f32>> = (0..20).map(|i| code(1 + 31 * i, 128)).collect();
        let c = Case {
            layout,
            kv,
            table,
            seq_len,
            num_q_heads: 1,
            sm_scale: 8.0,
            queries,
        };
        assert_matches_reference(&c, "engine codes");
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            assert_eq!(Kernel::detect(128), Kernel::Avx2);
        }
    }

    /// The fold as it was before it took keys a block at a time, kept
    /// verbatim (less the public struct and the checksum and scrub kernels,
    /// which did not change): every output of the kernels above must match
    /// it bit for bit.
    mod reference {
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
        fn fold_one<'a>(
            a: &PagedAttention<'a>,
            first: usize,
            pages: &[u32],
            q: &[f32],
        ) -> SplitState {
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
        // (as `tests::state_bits` reads them).
        pub fn state_bits(s: &SplitState) -> Vec<(u32, u32, Vec<u32>)> {
            s.0.iter()
                .map(|p| {
                    let acc = p.acc.iter().map(|&x| super::bits_of(x)).collect();
                    (super::bits_of(p.max), super::bits_of(p.sum), acc)
                })
                .collect()
        }
    }
}
