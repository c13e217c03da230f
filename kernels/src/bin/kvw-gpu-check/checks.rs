//! Correctness on the device: both decode variants against the CPU
//! reference, and the page kernels bit for bit.
//!
//! Decode outputs are compared by RMS-relative error
//! ([`kvw_kernels::accuracy`]); a refused request must be refused at the
//! CPU's page-table index. With 132 SMs the default sizing gives a
//! single-request case one page per split, so [`forced_splits`] caps the
//! split count to put many pages, and refused pages, inside one split.

use rayon::prelude::*;
use serde_json::{json, Value};

use kvw_kernels::accuracy::{rms_relative, TOLERANCE};
use kvw_kernels::cpu::{self, PagedAttention};
use kvw_kernels::cuda::{
    DecodeRequest, DecodeTuning, DecodeVariant, GpuError, GpuKernels, HEAD_DIM,
};
use kvw_kernels::layout::{f32_to_bf16, KvLayout, TagCheck};

/// Every case's record, and the failures among them.
#[derive(Default)]
pub struct Report {
    pub cases: Vec<Value>,
    pub failures: usize,
}

impl Report {
    pub fn record(&mut self, ok: bool, case: Value) {
        if !ok {
            self.failures += 1;
            println!("FAIL {case}");
        }
        self.cases.push(case);
    }
}

/// SplitMix64: small, fast, good enough for test data.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [-1, 1).
    pub fn unit(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }
}

/// `n` random bf16 values in [-1, 1) (never zeros: they hide unwritten
/// outputs and wrong indexing).
pub fn random_kv(seed: u64, n: usize) -> Vec<u16> {
    const CHUNK: usize = 1 << 20;
    let mut v = vec![0u16; n];
    v.par_chunks_mut(CHUNK).enumerate().for_each(|(i, c)| {
        let mut r = Rng(seed ^ (i as u64).wrapping_mul(0xd6e8_feb8_6659_fd93));
        c.iter_mut().for_each(|x| *x = f32_to_bf16(r.unit()));
    });
    v
}

fn variant_name(v: DecodeVariant) -> &'static str {
    match v {
        DecodeVariant::Reference => "reference",
        DecodeVariant::Mma => "mma",
    }
}

/// The variants that run a group: the tensor-core one only for multiples of 8.
fn variants(group: usize) -> Vec<DecodeVariant> {
    if group.is_multiple_of(8) {
        vec![DecodeVariant::Reference, DecodeVariant::Mma]
    } else {
        vec![DecodeVariant::Reference]
    }
}

/// One host-slice decode on the GPU against the CPU; records the case.
fn compare(
    gpu: &GpuKernels,
    a: &PagedAttention<'_>,
    tuning: DecodeTuning,
    case: Value,
    worst: &mut f64,
    rep: &mut Report,
) -> Result<(), GpuError> {
    let want = cpu::paged_decode_attention(a);
    let got = gpu.paged_decode_attention_tuned(a, tuning);
    match (want, got) {
        (Ok(w), Ok(g)) => {
            let err = rms_relative(&g, &w);
            *worst = worst.max(err);
            let ok = err <= TOLERANCE;
            rep.record(ok, json!({"case": case, "rms_relative_err": err, "ok": ok}));
        }
        (Err(w), Err(GpuError::Refused(g))) => {
            let ok = w == g;
            rep.record(
                ok,
                json!({"case": case, "cpu_refused": w.to_string(), "gpu_refused": g.to_string(), "ok": ok}),
            );
        }
        // A launch error fails this case; the run goes on to the others.
        (_, Err(e)) if !matches!(e, GpuError::Refused(_)) => rep.record(
            false,
            json!({"case": case, "gpu_error": e.to_string(), "ok": false}),
        ),
        (w, g) => rep.record(
            false,
            json!({"case": case, "cpu": format!("{:?}", w.map(|_| "output")),
                   "gpu": format!("{:?}", g.map(|_| "output")), "ok": false}),
        ),
    }
    Ok(())
}

/// Cases run and worst RMS-relative error per variant.
#[derive(Default)]
struct Tally {
    cases: usize,
    worst: [f64; 2],
}

impl Tally {
    /// Run `a` with every variant its group has (capped at `max_splits`
    /// splits); `case` describes it for the report, given the variant.
    fn each_variant(
        &mut self,
        gpu: &GpuKernels,
        a: &PagedAttention<'_>,
        max_splits: usize,
        case: impl Fn(&str) -> Value,
        rep: &mut Report,
    ) -> Result<(), GpuError> {
        for v in variants(a.num_q_heads / a.layout.num_kv_heads) {
            let tuning = DecodeTuning {
                variant: v,
                max_splits,
                ..DecodeTuning::default()
            };
            self.cases += 1;
            compare(
                gpu,
                a,
                tuning,
                case(variant_name(v)),
                &mut self.worst[v as usize],
                rep,
            )?;
        }
        Ok(())
    }

    fn print(&self, what: &str) {
        println!(
            "{what}: {} cases, RMS-relative error: reference {:.2e}, mma {:.2e} (tolerance {TOLERANCE:.0e})",
            self.cases, self.worst[0], self.worst[1]
        );
    }
}

/// Random small cases: page sizes 16, 32, 64; groups 1 to 16; tags off, on,
/// and on with foreign pages inside the read range and just past it.
pub fn attention(gpu: &GpuKernels, rep: &mut Report) -> Result<(), GpuError> {
    let mut rng = Rng(0x6b76_7731);
    let mut tally = Tally::default();
    for &page_size in &[16usize, 32, 64] {
        for &(kv_heads, group) in &[(2usize, 1usize), (2, 2), (1, 3), (2, 4), (2, 8), (1, 16)] {
            for &tags_mode in &["off", "on", "refused"] {
                for &sharp in &[false, true] {
                    let layout = KvLayout {
                        page_size,
                        num_kv_heads: kv_heads,
                        head_dim: HEAD_DIM,
                    };
                    let pool_pages = 96;
                    let kv = random_kv(rng.next_u64(), pool_pages * layout.page_elems());
                    let mut table: Vec<u32> = (0..pool_pages as u32).collect();
                    rng.shuffle(&mut table);
                    let table_len = 1 + rng.below(64);
                    table.truncate(table_len);
                    // Mostly a partial last page; sometimes past the table.
                    let seq_len = match rng.below(8) {
                        0 => table_len * page_size + 7,
                        1 => 1,
                        _ => (table_len - 1) * page_size + 1 + rng.below(page_size),
                    };
                    let used = seq_len.min(table_len * page_size).div_ceil(page_size);
                    let reader = 0x5eed_0000 + rng.below(1000) as u64;
                    let mut tags = vec![reader; pool_pages];
                    // A foreign page outside the read range must not matter.
                    if used < table_len {
                        tags[table[used] as usize] = 0xf0e1;
                    }
                    if tags_mode == "refused" {
                        let idx = rng.below(used);
                        tags[table[idx] as usize] = 0xbad;
                        if rng.below(2) == 0 && idx + 1 < used {
                            tags[table[idx + 1 + rng.below(used - idx - 1)] as usize] = 0xbad2;
                        }
                    }
                    let num_q_heads = kv_heads * group;
                    let q: Vec<f32> = (0..num_q_heads * HEAD_DIM).map(|_| rng.unit()).collect();
                    let a = PagedAttention {
                        layout,
                        kv: &kv,
                        page_table: &table,
                        seq_len,
                        q: &q,
                        num_q_heads,
                        sm_scale: if sharp {
                            1.0
                        } else {
                            1.0 / (HEAD_DIM as f32).sqrt()
                        },
                        tags: (tags_mode != "off").then_some(TagCheck {
                            page_tags: &tags,
                            expected: reader,
                        }),
                    };
                    let case = |v: &str| {
                        json!({
                            "kind": "attention", "variant": v, "page_size": page_size,
                            "kv_heads": kv_heads, "group": group, "tags": tags_mode, "sharp": sharp,
                            "pages": table_len, "seq_len": seq_len,
                        })
                    };
                    tally.each_variant(gpu, &a, usize::MAX, case, rep)?;
                }
            }
        }
    }
    tally.print("attention");
    Ok(())
}

/// Long requests with the split count capped at 1, 2 and 3, so that every
/// split walks hundreds of pages through the copy ring, with and without
/// refused pages in the middle of a split.
pub fn forced_splits(gpu: &GpuKernels, rep: &mut Report) -> Result<(), GpuError> {
    let mut rng = Rng(0x5b117);
    let mut tally = Tally::default();
    for &page_size in &[16usize, 64] {
        let layout = KvLayout {
            page_size,
            num_kv_heads: 2,
            head_dim: HEAD_DIM,
        };
        let pool_pages = 8192 / page_size * 2;
        let kv = random_kv(rng.next_u64(), pool_pages * layout.page_elems());
        for &max_splits in &[1usize, 2, 3] {
            for &refused in &[false, true] {
                let mut table: Vec<u32> = (0..pool_pages as u32).collect();
                rng.shuffle(&mut table);
                let seq_len = 6000 + rng.below(2000);
                let used = seq_len.div_ceil(page_size);
                table.truncate(used);
                let reader = 77;
                let mut tags = vec![reader; pool_pages];
                // Well inside a split: not its first page, not its last.
                let per_split = used.div_ceil(max_splits);
                let bad = per_split / 2 + rng.below(per_split / 4);
                if refused {
                    tags[table[bad] as usize] = 0xbad;
                }
                let q: Vec<f32> = (0..16 * HEAD_DIM).map(|_| rng.unit()).collect();
                let a = PagedAttention {
                    layout,
                    kv: &kv,
                    page_table: &table,
                    seq_len,
                    q: &q,
                    num_q_heads: 16,
                    sm_scale: 1.0 / (HEAD_DIM as f32).sqrt(),
                    tags: Some(TagCheck {
                        page_tags: &tags,
                        expected: reader,
                    }),
                };
                let case = |v: &str| {
                    json!({
                        "kind": "forced-splits", "variant": v, "page_size": page_size,
                        "max_splits": max_splits, "pages": used, "seq_len": seq_len,
                        "refused_index": refused.then_some(bad),
                    })
                };
                tally.each_variant(gpu, &a, max_splits, case, rep)?;
            }
        }
    }
    tally.print("forced splits (1 to 3 splits of 31 to 500 pages)");
    Ok(())
}
/// Several requests in one launch on one resident pool; one of them reads
/// a foreign page and alone must fail.
pub fn batched(gpu: &GpuKernels, rep: &mut Report) -> Result<(), GpuError> {
    let mut rng = Rng(0xba7c);
    let layout = KvLayout {
        page_size: 32,
        num_kv_heads: 4,
        head_dim: HEAD_DIM,
    };
    let pool_pages = 400;
    let kv = random_kv(rng.next_u64(), pool_pages * layout.page_elems());
    let mut perm: Vec<u32> = (0..pool_pages as u32).collect();
    rng.shuffle(&mut perm);
    let lens = [1usize, 33, 1000, 4000, 7 * 32, 0];
    let mut tables = Vec::new();
    let mut tags = vec![0u64; pool_pages];
    let mut at = 0;
    for (i, &len) in lens.iter().enumerate() {
        let pages = len.div_ceil(32).max(1);
        let t = perm[at..at + pages].to_vec();
        at += pages;
        for &p in &t {
            tags[p as usize] = 100 + i as u64;
        }
        tables.push(t);
    }
    // Request 3 reads one of request 2's pages at index 17.
    let stolen = tables[2][5];
    tables[3][17] = stolen;
    let num_q_heads = 16;
    let qs: Vec<Vec<f32>> = lens
        .iter()
        .map(|_| (0..num_q_heads * HEAD_DIM).map(|_| rng.unit()).collect())
        .collect();
    let pool = gpu.upload_pool(layout, &kv, Some(&tags))?;
    let reqs: Vec<DecodeRequest<'_>> = lens
        .iter()
        .enumerate()
        .map(|(i, &len)| DecodeRequest {
            page_table: &tables[i],
            seq_len: len,
            q: &qs[i],
            expected_tag: 100 + i as u64,
        })
        .collect();
    let scale = 1.0 / (HEAD_DIM as f32).sqrt();
    for v in variants(8) {
        let tuning = DecodeTuning {
            variant: v,
            ..DecodeTuning::default()
        };
        let mut plan = gpu.prepare_decode_tuned(&pool, &reqs, num_q_heads, scale, true, tuning)?;
        // Launch twice: the second launch must not see the first one's
        // refusal state, partials or arrival counts.
        gpu.launch_decode(&pool, &mut plan)?;
        gpu.launch_decode(&pool, &mut plan)?;
        let got = gpu.finish_decode(&pool, &plan)?;
        let mut worst = 0.0f64;
        for (i, r) in reqs.iter().enumerate() {
            let want = cpu::paged_decode_attention(&PagedAttention {
                layout,
                kv: &kv,
                page_table: r.page_table,
                seq_len: r.seq_len,
                q: r.q,
                num_q_heads,
                sm_scale: scale,
                tags: Some(TagCheck {
                    page_tags: &tags,
                    expected: r.expected_tag,
                }),
            });
            let (ok, detail) = match (&want, &got[i]) {
                (Ok(w), Ok(g)) => {
                    let e = rms_relative(g, w);
                    worst = worst.max(e);
                    (e <= TOLERANCE, json!({"rms_relative_err": e}))
                }
                (Err(w), Err(g)) => (w == g, json!({"refused": g.to_string()})),
                _ => (false, json!({"mismatch": "one side refused"})),
            };
            rep.record(
                ok,
                json!({"case": {"kind": "batched", "variant": variant_name(plan.variant()),
                                "request": i, "seq_len": r.seq_len},
                       "detail": detail, "ok": ok}),
            );
        }
        println!(
            "batched ({}): {} requests in one launch, RMS-relative error {worst:.2e}, request 3 refused: {}",
            variant_name(plan.variant()),
            reqs.len(),
            got[3].is_err()
        );
    }
    Ok(())
}

pub fn checksum_and_scrub(gpu: &GpuKernels, rep: &mut Report) -> Result<(), GpuError> {
    let mut rng = Rng(0xad1e);
    let mut n = 0;
    for &(page_size, kv_heads, head_dim) in
        &[(16usize, 1usize, 32usize), (32, 2, 128), (64, 8, 128)]
    {
        let layout = KvLayout {
            page_size,
            num_kv_heads: kv_heads,
            head_dim,
        };
        let pool_pages = 64;
        let mut kv = random_kv(rng.next_u64(), pool_pages * layout.page_elems());
        // Some saturated bytes to stress the modular sums.
        kv[..layout.page_elems()].fill(0xffff);
        for len in [0usize, 1, 2, 17, 64, 150] {
            let pages: Vec<u32> = (0..len).map(|_| rng.below(pool_pages) as u32).collect();
            let want = cpu::adler32_pages(layout, &kv, &pages);
            let got = gpu.adler32_pages(layout, &kv, &pages)?;
            n += 1;
            rep.record(
                want == got,
                json!({"case": {"kind": "adler32", "page_bytes": layout.page_bytes(), "pages": len},
                       "cpu": format!("{want:#010x}"), "gpu": format!("{got:#010x}"),
                       "ok": want == got}),
            );
        }
        let pages: Vec<u32> = (0..20).map(|_| rng.below(pool_pages) as u32).collect();
        let mut want = kv.clone();
        cpu::scrub_pages(layout, &mut want, &pages);
        let mut got = kv.clone();
        gpu.scrub_pages(layout, &mut got, &pages)?;
        n += 1;
        let ok = want == got;
        rep.record(
            ok,
            json!({"case": {"kind": "scrub", "page_bytes": layout.page_bytes(), "pages": pages.len()},
                   "ok": ok}),
        );
    }
    println!("adler32 + scrub: {n} cases");
    Ok(())
}

/// The streaming probe reads every byte: the XOR of its sink equals the
/// XOR of the pool's 32-bit words.
pub fn stream_probe(gpu: &GpuKernels, rep: &mut Report) -> Result<(), GpuError> {
    let layout = KvLayout {
        page_size: 16,
        num_kv_heads: 8,
        head_dim: HEAD_DIM,
    };
    let kv = random_kv(0x57ea, 300 * layout.page_elems());
    let want = kv
        .chunks(2)
        .fold(0u32, |x, w| x ^ (w[0] as u32 | (w[1] as u32) << 16));
    let pool = gpu.upload_pool(layout, &kv, None)?;
    let mut sink = gpu.stream_sink()?;
    gpu.launch_stream_read(&pool, &mut sink)?;
    let got = gpu
        .stream()
        .clone_dtoh(&sink)?
        .iter()
        .fold(0u32, |x, w| x ^ w);
    rep.record(
        got == want,
        json!({"case": {"kind": "stream-read", "bytes": pool.bytes()},
               "cpu": format!("{want:#010x}"), "gpu": format!("{got:#010x}"), "ok": got == want}),
    );
    println!(
        "stream read: XOR over {} bytes {}",
        pool.bytes(),
        if got == want { "matches" } else { "DIFFERS" }
    );
    Ok(())
}
