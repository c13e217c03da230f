//! GPU check: every CUDA kernel variant against the CPU reference, then the
//! goal-shaped decode benchmark.
//!
//! Run on a machine with an NVIDIA GPU through `scripts/gpu-check.sh`, which
//! finds the driver and NVRTC and passes the prepared PTX. Three parts:
//!
//! 1. **The device and the kernels**: driver and NVRTC versions and paths,
//!    clocks, L2, and per kernel its registers, local and shared memory and
//!    blocks per SM ([`report`]).
//! 2. **Correctness** ([`checks`]): both decode variants against
//!    [`kvw_kernels::cpu::paged_decode_attention`] by RMS-relative error
//!    ([`kvw_kernels::accuracy`]), refusals at the CPU's page-table index,
//!    splits forced to many pages with refused pages inside them, a batched
//!    launch, Adler-32, scrub and the streaming probe bit for bit.
//! 3. **The goal** ([`bench`]): 64 requests x 32,768 tokens, 8 KV heads,
//!    groups 1 and 8, pages of 16 and 64: decode GB/s against a
//!    device-to-device copy and a read-only streaming kernel over the same
//!    bytes, tags on and off in interleaved rounds, and one verdict line.
//!
//! Output: the console, and with `--out DIR` (or `OUT`) `gpu-check.json`
//! and `gpu-check-table.txt` there. Exit status: 0 every check passed (the
//! goal verdict is reported, not enforced), 1 a check failed, 2 an error,
//! 3 no driver or device with `--require-gpu` (without it: one line, 0).

mod bench;
mod checks;
mod report;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use serde_json::{json, Value};

use kvw_kernels::cuda::{cuda_probe, GpuError, GpuKernels};

const USAGE: &str =
    "kvw-gpu-check [--require-gpu] [--ptx-dir DIR] [--out DIR] [--batch B] [--tokens N] \
[--rounds R] [--iters N] [--skip-bench]";

pub struct Args {
    pub require_gpu: bool,
    pub ptx_dir: Option<PathBuf>,
    pub out: Option<PathBuf>,
    pub batch: usize,
    pub tokens: usize,
    pub rounds: usize,
    pub iters: usize,
    pub bench: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        require_gpu: false,
        ptx_dir: std::env::var_os("KVW_PTX_DIR").map(PathBuf::from),
        out: std::env::var_os("OUT").map(PathBuf::from),
        batch: 64,
        tokens: 32_768,
        rounds: 5,
        iters: 50,
        bench: true,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        let mut num = |name: &str, lo: usize, hi: usize| -> Result<usize, String> {
            let v = value(name)?;
            match v.parse::<usize>() {
                Ok(n) if (lo..=hi).contains(&n) => Ok(n),
                _ => Err(format!("{name} must be a number in {lo}..={hi}, not {v}")),
            }
        };
        match arg.as_str() {
            "--require-gpu" => a.require_gpu = true,
            "--ptx-dir" => a.ptx_dir = Some(value("--ptx-dir")?.into()),
            "--out" => a.out = Some(value("--out")?.into()),
            "--batch" => a.batch = num("--batch", 1, 1024)?,
            "--tokens" => a.tokens = num("--tokens", 64, 1 << 20)?,
            "--rounds" => a.rounds = num("--rounds", 1, 100)?,
            "--iters" => a.iters = num("--iters", 1, 10_000)?,
            "--skip-bench" => a.bench = false,
            "-h" | "--help" => return Err(USAGE.into()),
            other => return Err(format!("unknown argument {other}; usage: {USAGE}")),
        }
    }
    Ok(a)
}

fn write_out(args: &Args, name: &str, text: &str) {
    if let Some(dir) = &args.out {
        let path = dir.join(name);
        match std::fs::create_dir_all(dir).and_then(|_| std::fs::write(&path, text)) {
            Ok(()) => println!("wrote {}", path.display()),
            Err(e) => eprintln!("kvw-gpu-check: {}: {e}", path.display()),
        }
    }
}

fn run(args: &Args) -> Result<bool, GpuError> {
    let Some((gpu, ptx_error)) = GpuKernels::open_preferring_ptx(args.ptx_dir.as_deref())? else {
        return Ok(no_device(args, "the driver sees no CUDA device"));
    };
    if let Some(e) = &ptx_error {
        println!("prepared PTX did not load ({e}); compiled with NVRTC instead");
    }
    let device = report::device(&gpu, ptx_error.as_ref())?;

    let t = Instant::now();
    let mut rep = checks::Report::default();
    checks::attention(&gpu, &mut rep)?;
    checks::forced_splits(&gpu, &mut rep)?;
    checks::batched(&gpu, &mut rep)?;
    checks::checksum_and_scrub(&gpu, &mut rep)?;
    checks::stream_probe(&gpu, &mut rep)?;
    println!(
        "correctness: {} cases, {} failed ({:.1} s)",
        rep.cases.len(),
        rep.failures,
        t.elapsed().as_secs_f64()
    );
    let bench = if args.bench {
        let b = bench::run(&gpu, args, &mut rep)?;
        write_out(args, "gpu-check-table.txt", &b.table);
        println!("\n{}\n{}", b.table, b.verdict);
        Some(b.json)
    } else {
        None
    };
    let ok = rep.failures == 0;
    let summary: Value = json!({
        "status": if ok { "pass" } else { "fail" },
        "device": device,
        "tolerance_rms_relative": kvw_kernels::accuracy::TOLERANCE,
        "failures": rep.failures,
        "cases": rep.cases,
        "bandwidth": bench,
    });
    write_out(
        args,
        "gpu-check.json",
        &serde_json::to_string_pretty(&summary).unwrap_or_default(),
    );
    println!(
        "kvw-gpu-check: {} ({} checks failed)",
        if ok { "PASS" } else { "FAIL" },
        rep.failures
    );
    Ok(ok)
}

/// No driver or no device: an error with `--require-gpu`, else a skip.
/// Either way exactly one line.
fn no_device(args: &Args, why: &str) -> bool {
    if args.require_gpu {
        eprintln!("kvw-gpu-check: no GPU: {why} (--require-gpu)");
        return false;
    }
    println!("kvw-gpu-check: {why}; nothing checked (the CPU reference is used)");
    true
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(msg) => {
            eprintln!("kvw-gpu-check: {msg}");
            return ExitCode::from(2);
        }
    };
    let devices = cuda_probe();
    if !matches!(devices, Ok(n) if n > 0) {
        let why = devices
            .err()
            .unwrap_or_else(|| "the driver sees no CUDA device".into());
        let ok = no_device(&args, &why);
        return if ok {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(3)
        };
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
