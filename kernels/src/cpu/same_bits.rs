//! The fold against the fold it replaced ([`reference`], kept verbatim):
//! every way in (one query, several, a range of splits, the whole call), on
//! every kernel this machine has, on random shapes and values of every kind
//! and on the engine's positional codes, bit for bit (NaNs compared as NaN).

use super::*;
use crate::layout::f32_to_bf16;
use rand::{Rng, SeedableRng};

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
                    Fill::Special | Fill::Raw => (0..head_dim).map(|_| special(&mut rng)).collect(),
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

mod reference;
