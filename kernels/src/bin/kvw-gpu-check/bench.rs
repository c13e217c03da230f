//! The goal-shaped benchmark: decode of 64 requests x 32,768 tokens with 8
//! KV heads (8 GiB of KV, far over the L2), groups 1 and 8, pages of 16 and
//! 64, against a device-to-device copy and a read-only streaming kernel over
//! the same bytes.
//!
//! Every figure is the median of `rounds` rounds of `iters` launches timed
//! with CUDA events after warm-up launches; tags on and off alternate round
//! by round (off-on, on-off, ...), so drift in clocks or temperature falls
//! on both. Pages are scattered at random over the pool and each request's
//! pages carry its own tag. Statistics and the verdict live in
//! [`kvw_kernels::gpu_bench`], where they are tested without a GPU.

use std::fmt::Write as _;
use std::time::Instant;

use cudarc::driver::sys::CUevent_flags;
use serde_json::{json, Value};

use kvw_kernels::accuracy::{rms_relative, TOLERANCE};
use kvw_kernels::cpu::{self, PagedAttention};
use kvw_kernels::cuda::{
    DecodePlan, DecodeRequest, DecodeTuning, DecodeVariant, DevicePool, GpuError, GpuKernels,
    HEAD_DIM,
};
use kvw_kernels::gpu_bench::{gbps, summarize, verdict_line, Summary, Verdict};
use kvw_kernels::layout::KvLayout;

use crate::checks::{random_kv, Report, Rng};
use crate::Args;

const KV_HEADS: usize = 8;

pub struct Outcome {
    pub table: String,
    pub verdict: String,
    pub json: Value,
}

/// Mean milliseconds per call of `iters` calls of `f`, by CUDA events.
fn time_ms(
    gpu: &GpuKernels,
    iters: usize,
    f: &mut dyn FnMut() -> Result<(), GpuError>,
) -> Result<f64, GpuError> {
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

fn summary(rounds: &[f64]) -> Result<Summary, GpuError> {
    summarize(rounds).ok_or_else(|| GpuError::Invalid(format!("bad round times {rounds:?}")))
}

/// Warm up, then `rounds` rounds of `iters` calls; the rounds' summary.
fn rounds_of(
    gpu: &GpuKernels,
    args: &Args,
    f: &mut dyn FnMut() -> Result<(), GpuError>,
) -> Result<Summary, GpuError> {
    time_ms(gpu, 3, f)?;
    let r: Vec<f64> = (0..args.rounds)
        .map(|_| time_ms(gpu, args.iters, f))
        .collect::<Result<_, _>>()?;
    summary(&r)
}

/// Tags off and on in alternating rounds: (off, on).
fn interleaved(
    gpu: &GpuKernels,
    args: &Args,
    pool: &DevicePool,
    off: &mut DecodePlan,
    on: &mut DecodePlan,
) -> Result<(Summary, Summary), GpuError> {
    let (mut t_off, mut t_on) = (Vec::new(), Vec::new());
    let mut launch_off = || gpu.launch_decode(pool, off);
    time_ms(gpu, 3, &mut launch_off)?;
    let mut launch_on = || gpu.launch_decode(pool, on);
    time_ms(gpu, 3, &mut launch_on)?;
    for r in 0..args.rounds {
        let mut launch_off = || gpu.launch_decode(pool, off);
        let a = |f: &mut dyn FnMut() -> Result<(), GpuError>| time_ms(gpu, args.iters, f);
        if r % 2 == 0 {
            t_off.push(a(&mut launch_off)?);
            let mut launch_on = || gpu.launch_decode(pool, on);
            t_on.push(a(&mut launch_on)?);
        } else {
            let mut launch_on = || gpu.launch_decode(pool, on);
            t_on.push(a(&mut launch_on)?);
            t_off.push(a(&mut launch_off)?);
        }
    }
    Ok((summary(&t_off)?, summary(&t_on)?))
}

/// One row: (page size, group, variant, counts toward the goal).
const ROWS: [(usize, DecodeVariant, bool); 3] = [
    (1, DecodeVariant::Reference, true),
    (8, DecodeVariant::Mma, true),
    (8, DecodeVariant::Reference, false),
];

fn label(v: DecodeVariant) -> &'static str {
    match v {
        DecodeVariant::Reference => "reference",
        DecodeVariant::Mma => "mma",
    }
}

pub fn run(gpu: &GpuKernels, args: &Args, rep: &mut Report) -> Result<Outcome, GpuError> {
    let tokens = args.tokens.div_ceil(64) * 64;
    let total_tokens = tokens * args.batch;
    let slot_bytes = 2 * KV_HEADS * HEAD_DIM * 2;
    let bytes = total_tokens * slot_bytes;
    println!(
        "\nbenchmark: {} requests x {tokens} tokens, {KV_HEADS} KV heads, head_dim {HEAD_DIM}: {:.2} GiB of KV; {} rounds x {} launches",
        args.batch,
        bytes as f64 / (1u64 << 30) as f64,
        args.rounds,
        args.iters
    );

    // Random bytes (never zeros), one host chunk repeated over the pool.
    let t0 = Instant::now();
    let base = KvLayout {
        page_size: 64,
        num_kv_heads: KV_HEADS,
        head_dim: HEAD_DIM,
    };
    let mut pool = gpu.alloc_pool(base, total_tokens / 64)?;
    let total_elems = bytes / 2;
    let chunk_elems = (128usize << 20).min(total_elems);
    let chunk = random_kv(0xb16, chunk_elems);
    let mut off = 0;
    while off < total_elems {
        let n = chunk_elems.min(total_elems - off);
        let mut dst = pool.kv_mut().slice_mut(off..off + n);
        gpu.stream().memcpy_htod(&chunk[..n], &mut dst)?;
        off += n;
    }
    gpu.stream().synchronize()?;
    println!("pool filled in {:.2} s", t0.elapsed().as_secs_f64());

    // The two ceilings over the same bytes.
    let mut dst = gpu.stream().alloc_zeros::<u16>(total_elems)?;
    let copy = rounds_of(gpu, args, &mut || {
        gpu.stream().memcpy_dtod(pool.kv(), &mut dst)?;
        Ok(())
    })?;
    drop(dst);
    let copy_gbps = gbps(2 * bytes, copy.median);
    let mut sink = gpu.stream_sink()?;
    let stream = rounds_of(gpu, args, &mut || gpu.launch_stream_read(&pool, &mut sink))?;
    let stream_gbps = gbps(bytes, stream.median);
    println!(
        "device-to-device copy: {:.3} ms ({:.1} % spread), {copy_gbps:.0} GB/s read + written",
        copy.median, copy.spread_pct
    );
    println!(
        "read-only stream:      {:.3} ms ({:.1} % spread), {stream_gbps:.0} GB/s read",
        stream.median, stream.spread_pct
    );

    let mut table = String::new();
    let _ = writeln!(
        table,
        "{:>4} {:>5} {:>9} {:>6} {:>5} {:>9} {:>6} {:>6} {:>7} {:>8} {:>9} {:>6} {:>7} {:>5}",
        "page",
        "group",
        "variant",
        "splits",
        "pp/s",
        "off ms",
        "spr %",
        "GB/s",
        "% copy",
        "% stream",
        "on ms",
        "spr %",
        "tags %",
        "goal"
    );
    let mut rows = Vec::new();
    let mut goal_rows = Vec::new();
    let mut rng = Rng(0x5ca1e);
    for &page_size in &[16usize, 64] {
        let layout = KvLayout {
            page_size,
            num_kv_heads: KV_HEADS,
            head_dim: HEAD_DIM,
        };
        let pages = total_tokens / page_size;
        pool.set_layout(layout, pages)?;
        let mut perm: Vec<u32> = (0..pages as u32).collect();
        rng.shuffle(&mut perm);
        let tables: Vec<&[u32]> = perm.chunks(tokens / page_size).collect();
        let mut tags = vec![0u64; pages];
        for (i, t) in tables.iter().enumerate() {
            for &p in t.iter() {
                tags[p as usize] = 1 + i as u64;
            }
        }
        gpu.set_tags(&mut pool, &tags)?;
        for &(group, variant, goal) in &ROWS {
            let name = format!("{} g{group} p{page_size}", label(variant));
            // A launch error fails this row; the others still run.
            let mut measure = || -> Result<(), GpuError> {
                let num_q_heads = KV_HEADS * group;
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
                let tuning = DecodeTuning {
                    variant,
                    ..DecodeTuning::default()
                };
                let mut off_plan =
                    gpu.prepare_decode_tuned(&pool, &reqs, num_q_heads, scale, false, tuning)?;
                let mut on_plan =
                    gpu.prepare_decode_tuned(&pool, &reqs, num_q_heads, scale, true, tuning)?;
                let (t_off, t_on) = interleaved(gpu, args, &pool, &mut off_plan, &mut on_plan)?;
                let read = off_plan.kv_bytes_read();
                let decode_gbps = gbps(read, t_off.median);
                let v = Verdict::new(decode_gbps, copy_gbps, t_off.median, t_on.median);
                let _ = writeln!(
                    table,
                    "{page_size:>4} {group:>5} {:>9} {:>6} {:>5} {:>9.3} {:>6.2} {decode_gbps:>6.0} {:>7.1} {:>8.1} {:>9.3} {:>6.2} {:>+7.2} {:>5}",
                    label(variant),
                    off_plan.num_splits(),
                    off_plan.pages_per_split(),
                    t_off.median,
                    t_off.spread_pct,
                    v.decode_over_copy * 100.0,
                    decode_gbps / stream_gbps * 100.0,
                    t_on.median,
                    t_on.spread_pct,
                    v.tag_overhead_pct,
                    if !goal {
                        "-"
                    } else if v.pass() {
                        "pass"
                    } else {
                        "FAIL"
                    }
                );
                // Tags on read only the reader's pages: nothing refused, and
                // the outputs equal the tags-off run's bit for bit.
                let on = gpu.finish_decode(&pool, &on_plan)?;
                gpu.launch_decode(&pool, &mut off_plan)?;
                let off = gpu.finish_decode(&pool, &off_plan)?;
                let same = on
                    .iter()
                    .zip(&off)
                    .all(|(a, b)| matches!((a, b), (Ok(a), Ok(b)) if a == b));
                rep.record(
                    same,
                    json!({"case": {"kind": "bench-consistency", "row": name}, "ok": same}),
                );
                if goal {
                    spot_check(gpu, &pool, &reqs[0], num_q_heads, scale, &on[0], &name, rep)?;
                    goal_rows.push((name.clone(), v.clone()));
                }
                rows.push(json!({
                    "row": name, "page_size": page_size, "group": group, "variant": label(variant),
                    "counts_toward_goal": goal, "batch": args.batch, "tokens_per_request": tokens,
                    "kv_heads": KV_HEADS, "splits": off_plan.num_splits(),
                    "pages_per_split": off_plan.pages_per_split(), "kv_bytes_read": read,
                    "tags_off_ms": t_off.median, "tags_off_spread_pct": t_off.spread_pct,
                    "tags_off_min_ms": t_off.min, "tags_off_max_ms": t_off.max,
                    "tags_on_ms": t_on.median, "tags_on_spread_pct": t_on.spread_pct,
                    "tags_on_min_ms": t_on.min, "tags_on_max_ms": t_on.max,
                    "decode_gbps": decode_gbps, "decode_over_copy": v.decode_over_copy,
                    "decode_over_stream": decode_gbps / stream_gbps,
                    "tag_overhead_pct": v.tag_overhead_pct, "pass": v.pass(),
                }));
                Ok(())
            };
            if let Err(e) = measure() {
                let _ = writeln!(
                    table,
                    "{page_size:>4} {group:>5} {:>9} error: {e}",
                    label(variant)
                );
                rep.record(false, json!({"case": {"kind": "bench", "row": name}, "gpu_error": e.to_string(), "ok": false}));
                if goal {
                    goal_rows.push((name, Verdict::new(0.0, copy_gbps, 1.0, f64::INFINITY)));
                }
            }
        }
    }
    let verdict = verdict_line(&goal_rows);
    Ok(Outcome {
        json: json!({
            "kv_bytes": bytes, "rounds": args.rounds, "iters_per_round": args.iters,
            "copy_ms": copy.median, "copy_spread_pct": copy.spread_pct,
            "copy_gbps_read_plus_written": copy_gbps,
            "stream_ms": stream.median, "stream_spread_pct": stream.spread_pct,
            "stream_gbps_read": stream_gbps,
            "decode": rows, "verdict": verdict,
            "notes": "medians of rounds (CUDA events, mean per launch within a round); tags on/off \
                      alternate round by round; decode GB/s counts KV bytes read; copy GB/s counts \
                      bytes read + written; stream GB/s counts bytes read",
        }),
        table,
        verdict,
    })
}

/// At-scale spot check: one request of the benchmark against the CPU
/// reference (its pages gathered into a small host pool, same order).
#[allow(clippy::too_many_arguments)]
fn spot_check(
    gpu: &GpuKernels,
    pool: &DevicePool,
    req: &DecodeRequest<'_>,
    num_q_heads: usize,
    scale: f32,
    got: &Result<Vec<f32>, kvw_kernels::TagRefused>,
    name: &str,
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
    let err = match (want, got) {
        (Ok(w), Ok(g)) => rms_relative(g, &w),
        _ => f64::INFINITY,
    };
    let ok = err <= TOLERANCE;
    println!(
        "  spot check {name} vs CPU ({} tokens): RMS-relative error {err:.2e}",
        req.seq_len
    );
    rep.record(
        ok,
        json!({"case": {"kind": "bench-spot-check", "row": name, "seq_len": req.seq_len},
               "rms_relative_err": err, "ok": ok}),
    );
    Ok(())
}
