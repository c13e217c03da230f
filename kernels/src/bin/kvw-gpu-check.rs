//! GPU check: CUDA kernels against the CPU reference, then bandwidth.
//!
//! Run on a machine with an NVIDIA GPU (`scripts/gpu-check.sh` builds and runs
//! it). Two parts:
//!
//! 1. **Correctness.** Random pools, page tables and queries (page sizes 16,
//!    32, 64; GQA groups 1 to 16; tags off, on, and on with a foreign page in
//!    the read range): GPU decode attention against
//!    [`kvw_kernels::cpu::paged_decode_attention`], max abs error against a
//!    stated tolerance; a refused page must be refused at the same page-table
//!    index. Adler-32 and scrub must equal the CPU bit for bit.
//! 2. **Bandwidth.** A pool of several GiB (default 16 requests x 65,536
//!    tokens, 8 KV heads, head_dim 128: 4 GiB), pages scattered at random.
//!    The decode step is timed with CUDA events against a device-to-device
//!    copy of the same bytes, tags off and on. Decode GB/s counts KV bytes
//!    read; copy GB/s counts bytes read plus bytes written (the usual way a
//!    copy's bandwidth is quoted), so `decode/copy` is the share of the
//!    memory system's measured rate the kernel reaches. Besides the shipped
//!    [`DecodeTuning`], a few alternatives (fewer query heads per block,
//!    fewer or more blocks per SM) are timed, marked `(variant)`, so the
//!    defaults can be checked against data.
//!
//! Everything is printed and, when `OUT` is set, written to
//! `$OUT/gpu-check.json`. Exit status: 0 when every check passed (or when no
//! GPU is present: one line says so), 1 when a check failed, 2 on an error.
//!
//! ```text
//! kvw-gpu-check [--ptx-dir DIR] [--tokens N] [--batch B] [--iters N] [--skip-bench]
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use cudarc::driver::sys::CUevent_flags;
use rayon::prelude::*;
use serde_json::{json, Value};

use kvw_kernels::cpu::{self, PagedAttention};
use kvw_kernels::cuda::{
    cuda_available, nvrtc_available, DecodeRequest, DecodeTuning, DevicePool, GpuError, GpuKernels,
    HEAD_DIM,
};
use kvw_kernels::layout::{f32_to_bf16, KvLayout, TagCheck};

/// Largest accepted |GPU - CPU| of an attention output. Outputs are convex
/// combinations of bf16 values in [-1, 1]; the two sides differ only in f32
/// summation order and exp vs exp2, which stays orders of magnitude below.
const TOLERANCE: f32 = 1e-3;

struct Args {
    ptx_dir: Option<PathBuf>,
    tokens: usize,
    batch: usize,
    iters: usize,
    bench: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        ptx_dir: std::env::var_os("KVW_PTX_DIR").map(PathBuf::from),
        tokens: 65_536,
        batch: 16,
        iters: 20,
        bench: true,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut num = |name: &str| -> Result<usize, String> {
            it.next()
                .and_then(|v| v.parse().ok())
                .ok_or(format!("{name} needs a number"))
        };
        match arg.as_str() {
            "--ptx-dir" => a.ptx_dir = it.next().map(PathBuf::from),
            "--tokens" => a.tokens = num("--tokens")?,
            "--batch" => a.batch = num("--batch")?,
            "--iters" => a.iters = num("--iters")?.max(1),
            "--skip-bench" => a.bench = false,
            "-h" | "--help" => return Err(
                "kvw-gpu-check [--ptx-dir DIR] [--tokens N] [--batch B] [--iters N] [--skip-bench]"
                    .into(),
            ),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(a)
}

/// SplitMix64: small, fast, good enough for test data.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [-1, 1).
    fn unit(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }
}

fn random_kv(seed: u64, n: usize) -> Vec<u16> {
    const CHUNK: usize = 1 << 20;
    let mut v = vec![0u16; n];
    v.par_chunks_mut(CHUNK).enumerate().for_each(|(i, c)| {
        let mut r = Rng(seed ^ (i as u64).wrapping_mul(0xd6e8_feb8_6659_fd93));
        c.iter_mut().for_each(|x| *x = f32_to_bf16(r.unit()));
    });
    v
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[derive(Default)]
struct Report {
    cases: Vec<Value>,
    failures: usize,
}

impl Report {
    fn record(&mut self, ok: bool, case: Value) {
        if !ok {
            self.failures += 1;
            println!("FAIL {case}");
        }
        self.cases.push(case);
    }
}

// ------------------------------------------------------------ correctness

fn check_attention(gpu: &GpuKernels, rep: &mut Report) -> Result<(), GpuError> {
    let mut rng = Rng(0x6b76_7731);
    let mut worst = 0.0f32;
    let mut n = 0;
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
                    let want = cpu::paged_decode_attention(&a);
                    let got = gpu.paged_decode_attention(&a);
                    let case = json!({
                        "kind": "attention", "page_size": page_size, "kv_heads": kv_heads,
                        "group": group, "tags": tags_mode, "sharp": sharp,
                        "pages": table_len, "seq_len": seq_len,
                    });
                    n += 1;
                    match (want, got) {
                        (Ok(w), Ok(g)) => {
                            let err = max_abs_diff(&w, &g);
                            worst = worst.max(err);
                            let ok = err <= TOLERANCE && g.iter().all(|x| x.is_finite());
                            rep.record(ok, json!({"case": case, "max_abs_err": err, "ok": ok}));
                        }
                        (Err(w), Err(GpuError::Refused(g))) => {
                            let ok = w == g;
                            rep.record(
                                ok,
                                json!({"case": case, "cpu_refused": w.to_string(),
                                       "gpu_refused": g.to_string(), "ok": ok}),
                            );
                        }
                        (w, g) => rep.record(
                            false,
                            json!({"case": case, "cpu": format!("{:?}", w.map(|_| "output")),
                                   "gpu": format!("{:?}", g.map(|_| "output")), "ok": false}),
                        ),
                    }
                }
            }
        }
    }
    println!("attention: {n} cases, max abs error {worst:.3e} (tolerance {TOLERANCE:.0e})");
    Ok(())
}

/// Several requests in one launch on one resident pool; one of them reads
/// a foreign page and alone must fail.
fn check_batched(gpu: &GpuKernels, rep: &mut Report) -> Result<(), GpuError> {
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
    let mut plan = gpu.prepare_decode(&pool, &reqs, num_q_heads, scale, true)?;
    // Launch twice: the second launch must not see the first one's refusal
    // state or partials.
    gpu.launch_decode(&pool, &mut plan)?;
    gpu.launch_decode(&pool, &mut plan)?;
    let got = gpu.finish_decode(&pool, &plan)?;
    let mut worst = 0.0f32;
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
                let e = max_abs_diff(w, g);
                worst = worst.max(e);
                (e <= TOLERANCE, json!({"max_abs_err": e}))
            }
            (Err(w), Err(g)) => (w == g, json!({"refused": g.to_string()})),
            _ => (false, json!({"mismatch": "one side refused"})),
        };
        rep.record(
            ok,
            json!({"case": {"kind": "batched", "request": i, "seq_len": r.seq_len},
                   "detail": detail, "ok": ok}),
        );
    }
    println!(
        "batched: {} requests in one launch, max abs error {worst:.3e}, request 3 refused: {}",
        reqs.len(),
        got[3].is_err()
    );
    Ok(())
}

fn check_checksum_and_scrub(gpu: &GpuKernels, rep: &mut Report) -> Result<(), GpuError> {
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

// --------------------------------------------------------------- bandwidth

fn time_ms(
    gpu: &GpuKernels,
    iters: usize,
    mut f: impl FnMut() -> Result<(), GpuError>,
) -> Result<f64, GpuError> {
    for _ in 0..3 {
        f()?;
    }
    let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let start = gpu.context().new_event(flags)?;
    let end = gpu.context().new_event(flags)?;
    start.record(gpu.stream())?;
    for _ in 0..iters {
        f()?;
    }
    end.record(gpu.stream())?;
    Ok(start.elapsed_ms(&end)? as f64 / iters as f64)
}

fn gbps(bytes: usize, ms: f64) -> f64 {
    bytes as f64 / (ms * 1e-3) / 1e9
}

fn bench(gpu: &GpuKernels, args: &Args, rep: &mut Report) -> Result<Value, GpuError> {
    let kv_heads = 8;
    let tokens = args.tokens.div_ceil(64) * 64;
    let total_tokens = tokens * args.batch;
    let slot_bytes = 2 * kv_heads * HEAD_DIM * 2;
    let bytes = total_tokens * slot_bytes;
    println!(
        "\nbandwidth: {} requests x {} tokens, {kv_heads} KV heads, head_dim {HEAD_DIM}: {:.2} GiB of KV, {} iterations",
        args.batch,
        tokens,
        bytes as f64 / (1u64 << 30) as f64,
        args.iters
    );

    // Fill the pool on the device from one random host chunk, repeated.
    let t0 = Instant::now();
    let base = KvLayout {
        page_size: 64,
        num_kv_heads: kv_heads,
        head_dim: HEAD_DIM,
    };
    let mut pool = gpu.alloc_pool(base, total_tokens / 64)?;
    let chunk_elems = (128usize << 20).min(bytes / 2);
    let chunk = random_kv(0xb16, chunk_elems);
    let total_elems = bytes / 2;
    let mut off = 0;
    while off < total_elems {
        let n = chunk_elems.min(total_elems - off);
        let mut dst = pool.kv_mut().slice_mut(off..off + n);
        gpu.stream().memcpy_htod(&chunk[..n], &mut dst)?;
        off += n;
    }
    gpu.stream().synchronize()?;
    println!("pool filled in {:.2} s", t0.elapsed().as_secs_f64());

    // The copy: same bytes, device to device.
    let mut dst = gpu.stream().alloc_zeros::<u16>(total_elems)?;
    let copy_ms = time_ms(gpu, args.iters, || {
        gpu.stream().memcpy_dtod(pool.kv(), &mut dst)?;
        Ok(())
    })?;
    drop(dst);
    let copy_gbps = gbps(2 * bytes, copy_ms);
    println!("device-to-device copy: {copy_ms:.3} ms, {copy_gbps:.0} GB/s (read + written)");

    // The shipped tuning for groups 1, 4 and 8, then alternatives it should
    // beat: fewer query heads per block, fewer or more blocks per SM.
    let shipped = DecodeTuning::default();
    let heads = |h| DecodeTuning {
        max_heads_per_block: h,
        ..shipped
    };
    let waves = |b| DecodeTuning {
        blocks_per_sm: b,
        ..shipped
    };
    let variants = [
        (1usize, shipped),
        (4, shipped),
        (8, shipped),
        (8, heads(4)),
        (4, heads(2)),
        (1, waves(4)),
        (1, waves(64)),
        (8, waves(4)),
        (8, waves(64)),
    ];
    let mut rows = Vec::new();
    let mut rng = Rng(0x5ca1e);
    println!(
        "\n{:>5} {:>5} {:>5} {:>5} {:>7} {:>10} {:>9} {:>11} {:>10} {:>11}",
        "page",
        "group",
        "heads",
        "b/SM",
        "splits",
        "tags off",
        "GB/s",
        "decode/copy",
        "tags on",
        "tag ovh %"
    );
    for &page_size in &[16usize, 64] {
        let layout = KvLayout {
            page_size,
            num_kv_heads: kv_heads,
            head_dim: HEAD_DIM,
        };
        let pages = total_tokens / page_size;
        // Reinterpret the same bytes with this page size.
        pool.set_layout(layout, pages)?;
        let view = &mut pool;
        let mut perm: Vec<u32> = (0..pages as u32).collect();
        rng.shuffle(&mut perm);
        let per_req = tokens / page_size;
        let tables: Vec<&[u32]> = perm.chunks(per_req).collect();
        let mut tags = vec![0u64; pages];
        for (i, t) in tables.iter().enumerate() {
            for &p in t.iter() {
                tags[p as usize] = 1 + i as u64;
            }
        }
        gpu.set_tags(view, &tags)?;
        for &(group, tuning) in &variants {
            let shipped = tuning == DecodeTuning::default();
            let num_q_heads = kv_heads * group;
            let qs: Vec<Vec<f32>> = (0..args.batch)
                .map(|_| (0..num_q_heads * HEAD_DIM).map(|_| rng.unit()).collect())
                .collect();
            let reqs: Vec<DecodeRequest<'_>> = (0..args.batch)
                .map(|i| DecodeRequest {
                    page_table: tables[i],
                    seq_len: tokens,
                    q: &qs[i],
                    expected_tag: 1 + i as u64,
                })
                .collect();
            let scale = 1.0 / (HEAD_DIM as f32).sqrt();
            let mut off_plan =
                gpu.prepare_decode_tuned(view, &reqs, num_q_heads, scale, false, tuning)?;
            let mut on_plan =
                gpu.prepare_decode_tuned(view, &reqs, num_q_heads, scale, true, tuning)?;
            let off_ms = time_ms(gpu, args.iters, || gpu.launch_decode(view, &mut off_plan))?;
            let on_ms = time_ms(gpu, args.iters, || gpu.launch_decode(view, &mut on_plan))?;
            let read = off_plan.kv_bytes_read();
            let off_gbps = gbps(read, off_ms);
            let on_gbps = gbps(read, on_ms);
            let overhead = (on_ms - off_ms) / off_ms * 100.0;
            let ratio = off_gbps / copy_gbps;
            println!(
                "{page_size:>5} {group:>5} {:>5} {:>5} {:>7} {off_ms:>8.3}ms {off_gbps:>9.0} {:>10.1}% {on_ms:>8.3}ms {overhead:>10.2}{}",
                off_plan.heads_per_block(),
                tuning.blocks_per_sm,
                off_plan.num_splits(),
                ratio * 100.0,
                if shipped { "" } else { "  (variant)" }
            );
            // The tags-on run read only its own pages: nothing refused, and
            // the outputs equal the tags-off run's.
            let on = gpu.finish_decode(view, &on_plan)?;
            gpu.launch_decode(view, &mut off_plan)?;
            let off = gpu.finish_decode(view, &off_plan)?;
            let same = on.iter().zip(&off).all(|(a, b)| match (a, b) {
                (Ok(a), Ok(b)) => a == b,
                _ => false,
            });
            rep.record(
                same,
                json!({"case": {"kind": "bench-consistency", "page_size": page_size, "group": group,
                                "heads_per_block": off_plan.heads_per_block(),
                                "blocks_per_sm": tuning.blocks_per_sm},
                       "ok": same}),
            );
            if page_size == 64 && group == 8 && shipped {
                spot_check(gpu, view, &reqs[0], num_q_heads, scale, &on[0], rep)?;
            }
            rows.push(json!({
                "page_size": page_size, "group": group, "num_q_heads": num_q_heads,
                "shipped_tuning": shipped, "heads_per_block": off_plan.heads_per_block(),
                "blocks_per_sm": tuning.blocks_per_sm,
                "kv_heads": kv_heads, "batch": args.batch, "tokens_per_request": tokens,
                "splits": off_plan.num_splits(), "pages_per_split": off_plan.pages_per_split(),
                "kv_bytes_read": read,
                "tags_off_ms": off_ms, "tags_off_gbps": off_gbps,
                "tags_on_ms": on_ms, "tags_on_gbps": on_gbps,
                "decode_over_copy": ratio, "tags_on_over_copy": on_gbps / copy_gbps,
                "tag_overhead_pct": overhead,
            }));
        }
    }

    pool.set_layout(base, total_tokens / 64)?;

    // Checksum and scrub over every page of the pool (wall clock, includes
    // the page-list upload and the result read-back).
    let all: Vec<u32> = (0..pool.pages() as u32).collect();
    let _ = gpu.adler32_pages_on(&pool, &all)?;
    let t = Instant::now();
    let reps = 5;
    for _ in 0..reps {
        let _ = gpu.adler32_pages_on(&pool, &all)?;
    }
    let adler_ms = t.elapsed().as_secs_f64() * 1e3 / reps as f64;
    gpu.scrub_pages_on(&mut pool, &all)?;
    gpu.stream().synchronize()?;
    let t = Instant::now();
    for _ in 0..reps {
        gpu.scrub_pages_on(&mut pool, &all)?;
    }
    gpu.stream().synchronize()?;
    let scrub_ms = t.elapsed().as_secs_f64() * 1e3 / reps as f64;
    println!(
        "\nadler32 over the pool: {adler_ms:.3} ms, {:.0} GB/s;  scrub: {scrub_ms:.3} ms, {:.0} GB/s written",
        gbps(bytes, adler_ms),
        gbps(bytes, scrub_ms)
    );

    Ok(json!({
        "kv_bytes": bytes,
        "copy_ms": copy_ms,
        "copy_gbps_read_plus_written": copy_gbps,
        "decode": rows,
        "adler32_ms": adler_ms, "adler32_gbps": gbps(bytes, adler_ms),
        "scrub_ms": scrub_ms, "scrub_gbps": gbps(bytes, scrub_ms),
        "notes": "decode GB/s counts KV bytes read; copy GB/s counts bytes read + written; \
                  decode_over_copy = decode GB/s / copy GB/s; times are CUDA-event means per launch \
                  after 3 warm-up launches; adler32/scrub times are wall clock per call",
    }))
}

/// At-scale spot check: one request of the bandwidth run against the CPU
/// reference (its pages gathered into a small host pool, same order).
fn spot_check(
    gpu: &GpuKernels,
    pool: &DevicePool,
    req: &DecodeRequest<'_>,
    num_q_heads: usize,
    scale: f32,
    got: &Result<Vec<f32>, kvw_kernels::TagRefused>,
    rep: &mut Report,
) -> Result<(), GpuError> {
    let layout = pool.layout();
    let host = gpu.download_pages(pool, req.page_table)?;
    let table: Vec<u32> = (0..req.page_table.len() as u32).collect();
    let want = cpu::paged_decode_attention(&PagedAttention {
        layout,
        kv: &host,
        page_table: &table,
        seq_len: req.seq_len,
        q: req.q,
        num_q_heads,
        sm_scale: scale,
        tags: None,
    });
    let (ok, err) = match (want, got) {
        (Ok(w), Ok(g)) => {
            let e = max_abs_diff(&w, g);
            (e <= TOLERANCE, e)
        }
        _ => (false, f32::NAN),
    };
    println!(
        "  spot check vs CPU ({} tokens, group {}): max abs error {err:.3e}",
        req.seq_len,
        num_q_heads / layout.num_kv_heads
    );
    rep.record(
        ok,
        json!({"case": {"kind": "bench-spot-check", "seq_len": req.seq_len, "page_size": layout.page_size},
               "max_abs_err": err, "ok": ok}),
    );
    Ok(())
}

fn write_json(v: &Value) {
    if let Some(dir) = std::env::var_os("OUT") {
        let path = PathBuf::from(dir).join("gpu-check.json");
        match std::fs::write(&path, serde_json::to_string_pretty(v).unwrap_or_default()) {
            Ok(()) => println!("wrote {}", path.display()),
            Err(e) => eprintln!("kvw-gpu-check: {}: {e}", path.display()),
        }
    }
}

fn run(args: &Args) -> Result<bool, GpuError> {
    let gpu = match &args.ptx_dir {
        Some(dir) if !nvrtc_available() => {
            println!("NVRTC not found; loading PTX from {}", dir.display());
            GpuKernels::from_ptx_dir(dir)?
        }
        _ => GpuKernels::new()?,
    };
    let Some(gpu) = gpu else {
        println!("kvw-gpu-check: no CUDA driver or device found; nothing to check (the CPU reference is used)");
        write_json(&json!({"status": "no-gpu"}));
        return Ok(true);
    };
    println!(
        "device: {} ({} SMs); kernels from {}",
        gpu.device_name(),
        gpu.sm_count(),
        if args.ptx_dir.is_some() && !nvrtc_available() {
            "PTX files"
        } else {
            "NVRTC"
        }
    );

    let mut rep = Report::default();
    let t = Instant::now();
    check_attention(&gpu, &mut rep)?;
    check_batched(&gpu, &mut rep)?;
    check_checksum_and_scrub(&gpu, &mut rep)?;
    println!(
        "correctness: {} cases, {} failed ({:.1} s)",
        rep.cases.len(),
        rep.failures,
        t.elapsed().as_secs_f64()
    );
    let bench = if args.bench {
        Some(bench(&gpu, args, &mut rep)?)
    } else {
        None
    };
    let ok = rep.failures == 0;
    write_json(&json!({
        "status": if ok { "pass" } else { "fail" },
        "device": gpu.device_name(),
        "sm_count": gpu.sm_count(),
        "tolerance": TOLERANCE,
        "failures": rep.failures,
        "cases": rep.cases,
        "bandwidth": bench,
    }));
    println!("kvw-gpu-check: {}", if ok { "PASS" } else { "FAIL" });
    Ok(ok)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(msg) => {
            eprintln!("{msg}");
            return ExitCode::from(2);
        }
    };
    if !cuda_available() {
        println!("kvw-gpu-check: no CUDA driver or device found; nothing to check (the CPU reference is used)");
        write_json(&json!({"status": "no-gpu"}));
        return ExitCode::SUCCESS;
    }
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("kvw-gpu-check: error: {e}");
            ExitCode::from(2)
        }
    }
}
