//! What ran where: the device, the driver and NVRTC (versions and the files
//! actually loaded), and each kernel's registers, local and shared memory
//! and blocks per SM, printed first so that a failed run still says it.

use serde_json::{json, Value};

use kvw_kernels::cuda::{nvrtc_version, GpuError, GpuKernels};

/// The shared libraries of this process whose file name contains `name`
/// (from /proc/self/maps: the files really loaded, not the ones searched).
fn loaded(name: &str) -> Vec<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let mut v: Vec<String> = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| {
            p.rsplit('/')
                .next()
                .is_some_and(|f| f.starts_with(&format!("lib{name}")))
        })
        .map(str::to_string)
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Print the device and kernel report; return it as JSON.
pub fn device(gpu: &GpuKernels, ptx_error: Option<&GpuError>) -> Result<Value, GpuError> {
    let d = gpu.device_info()?;
    let nvrtc = nvrtc_version();
    let nvrtc_files = loaded("nvrtc");
    let cuda_files = loaded("cuda");
    println!(
        "device: {} (sm_{}{}), {} SMs, {:.1} GiB",
        d.name,
        d.compute_capability.0,
        d.compute_capability.1,
        d.sm_count,
        d.total_memory_bytes as f64 / (1u64 << 30) as f64
    );
    println!(
        "clocks: SM {} MHz, memory {} MHz x {} bits ({:.0} GB/s peak); L2 {} MiB; shared memory {} KiB per SM",
        d.sm_clock_khz / 1000,
        d.memory_clock_khz / 1000,
        d.memory_bus_bits,
        d.peak_dram_gbps(),
        d.l2_bytes >> 20,
        d.shared_per_sm_bytes >> 10
    );
    println!(
        "driver: CUDA {}.{} ({}); NVRTC {} ({}); kernels from {}",
        d.driver_version / 1000,
        d.driver_version % 1000 / 10,
        cuda_files.join(", "),
        nvrtc.map_or("not found".to_string(), |(a, b)| format!("{a}.{b}")),
        if nvrtc_files.is_empty() {
            "not loaded".to_string()
        } else {
            nvrtc_files.join(", ")
        },
        gpu.origin()
    );
    let kernels = gpu.kernel_resources()?;
    println!(
        "\n{:<24} {:>9} {:>11} {:>12} {:>13} {:>8} {:>13}",
        "kernel",
        "registers",
        "local B/thr",
        "static smem",
        "dynamic smem",
        "threads",
        "blocks per SM"
    );
    for k in &kernels {
        println!(
            "{:<24} {:>9} {:>11} {:>12} {:>13} {:>8} {:>13}",
            k.name,
            k.registers,
            k.local_bytes,
            k.shared_bytes,
            k.dynamic_shared_bytes,
            k.threads,
            k.max_blocks_per_sm
        );
    }
    println!();
    Ok(json!({
        "name": d.name,
        "compute_capability": format!("{}.{}", d.compute_capability.0, d.compute_capability.1),
        "sm_count": d.sm_count,
        "total_memory_bytes": d.total_memory_bytes,
        "driver_version": d.driver_version,
        "driver_library": cuda_files,
        "nvrtc_version": nvrtc.map(|(a, b)| format!("{a}.{b}")),
        "nvrtc_library": nvrtc_files,
        "kernels_from": gpu.origin().to_string(),
        "prepared_ptx_error": ptx_error.map(|e| e.to_string()),
        "sm_clock_mhz": d.sm_clock_khz / 1000,
        "memory_clock_mhz": d.memory_clock_khz / 1000,
        "memory_bus_bits": d.memory_bus_bits,
        "peak_dram_gbps": d.peak_dram_gbps(),
        "l2_bytes": d.l2_bytes,
        "shared_per_sm_bytes": d.shared_per_sm_bytes,
        "kernels": kernels.iter().map(|k| json!({
            "name": k.name, "registers": k.registers, "local_bytes_per_thread": k.local_bytes,
            "static_shared_bytes": k.shared_bytes, "dynamic_shared_bytes": k.dynamic_shared_bytes,
            "threads": k.threads, "max_blocks_per_sm": k.max_blocks_per_sm,
        })).collect::<Vec<_>>(),
    }))
}
