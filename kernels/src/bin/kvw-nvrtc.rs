//! Compile the crate's CUDA sources to PTX with NVRTC, no GPU needed.
//!
//! The CI compile check (`scripts/ci/cuda-compile-check.sh`) runs this with
//! NVRTC from NVIDIA's PyPI wheel on the library path and hands the PTX to
//! `ptxas`. It compiles through the same code path as
//! [`kvw_kernels::cuda::GpuKernels::new`], so what passes here is what the
//! device compiles at run time.
//!
//! ```text
//! kvw-nvrtc [--arch compute_90] [--out-dir DIR] [FILE.cu ...]
//! ```
//! With no files, every embedded source is compiled; a file argument selects
//! the embedded source of that name (its text is read from disk, so edits
//! are checked without a rebuild).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use kvw_kernels::cuda::{compile_source, nvrtc_available, ptx_file_name, KernelSource, SOURCES};

fn main() -> ExitCode {
    let mut arch = "compute_90".to_string();
    let mut out_dir = PathBuf::from(".");
    let mut files: Vec<PathBuf> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--arch" => arch = args.next().unwrap_or_default(),
            "--out-dir" => out_dir = args.next().unwrap_or_default().into(),
            "-h" | "--help" => {
                println!("kvw-nvrtc [--arch compute_90] [--out-dir DIR] [FILE.cu ...]");
                return ExitCode::SUCCESS;
            }
            _ => files.push(a.into()),
        }
    }
    if !nvrtc_available() {
        eprintln!("kvw-nvrtc: libnvrtc not found; put its folder on LD_LIBRARY_PATH");
        return ExitCode::FAILURE;
    }
    if let Err(e) = std::fs::create_dir_all(&out_dir) {
        eprintln!("kvw-nvrtc: {}: {e}", out_dir.display());
        return ExitCode::FAILURE;
    }

    let selected: Vec<(KernelSource, Option<String>)> = if files.is_empty() {
        SOURCES.iter().map(|s| (*s, None)).collect()
    } else {
        let mut v = Vec::new();
        for f in &files {
            let name = f.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            let Some(src) = SOURCES.iter().find(|s| s.file == name) else {
                eprintln!(
                    "kvw-nvrtc: {} is not one of the crate's kernel sources",
                    f.display()
                );
                return ExitCode::FAILURE;
            };
            match std::fs::read_to_string(f) {
                Ok(text) => v.push((*src, Some(text))),
                Err(e) => {
                    eprintln!("kvw-nvrtc: {}: {e}", f.display());
                    return ExitCode::FAILURE;
                }
            }
        }
        v
    };

    let mut failed = false;
    for (src, text) in selected {
        // Leaked once per file for the life of this short process.
        let source: &'static str = match text {
            Some(t) => Box::leak(t.into_boxed_str()),
            None => src.source,
        };
        let src = KernelSource { source, ..src };
        match compile_source(&src, &arch) {
            Ok(ptx) => {
                let path = out_dir.join(ptx_file_name(&src));
                if let Err(e) = std::fs::write(&path, ptx.to_src()) {
                    eprintln!("kvw-nvrtc: {}: {e}", path.display());
                    failed = true;
                } else {
                    println!("kvw-nvrtc: {} -> {} ({arch})", src.file, show(&path));
                }
            }
            Err(e) => {
                eprintln!("kvw-nvrtc: {e}");
                failed = true;
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn show(p: &Path) -> String {
    p.display().to_string()
}
