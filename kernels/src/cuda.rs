//! CUDA launchers for the paged KV kernels (feature `cuda`).
//!
//! The engine runs on machines with and without a GPU, and CI has none, so
//! nothing here links against CUDA: `cudarc` loads `libcuda` and `libnvrtc`
//! at run time. [`GpuKernels::new`] first asks whether a driver library is
//! present at all (`cudarc::driver::sys::is_culib_present`, because
//! `CudaContext::new` panics without one) and returns `Ok(None)` when it is
//! not, or when the driver sees no device; the caller then uses the CPU
//! reference in [`crate::cpu`], which these kernels must agree with.
//!
//! The CUDA C sources live in `kernels/cuda/` and are embedded here
//! ([`SOURCES`]); they are compiled by NVRTC for the device's own
//! architecture when [`GpuKernels`] is created, or loaded from PTX files made
//! earlier ([`GpuKernels::from_ptx_dir`], for a machine without NVRTC).
//!
//! Two ways to call the kernels:
//!
//! * host slices, with the same inputs as the CPU functions
//!   ([`GpuKernels::paged_decode_attention`], [`GpuKernels::adler32_pages`],
//!   [`GpuKernels::scrub_pages`]): the pool is copied to the device on every
//!   call. Simple and exact, meant for comparisons and small pools;
//! * a pool kept on the device ([`DevicePool`], uploaded once), with batched
//!   decode ([`GpuKernels::prepare_decode`] / [`GpuKernels::launch_decode`] /
//!   [`GpuKernels::finish_decode`]) and device-side checksum and scrub. Only
//!   page tables and queries cross the bus per step.
//!
//! Decode attention fails closed exactly like the CPU reference: if any page
//! a request would read carries a tag other than the reader's, the request
//! gets [`TagRefused`] with the first refused page-table index, and no output.
//!
//! Decode has two kernel variants ([`DecodeVariant`]): the scalar reference
//! kernel (`paged_decode_split_g*` + `paged_decode_reduce`, every group
//! size) and, for groups that are a multiple of 8, the tensor-core kernel
//! (`paged_decode_mma_g8`: mma.sync, a cp.async ring, the tag check ahead of
//! the copies, split counts from the occupancy API, the merge fused into the
//! last block).

use std::path::Path;
use std::sync::Arc;

use cudarc::driver::{
    sys, CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DriverError, LaunchConfig,
    PushKernelArg,
};
use cudarc::nvrtc::{CompileError, CompileOptions, Ptx};

use crate::cpu::PagedAttention;
use crate::layout::{KvLayout, TagRefused};
use crate::sizing;

/// Head dimension the decode kernel is built for.
pub const HEAD_DIM: usize = 128;

/// Threads per block of the split kernel (4 warps, 8 half-warp token groups).
const SPLIT_THREADS: u32 = 128;

/// Threads per block of the tensor-core kernel (4 warps).
const MMA_THREADS: u32 = 128;

/// Dynamic shared memory of the tensor-core kernel: its copy ring of 3
/// stages of 64 tokens' K and V (32 KB each).
pub const MMA_RING_BYTES: u32 = 3 * 64 * HEAD_DIM as u32 * 2 * 2;

/// Which decode kernel runs a GQA chunk of 8 query heads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeVariant {
    /// The scalar split kernel and the separate reduce (every chunk size).
    Reference,
    /// The tensor-core kernel with the fused merge (chunks of 8; smaller
    /// chunks fall back to the reference kernel).
    Mma,
}

/// How a decode step is cut into blocks. The defaults are the shipped
/// choice; the GPU check measures alternatives against them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeTuning {
    /// Most query heads of one GQA group a block serves (8, 4, 2 or 1). A
    /// group larger than this is cut into chunks, each re-reading the KV
    /// (mostly from L2): fewer heads per block means fewer registers and
    /// more blocks in flight, at the price of more KV reads.
    pub max_heads_per_block: usize,
    /// Blocks per multiprocessor the reference variant's split sizing aims
    /// for: enough waves that the last, partly filled one costs little.
    /// (The tensor-core variant asks the occupancy API instead.)
    pub blocks_per_sm: usize,
    /// The kernel for chunks of 8 query heads.
    pub variant: DecodeVariant,
    /// At most this many splits per request: a small limit makes every
    /// split walk many pages (the GPU check uses it to put several pages,
    /// and refused pages, inside one split).
    pub max_splits: usize,
}

impl Default for DecodeTuning {
    fn default() -> Self {
        DecodeTuning {
            max_heads_per_block: 8,
            blocks_per_sm: 16,
            variant: DecodeVariant::Mma,
            max_splits: usize::MAX,
        }
    }
}

/// Resources of one compiled kernel, as the driver reports them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelResources {
    pub name: &'static str,
    pub registers: i32,
    /// Local memory per thread (spills and stack), bytes.
    pub local_bytes: i32,
    /// Static shared memory per block, bytes.
    pub shared_bytes: i32,
    /// Dynamic shared memory per block it is launched with, bytes.
    pub dynamic_shared_bytes: u32,
    pub threads: u32,
    /// Blocks of it one SM holds at once (occupancy API).
    pub max_blocks_per_sm: u32,
}

/// What the driver says about device 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    pub name: String,
    pub compute_capability: (i32, i32),
    pub sm_count: i32,
    /// `cuDriverGetVersion`, e.g. 13000 for 13.0.
    pub driver_version: i32,
    pub sm_clock_khz: i32,
    pub memory_clock_khz: i32,
    pub memory_bus_bits: i32,
    pub l2_bytes: i32,
    pub shared_per_sm_bytes: i32,
    pub total_memory_bytes: usize,
}

impl DeviceInfo {
    /// Peak DRAM bandwidth from the clocks (DDR: two transfers a clock).
    pub fn peak_dram_gbps(&self) -> f64 {
        2.0 * self.memory_clock_khz as f64 * 1e3 * (self.memory_bus_bits as f64 / 8.0) / 1e9
    }
}

/// Where the loaded kernels came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelOrigin {
    /// Compiled here by NVRTC for the device's architecture.
    Nvrtc,
    /// PTX files read from this folder (e.g. the CI-checked ones).
    Ptx(String),
}

impl std::fmt::Display for KernelOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KernelOrigin::Nvrtc => write!(f, "NVRTC (compiled at start)"),
            KernelOrigin::Ptx(dir) => write!(f, "PTX from {dir}"),
        }
    }
}

/// One CUDA C source file and the kernels it defines.
#[derive(Debug, Clone, Copy)]
pub struct KernelSource {
    /// File name under `kernels/cuda/`.
    pub file: &'static str,
    /// The source text.
    pub source: &'static str,
    /// `extern "C"` kernels it defines.
    pub functions: &'static [&'static str],
}

/// Every CUDA source of the crate, embedded at build time.
pub const SOURCES: [KernelSource; 5] = [
    KernelSource {
        file: "paged_decode_attention.cu",
        source: include_str!("../cuda/paged_decode_attention.cu"),
        functions: &[
            "paged_decode_split_g1",
            "paged_decode_split_g2",
            "paged_decode_split_g4",
            "paged_decode_split_g8",
            "paged_decode_reduce",
        ],
    },
    KernelSource {
        file: "paged_decode_mma.cu",
        source: include_str!("../cuda/paged_decode_mma.cu"),
        functions: &["paged_decode_mma_g8"],
    },
    KernelSource {
        file: "page_checksum.cu",
        source: include_str!("../cuda/page_checksum.cu"),
        functions: &["adler32_page_partials", "adler32_combine"],
    },
    KernelSource {
        file: "page_scrub.cu",
        source: include_str!("../cuda/page_scrub.cu"),
        functions: &["page_scrub"],
    },
    KernelSource {
        file: "bandwidth_probe.cu",
        source: include_str!("../cuda/bandwidth_probe.cu"),
        functions: &["stream_read"],
    },
];

/// Threads per block of `stream_read`.
const PROBE_THREADS: u32 = 256;

/// What went wrong on the GPU path.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    /// A CUDA driver call failed.
    #[error("CUDA driver: {0}")]
    Driver(#[from] DriverError),
    /// NVRTC could not be loaded (no `libnvrtc` on the library path).
    #[error("NVRTC (libnvrtc) not found on the library path; set LD_LIBRARY_PATH or load PTX with GpuKernels::from_ptx_dir")]
    NoNvrtc,
    /// NVRTC rejected a kernel source.
    #[error("NVRTC could not compile {file}: {log}")]
    Compile { file: &'static str, log: String },
    /// A PTX file could not be read.
    #[error("reading {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    /// The inputs do not fit the kernels (shape, bounds, limits).
    #[error("invalid input: {0}")]
    Invalid(String),
    /// Decode attention refused a page whose owner tag is not the reader's.
    #[error(transparent)]
    Refused(#[from] TagRefused),
}

fn invalid(msg: impl Into<String>) -> GpuError {
    GpuError::Invalid(msg.into())
}

/// Whether a CUDA driver library is present and sees at least one device.
/// Never panics.
pub fn cuda_available() -> bool {
    matches!(cuda_probe(), Ok(n) if n > 0)
}

/// The number of CUDA devices, or why there are none to use: no driver
/// library, a library that is not a usable driver (cudarc panics on a
/// missing symbol; that is caught here, silently), or a driver error.
pub fn cuda_probe() -> Result<usize, String> {
    // SAFETY: only tries to open the driver library by its usual names.
    if !unsafe { sys::is_culib_present() } {
        return Err("no CUDA driver library (libcuda.so.1) on the library path".into());
    }
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let count = std::panic::catch_unwind(CudaContext::device_count);
    std::panic::set_hook(hook);
    match count {
        Ok(Ok(n)) => Ok(n.max(0) as usize),
        Ok(Err(e)) if e.0 == sys::CUresult::CUDA_ERROR_NO_DEVICE => Ok(0),
        Ok(Err(e)) => Err(format!("the CUDA driver fails: {e}")),
        Err(p) => Err(format!(
            "libcuda.so.1 loads but is not a usable driver ({})",
            p.downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| p.downcast_ref::<&str>().copied())
                .unwrap_or("panic")
        )),
    }
}

/// Whether NVRTC can be loaded. Never panics.
pub fn nvrtc_available() -> bool {
    // SAFETY: only tries to open the NVRTC library by its usual names.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// NVRTC's version (major, minor), when it can be loaded.
pub fn nvrtc_version() -> Option<(i32, i32)> {
    if !nvrtc_available() {
        return None;
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: NVRTC is present (checked above); two valid out-pointers.
    let r = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    (r == cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS).then_some((major, minor))
}

/// Compile one source to PTX with NVRTC for `arch` (e.g. `compute_90`).
/// Fails with [`GpuError::NoNvrtc`] instead of panicking when NVRTC is absent.
pub fn compile_source(src: &KernelSource, arch: &str) -> Result<Ptx, GpuError> {
    if !nvrtc_available() {
        return Err(GpuError::NoNvrtc);
    }
    let opts = CompileOptions {
        name: Some(src.file.to_string()),
        options: vec![
            format!("--gpu-architecture={arch}"),
            "--std=c++17".to_string(),
        ],
        ..Default::default()
    };
    cudarc::nvrtc::compile_ptx_with_opts(src.source, opts).map_err(|e| match e {
        CompileError::CompileError { log, .. } => GpuError::Compile {
            file: src.file,
            log: log.to_string_lossy().into_owned(),
        },
        other => GpuError::Compile {
            file: src.file,
            log: format!("{other:?}"),
        },
    })
}

/// PTX file name for a source (`page_scrub.cu` → `page_scrub.ptx`).
pub fn ptx_file_name(src: &KernelSource) -> String {
    format!("{}.ptx", src.file.trim_end_matches(".cu"))
}

/// A KV pool resident on the device, with its optional owner tags.
pub struct DevicePool {
    layout: KvLayout,
    pages: usize,
    kv: CudaSlice<u16>,
    tags: Option<(CudaSlice<u64>, Vec<u64>)>,
}

impl std::fmt::Debug for DevicePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DevicePool")
            .field("layout", &self.layout)
            .field("pages", &self.pages)
            .field("tagged", &self.tags.is_some())
            .finish()
    }
}

impl DevicePool {
    /// The pool's page shape.
    pub fn layout(&self) -> KvLayout {
        self.layout
    }
    /// Pages in the pool.
    pub fn pages(&self) -> usize {
        self.pages
    }
    /// Bytes of KV in the pool.
    pub fn bytes(&self) -> usize {
        self.pages * self.layout.page_bytes()
    }
    /// The device buffer (bf16 bit patterns, layout of [`crate::layout`]).
    pub fn kv(&self) -> &CudaSlice<u16> {
        &self.kv
    }
    /// The device buffer, writable.
    pub fn kv_mut(&mut self) -> &mut CudaSlice<u16> {
        &mut self.kv
    }
    /// The owner tags, one per page, if set.
    pub fn tags(&self) -> Option<&[u64]> {
        self.tags.as_ref().map(|(_, h)| h.as_slice())
    }

    /// See the same device bytes as `pages` pages of `layout` (the tags are
    /// dropped: they belong to the old pages).
    pub fn set_layout(&mut self, layout: KvLayout, pages: usize) -> Result<(), GpuError> {
        if pages * layout.page_elems() != self.kv.len() {
            return Err(invalid(format!(
                "{pages} pages of {} elements do not cover the pool's {}",
                layout.page_elems(),
                self.kv.len()
            )));
        }
        self.layout = layout;
        self.pages = pages;
        self.tags = None;
        Ok(())
    }
}

/// One request of a batched decode step on a [`DevicePool`].
#[derive(Debug, Clone, Copy)]
pub struct DecodeRequest<'a> {
    /// The request's pages, in position order.
    pub page_table: &'a [u32],
    /// Positions `0..seq_len` are attended to (clamped to the table).
    pub seq_len: usize,
    /// Queries, `num_q_heads * HEAD_DIM` values.
    pub q: &'a [f32],
    /// The reader's owner tag; checked when the decode runs with tags on.
    pub expected_tag: u64,
}

/// Device buffers of one prepared decode step: page tables, queries,
/// partials and outputs. Launch it as often as wanted; every launch
/// recomputes the outputs from the pool as it is then.
pub struct DecodePlan {
    layout: KvLayout,
    pool_pages: usize,
    batch: usize,
    num_q_heads: usize,
    num_kv_heads: usize,
    group: usize,
    chunk: usize,
    page_size: usize,
    pages_per_split: usize,
    num_splits: usize,
    scale_log2: f32,
    check_tags: bool,
    variant: DecodeVariant,
    host_tables: Vec<Vec<u32>>,
    expected: Vec<u64>,
    tables: CudaSlice<u32>,
    offsets: CudaSlice<u32>,
    seq_lens: CudaSlice<u32>,
    q: CudaSlice<f32>,
    expected_dev: CudaSlice<u64>,
    part_m: CudaSlice<f32>,
    part_l: CudaSlice<f32>,
    part_acc: CudaSlice<f32>,
    refused: CudaSlice<u32>,
    /// Arrival counters of the fused merge (tensor-core variant).
    arrivals: CudaSlice<u32>,
    out: CudaSlice<f32>,
    /// KV bytes one launch reads (K and V of every attended position).
    kv_bytes_read: usize,
}

impl DecodePlan {
    /// Requests in the batch.
    pub fn batch(&self) -> usize {
        self.batch
    }
    /// Splits per request (grid x of the split kernel).
    pub fn num_splits(&self) -> usize {
        self.num_splits
    }
    /// Pages each split walks.
    pub fn pages_per_split(&self) -> usize {
        self.pages_per_split
    }
    /// Query heads one split block serves (the GQA chunk).
    pub fn heads_per_block(&self) -> usize {
        self.chunk
    }
    /// KV bytes one launch reads: every attended position's K and V of every
    /// KV head, read once (GQA groups larger than 8 read them once per chunk
    /// of 8 query heads; this counts them once).
    pub fn kv_bytes_read(&self) -> usize {
        self.kv_bytes_read
    }
    /// Whether the owner-tag check is on.
    pub fn check_tags(&self) -> bool {
        self.check_tags
    }
    /// The kernel variant that runs (the reference one for chunks under 8).
    pub fn variant(&self) -> DecodeVariant {
        self.variant
    }
}

/// The compiled kernels on one device, with the stream they run on.
pub struct GpuKernels {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    name: String,
    sm_count: usize,
    origin: KernelOrigin,
    split: [CudaFunction; 4],
    reduce: CudaFunction,
    mma: CudaFunction,
    mma_blocks_per_sm: usize,
    adler_partials: CudaFunction,
    adler_combine: CudaFunction,
    scrub: CudaFunction,
    probe: CudaFunction,
    _modules: Vec<Arc<CudaModule>>,
}

impl GpuKernels {
    /// Open device 0 and compile the kernels with NVRTC for its architecture.
    /// `Ok(None)`: no CUDA driver or no device, use the CPU reference.
    pub fn new() -> Result<Option<Self>, GpuError> {
        Self::open(KernelOrigin::Nvrtc, |ctx| {
            let (major, minor) = ctx.compute_capability()?;
            let arch = format!("compute_{major}{minor}");
            SOURCES.iter().map(|s| compile_source(s, &arch)).collect()
        })
    }

    /// Open device 0 and load PTX files named by [`ptx_file_name`] from
    /// `dir` (as written by `kvw-nvrtc` or the CI compile check). No NVRTC
    /// needed. `Ok(None)`: no CUDA driver or no device.
    pub fn from_ptx_dir(dir: &Path) -> Result<Option<Self>, GpuError> {
        Self::open(KernelOrigin::Ptx(dir.display().to_string()), |_| {
            SOURCES
                .iter()
                .map(|s| {
                    let path = dir.join(ptx_file_name(s));
                    std::fs::read_to_string(&path)
                        .map(Ptx::from_src)
                        .map_err(|source| GpuError::Io {
                            path: path.display().to_string(),
                            source,
                        })
                })
                .collect()
        })
    }

    /// PTX from `dir` first (what CI compiled and assembled), NVRTC if that
    /// fails (missing files, or a driver that cannot load them), or NVRTC
    /// alone without `dir`. The error of a failed first try is returned
    /// beside the kernels, so the caller can report it; when both fail the
    /// error names both.
    pub fn open_preferring_ptx(
        dir: Option<&Path>,
    ) -> Result<Option<(Self, Option<GpuError>)>, GpuError> {
        let first = match dir {
            Some(d) => match Self::from_ptx_dir(d) {
                Ok(k) => return Ok(k.map(|k| (k, None))),
                Err(e) => Some(e),
            },
            None => None,
        };
        match Self::new() {
            Ok(k) => Ok(k.map(|k| (k, first))),
            Err(e) => Err(match first {
                Some(f) => invalid(format!("PTX: {f}; NVRTC: {e}")),
                None => e,
            }),
        }
    }

    fn open(
        origin: KernelOrigin,
        ptx: impl FnOnce(&Arc<CudaContext>) -> Result<Vec<Ptx>, GpuError>,
    ) -> Result<Option<Self>, GpuError> {
        match cuda_probe() {
            Ok(n) if n > 0 => {}
            _ => return Ok(None),
        }
        let ctx = CudaContext::new(0)?;
        let stream = ctx.new_stream()?;
        let name = ctx.name()?;
        let sm_count = ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?
            as usize;
        let modules: Vec<Arc<CudaModule>> = ptx(&ctx)?
            .into_iter()
            .map(|p| ctx.load_module(p))
            .collect::<Result<_, _>>()?;
        let f = |m: usize, name: &str| modules[m].load_function(name);
        let mma = f(1, "paged_decode_mma_g8")?;
        // The ring is over the 48 KB a block gets without asking.
        ctx.bind_to_thread()?;
        mma.set_attribute(
            sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            MMA_RING_BYTES as i32,
        )?;
        let mma_blocks_per_sm = mma.occupancy_max_active_blocks_per_multiprocessor(
            MMA_THREADS,
            MMA_RING_BYTES as usize,
            None,
        )? as usize;
        if mma_blocks_per_sm == 0 {
            return Err(invalid(
                "paged_decode_mma_g8 does not fit on one SM (occupancy 0)",
            ));
        }
        Ok(Some(GpuKernels {
            mma,
            mma_blocks_per_sm,
            origin,
            split: [
                f(0, "paged_decode_split_g1")?,
                f(0, "paged_decode_split_g2")?,
                f(0, "paged_decode_split_g4")?,
                f(0, "paged_decode_split_g8")?,
            ],
            reduce: f(0, "paged_decode_reduce")?,
            adler_partials: f(2, "adler32_page_partials")?,
            adler_combine: f(2, "adler32_combine")?,
            scrub: f(3, "page_scrub")?,
            probe: f(4, "stream_read")?,
            _modules: modules,
            ctx,
            stream,
            name,
            sm_count,
        }))
    }

    /// The device's name.
    pub fn device_name(&self) -> &str {
        &self.name
    }
    /// Where the kernels were loaded from.
    pub fn origin(&self) -> &KernelOrigin {
        &self.origin
    }

    /// The driver's description of device 0: clocks, L2, versions.
    pub fn device_info(&self) -> Result<DeviceInfo, GpuError> {
        use sys::CUdevice_attribute as A;
        let at = |a| self.ctx.attribute(a);
        let mut driver_version = 0;
        // SAFETY: the driver is loaded (a context exists); valid out-pointer.
        unsafe { sys::cuDriverGetVersion(&mut driver_version) }.result()?;
        Ok(DeviceInfo {
            name: self.name.clone(),
            compute_capability: self.ctx.compute_capability()?,
            sm_count: at(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            driver_version,
            sm_clock_khz: at(A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)?,
            memory_clock_khz: at(A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)?,
            memory_bus_bits: at(A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)?,
            l2_bytes: at(A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?,
            shared_per_sm_bytes: at(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)?,
            total_memory_bytes: self.ctx.total_mem()?,
        })
    }

    /// Registers, local and shared memory and occupancy of every kernel.
    pub fn kernel_resources(&self) -> Result<Vec<KernelResources>, GpuError> {
        let mut out = Vec::new();
        let names = [
            "paged_decode_split_g1",
            "paged_decode_split_g2",
            "paged_decode_split_g4",
            "paged_decode_split_g8",
        ];
        let mut all: Vec<(&'static str, &CudaFunction, u32, u32)> = names
            .iter()
            .zip(&self.split)
            .map(|(n, f)| (*n, f, SPLIT_THREADS, 0))
            .collect();
        all.push(("paged_decode_reduce", &self.reduce, HEAD_DIM as u32, 0));
        all.push((
            "paged_decode_mma_g8",
            &self.mma,
            MMA_THREADS,
            MMA_RING_BYTES,
        ));
        all.push(("adler32_page_partials", &self.adler_partials, 256, 0));
        all.push(("adler32_combine", &self.adler_combine, 256, 0));
        all.push(("page_scrub", &self.scrub, 256, 0));
        all.push(("stream_read", &self.probe, PROBE_THREADS, 0));
        for (name, f, threads, dynamic) in all {
            out.push(KernelResources {
                name,
                registers: f.num_regs()?,
                local_bytes: f.local_size_bytes()?,
                shared_bytes: f.shared_size_bytes()?,
                dynamic_shared_bytes: dynamic,
                threads,
                max_blocks_per_sm: f.occupancy_max_active_blocks_per_multiprocessor(
                    threads,
                    dynamic as usize,
                    None,
                )?,
            });
        }
        Ok(out)
    }
    /// Streaming multiprocessors on the device.
    pub fn sm_count(&self) -> usize {
        self.sm_count
    }
    /// The context (for events, extra buffers).
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }
    /// The stream every kernel of this value runs on, in order.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    // ---------------------------------------------------------------- pool

    /// Copy a pool (and optionally its owner tags, one per page) to the device.
    pub fn upload_pool(
        &self,
        layout: KvLayout,
        kv: &[u16],
        tags: Option<&[u64]>,
    ) -> Result<DevicePool, GpuError> {
        let page_elems = layout.page_elems();
        if page_elems == 0 || !kv.len().is_multiple_of(page_elems) {
            return Err(invalid(format!(
                "pool of {} elements is not a whole number of {page_elems}-element pages",
                kv.len()
            )));
        }
        let dev = self.stream.clone_htod(kv)?;
        let mut pool = DevicePool {
            layout,
            pages: kv.len() / page_elems,
            kv: dev,
            tags: None,
        };
        if let Some(t) = tags {
            self.set_tags(&mut pool, t)?;
        }
        Ok(pool)
    }

    /// Allocate a zeroed pool of `pages` pages on the device.
    pub fn alloc_pool(&self, layout: KvLayout, pages: usize) -> Result<DevicePool, GpuError> {
        Ok(DevicePool {
            layout,
            pages,
            kv: self.stream.alloc_zeros(pages * layout.page_elems())?,
            tags: None,
        })
    }

    /// Set (replace) the pool's owner tags, one per page (extra entries
    /// past the pool's last page are ignored, as on the CPU).
    pub fn set_tags(&self, pool: &mut DevicePool, tags: &[u64]) -> Result<(), GpuError> {
        let Some(tags) = tags.get(..pool.pages) else {
            return Err(invalid(format!(
                "{} tags for {} pages",
                tags.len(),
                pool.pages
            )));
        };
        pool.tags = Some((self.stream.clone_htod(tags)?, tags.to_vec()));
        Ok(())
    }

    /// Copy the pool back to the host.
    pub fn download_pool(&self, pool: &DevicePool) -> Result<Vec<u16>, GpuError> {
        Ok(self.stream.clone_dtoh(&pool.kv)?)
    }

    /// Copy `pages` of a device pool to the host, back to back in list
    /// order (a small host pool whose page `i` is `pages[i]`).
    pub fn download_pages(&self, pool: &DevicePool, pages: &[u32]) -> Result<Vec<u16>, GpuError> {
        Self::check_pages(pool.pages, pages, "page list")?;
        let n = pool.layout.page_elems();
        let mut host = vec![0u16; pages.len() * n];
        for (dst, &p) in host.chunks_mut(n).zip(pages) {
            let src = pool.kv.slice(p as usize * n..(p as usize + 1) * n);
            self.stream.memcpy_dtoh(&src, dst)?;
        }
        self.stream.synchronize()?;
        Ok(host)
    }

    fn check_pages(pool_pages: usize, pages: &[u32], what: &str) -> Result<(), GpuError> {
        match pages.iter().find(|&&p| p as usize >= pool_pages) {
            Some(p) => Err(invalid(format!(
                "{what} names page {p}, pool has {pool_pages}"
            ))),
            None => Ok(()),
        }
    }

    // -------------------------------------------------------------- decode

    /// Decode attention from host slices, same inputs and result as
    /// [`crate::cpu::paged_decode_attention`]. Copies the pool (and tags) to
    /// the device on every call; for a resident pool use
    /// [`Self::prepare_decode`]. A refused page gives
    /// `Err(GpuError::Refused(..))` with the CPU reference's index.
    pub fn paged_decode_attention(&self, a: &PagedAttention<'_>) -> Result<Vec<f32>, GpuError> {
        self.paged_decode_attention_tuned(a, DecodeTuning::default())
    }

    /// [`Self::paged_decode_attention`] with an explicit [`DecodeTuning`]
    /// (kernel variant, split limit).
    pub fn paged_decode_attention_tuned(
        &self,
        a: &PagedAttention<'_>,
        tuning: DecodeTuning,
    ) -> Result<Vec<f32>, GpuError> {
        let pool = self.upload_pool(a.layout, a.kv, a.tags.map(|t| t.page_tags))?;
        let req = DecodeRequest {
            page_table: a.page_table,
            seq_len: a.seq_len,
            q: a.q,
            expected_tag: a.tags.map_or(0, |t| t.expected),
        };
        let mut plan = self.prepare_decode_tuned(
            &pool,
            &[req],
            a.num_q_heads,
            a.sm_scale,
            a.tags.is_some(),
            tuning,
        )?;
        self.launch_decode(&pool, &mut plan)?;
        let mut out = self.finish_decode(&pool, &plan)?;
        Ok(out.pop().expect("one request")?)
    }

    /// Copy a batch's page tables and queries to the device and size the
    /// split-KV work for it. With `check_tags`, the pool must carry tags and
    /// every page a request reads must carry that request's `expected_tag`.
    pub fn prepare_decode(
        &self,
        pool: &DevicePool,
        reqs: &[DecodeRequest<'_>],
        num_q_heads: usize,
        sm_scale: f32,
        check_tags: bool,
    ) -> Result<DecodePlan, GpuError> {
        let tuning = DecodeTuning::default();
        self.prepare_decode_tuned(pool, reqs, num_q_heads, sm_scale, check_tags, tuning)
    }

    /// [`Self::prepare_decode`] with an explicit [`DecodeTuning`].
    pub fn prepare_decode_tuned(
        &self,
        pool: &DevicePool,
        reqs: &[DecodeRequest<'_>],
        num_q_heads: usize,
        sm_scale: f32,
        check_tags: bool,
        tuning: DecodeTuning,
    ) -> Result<DecodePlan, GpuError> {
        let l = pool.layout;
        if l.head_dim != HEAD_DIM {
            return Err(invalid(format!(
                "head_dim {} (the decode kernel is built for {HEAD_DIM})",
                l.head_dim
            )));
        }
        if l.page_size < 2 || l.num_kv_heads == 0 || !num_q_heads.is_multiple_of(l.num_kv_heads) {
            return Err(invalid(format!(
                "page_size {}, {num_q_heads} query heads over {} KV heads",
                l.page_size, l.num_kv_heads
            )));
        }
        if reqs.is_empty() || reqs.len() > 65_535 {
            return Err(invalid(format!("batch of {} requests", reqs.len())));
        }
        if check_tags && pool.tags.is_none() {
            return Err(invalid("tag check asked for a pool without tags"));
        }
        let group = num_q_heads / l.num_kv_heads;
        let chunk = [8, 4, 2, 1]
            .into_iter()
            .find(|&c| c <= tuning.max_heads_per_block.max(1) && group.is_multiple_of(c))
            .expect("1 divides");
        if l.num_kv_heads * (group / chunk) > 65_535 {
            return Err(invalid("too many KV heads x GQA chunks for grid.y"));
        }

        let mut host_tables = Vec::with_capacity(reqs.len());
        let mut flat: Vec<u32> = Vec::new();
        let mut offsets = Vec::with_capacity(reqs.len());
        let mut seq_lens = Vec::with_capacity(reqs.len());
        let mut q = Vec::with_capacity(reqs.len() * num_q_heads * HEAD_DIM);
        let mut max_pages = 0usize;
        let mut positions = 0usize;
        for (i, r) in reqs.iter().enumerate() {
            if r.q.len() != num_q_heads * HEAD_DIM {
                return Err(invalid(format!(
                    "request {i}: {} query values, expected {}",
                    r.q.len(),
                    num_q_heads * HEAD_DIM
                )));
            }
            // Same clamp as the CPU reference: never past the page table.
            let seq_len = r.seq_len.min(r.page_table.len() * l.page_size);
            // Positions stay where the kernel's multiply-high division is exact.
            if seq_len as u64 >= (1u64 << 32) / l.page_size as u64 {
                return Err(invalid(format!("request {i}: seq_len {seq_len} too long")));
            }
            let used = seq_len.div_ceil(l.page_size);
            let table = &r.page_table[..used];
            Self::check_pages(pool.pages, table, "page table")?;
            offsets.push(u32::try_from(flat.len()).map_err(|_| invalid("page tables too long"))?);
            seq_lens.push(u32::try_from(seq_len).map_err(|_| invalid("seq_len too long"))?);
            flat.extend_from_slice(table);
            host_tables.push(table.to_vec());
            q.extend_from_slice(r.q);
            max_pages = max_pages.max(used);
            positions += seq_len;
        }
        if flat.is_empty() {
            // Keep every device buffer non-empty.
            flat.push(0);
        }

        let variant = if chunk == 8 {
            tuning.variant
        } else {
            DecodeVariant::Reference
        };
        let blocks_per_split = reqs.len() * l.num_kv_heads * (group / chunk);
        let pages_per_split = match variant {
            // Splits from the occupancy API: whole waves of resident blocks.
            DecodeVariant::Mma => {
                let slots = self.sm_count * self.mma_blocks_per_sm;
                let s = sizing::mma_splits(
                    blocks_per_split,
                    slots,
                    max_pages,
                    l.page_size,
                    tuning.max_splits,
                );
                max_pages.div_ceil(s).max(1)
            }
            // Enough blocks for several waves over every multiprocessor.
            DecodeVariant::Reference => sizing::reference_pages_per_split(
                blocks_per_split,
                self.sm_count,
                tuning.blocks_per_sm,
                max_pages,
                tuning.max_splits,
            ),
        };
        let num_splits = max_pages.div_ceil(pages_per_split).max(1);
        if num_splits > i32::MAX as usize {
            return Err(invalid("too many splits"));
        }

        let s = &self.stream;
        let rows = reqs.len() * num_splits * num_q_heads;
        let expected: Vec<u64> = reqs.iter().map(|r| r.expected_tag).collect();
        Ok(DecodePlan {
            layout: l,
            pool_pages: pool.pages,
            batch: reqs.len(),
            num_q_heads,
            num_kv_heads: l.num_kv_heads,
            group,
            chunk,
            page_size: l.page_size,
            pages_per_split,
            num_splits,
            scale_log2: sm_scale * std::f32::consts::LOG2_E,
            check_tags,
            variant,
            tables: s.clone_htod(&flat)?,
            offsets: s.clone_htod(&offsets)?,
            seq_lens: s.clone_htod(&seq_lens)?,
            q: s.clone_htod(&q)?,
            expected_dev: s.clone_htod(&expected)?,
            expected,
            host_tables,
            part_m: s.alloc_zeros(rows)?,
            part_l: s.alloc_zeros(rows)?,
            part_acc: s.alloc_zeros(rows * HEAD_DIM)?,
            refused: s.alloc_zeros(reqs.len())?,
            arrivals: s.alloc_zeros(reqs.len() * l.num_kv_heads * (group / chunk))?,
            out: s.alloc_zeros(reqs.len() * num_q_heads * HEAD_DIM)?,
            kv_bytes_read: positions * l.slot_elems() * 2,
        })
    }

    /// Queue one decode step (reset, split kernel, reduce kernel) on the
    /// stream; returns without waiting.
    pub fn launch_decode(&self, pool: &DevicePool, plan: &mut DecodePlan) -> Result<(), GpuError> {
        // The page tables were bounds-checked against the pool the plan was
        // prepared for; refuse anything that could make the kernel read
        // outside this one.
        if pool.layout != plan.layout || pool.pages != plan.pool_pages {
            return Err(invalid("plan was prepared for another pool shape"));
        }
        if plan.check_tags && pool.tags.is_none() {
            return Err(invalid("tag check asked for a pool without tags"));
        }
        let s = &self.stream;
        s.memset_zeros(&mut plan.refused)?;
        let mma = plan.variant == DecodeVariant::Mma;
        if mma {
            s.memset_zeros(&mut plan.arrivals)?;
        }
        // With tags off the kernel never reads the tag buffers; pass the
        // expected-tag buffer in their place so every pointer is valid.
        let tags = match (&pool.tags, plan.check_tags) {
            (Some((t, _)), true) => t,
            _ => &plan.expected_dev,
        };
        let check = u32::from(plan.check_tags);
        let kv_heads = plan.num_kv_heads as u32;
        let group = plan.group as u32;
        let page_size = plan.page_size as u32;
        // ceil(2^32 / page_size); see the kernel source.
        let page_magic = (1u64 << 32).div_ceil(plan.page_size as u64) as u32;
        let pps = plan.pages_per_split as u32;
        let splits = plan.num_splits as u32;
        let f = match (mma, plan.chunk) {
            (true, _) => &self.mma,
            (false, 1) => &self.split[0],
            (false, 2) => &self.split[1],
            (false, 4) => &self.split[2],
            (false, _) => &self.split[3],
        };
        let cfg = LaunchConfig {
            grid_dim: (
                splits,
                (plan.num_kv_heads * (plan.group / plan.chunk)) as u32,
                plan.batch as u32,
            ),
            block_dim: (if mma { MMA_THREADS } else { SPLIT_THREADS }, 1, 1),
            shared_mem_bytes: if mma { MMA_RING_BYTES } else { 0 },
        };
        let mut b = s.launch_builder(f);
        b.arg(&pool.kv)
            .arg(&plan.tables)
            .arg(&plan.offsets)
            .arg(&plan.seq_lens)
            .arg(&plan.q)
            .arg(tags)
            .arg(&plan.expected_dev)
            .arg(&check)
            .arg(&kv_heads)
            .arg(&group)
            .arg(&page_size)
            .arg(&page_magic)
            .arg(&pps)
            .arg(&splits)
            .arg(&plan.scale_log2)
            .arg(&mut plan.part_m)
            .arg(&mut plan.part_l)
            .arg(&mut plan.part_acc)
            .arg(&mut plan.refused);
        if mma {
            b.arg(&mut plan.arrivals).arg(&mut plan.out);
        }
        // SAFETY: argument list matches `paged_decode_split_g*` (and, with
        // the two extra buffers, `paged_decode_mma_g8`); every index the
        // kernel forms is bounded by the shapes checked in prepare_decode.
        unsafe { b.launch(cfg) }?;
        if mma {
            // The last block of each head group merged the splits itself.
            return Ok(());
        }

        let heads = plan.num_q_heads as u32;
        let cfg = LaunchConfig {
            grid_dim: (heads, plan.batch as u32, 1),
            block_dim: (HEAD_DIM as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut b = s.launch_builder(&self.reduce);
        b.arg(&plan.part_m)
            .arg(&plan.part_l)
            .arg(&plan.part_acc)
            .arg(&plan.refused)
            .arg(&heads)
            .arg(&splits)
            .arg(&mut plan.out);
        // SAFETY: argument list matches `paged_decode_reduce`.
        unsafe { b.launch(cfg) }?;
        Ok(())
    }

    /// Wait for the last launch and read its results: per request, the
    /// `num_q_heads * HEAD_DIM` outputs, or the first refused page (the
    /// whole request fails closed, as on the CPU).
    #[allow(clippy::type_complexity)]
    pub fn finish_decode(
        &self,
        pool: &DevicePool,
        plan: &DecodePlan,
    ) -> Result<Vec<Result<Vec<f32>, TagRefused>>, GpuError> {
        let refused = self.stream.clone_dtoh(&plan.refused)?;
        let out = self.stream.clone_dtoh(&plan.out)?;
        let n = plan.num_q_heads * HEAD_DIM;
        Ok(refused
            .iter()
            .enumerate()
            .map(|(i, &r)| {
                if r == 0 {
                    return Ok(out[i * n..(i + 1) * n].to_vec());
                }
                // The kernel stores u32::MAX - index so that zero means "none".
                let index = (u32::MAX - r) as usize;
                let page = plan.host_tables[i][index];
                Err(TagRefused {
                    index,
                    page,
                    found: pool.tags().map_or(0, |t| t[page as usize]),
                    expected: plan.expected[i],
                })
            })
            .collect())
    }

    // ------------------------------------------------------------ checksum

    /// Adler-32 over `pages` of a host pool, equal to
    /// [`crate::cpu::adler32_pages`]. Copies the pool to the device.
    pub fn adler32_pages(
        &self,
        layout: KvLayout,
        kv: &[u16],
        pages: &[u32],
    ) -> Result<u32, GpuError> {
        let pool = self.upload_pool(layout, kv, None)?;
        self.adler32_pages_on(&pool, pages)
    }

    /// Checks shared by the page-list kernels: pages in range, page size a
    /// multiple of 16 bytes. Returns the page count and the page size in bytes.
    fn page_list_shape(pool: &DevicePool, pages: &[u32]) -> Result<(u32, u64), GpuError> {
        let page_bytes = pool.layout.page_bytes();
        if !page_bytes.is_multiple_of(16) {
            return Err(invalid("page size in bytes must be a multiple of 16"));
        }
        let k = u32::try_from(pages.len()).map_err(|_| invalid("too many pages"))?;
        Self::check_pages(pool.pages, pages, "page list")?;
        Ok((k, page_bytes as u64))
    }

    /// Adler-32 over `pages` of a device pool (the handoff checksum of
    /// SGLang PR #39500, <https://github.com/sgl-project/sglang/pull/39500>).
    pub fn adler32_pages_on(&self, pool: &DevicePool, pages: &[u32]) -> Result<u32, GpuError> {
        if pages.is_empty() {
            return Ok(1);
        }
        let (k, pb) = Self::page_list_shape(pool, pages)?;
        let s = &self.stream;
        let list = s.clone_htod(pages)?;
        let mut part_a = s.alloc_zeros::<u32>(pages.len())?;
        let mut part_b = s.alloc_zeros::<u32>(pages.len())?;
        let mut out = s.alloc_zeros::<u32>(1)?;
        let mut b = s.launch_builder(&self.adler_partials);
        b.arg(&pool.kv)
            .arg(&list)
            .arg(&pb)
            .arg(&mut part_a)
            .arg(&mut part_b);
        // SAFETY: matches `adler32_page_partials`; pages checked against the pool.
        unsafe {
            b.launch(LaunchConfig {
                grid_dim: (k, 1, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            })
        }?;
        let mut b = s.launch_builder(&self.adler_combine);
        b.arg(&part_a).arg(&part_b).arg(&k).arg(&pb).arg(&mut out);
        // SAFETY: matches `adler32_combine`.
        unsafe {
            b.launch(LaunchConfig {
                grid_dim: (1, 1, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            })
        }?;
        Ok(s.clone_dtoh(&out)?[0])
    }

    // ------------------------------------------------------- stream probe

    /// A sink for [`Self::launch_stream_read`]: one word per thread of a
    /// persistent grid (blocks per SM from the occupancy API).
    pub fn stream_sink(&self) -> Result<CudaSlice<u32>, GpuError> {
        let per_sm =
            self.probe
                .occupancy_max_active_blocks_per_multiprocessor(PROBE_THREADS, 0, None)?;
        let blocks = self.sm_count * per_sm.max(1) as usize;
        Ok(self.stream.alloc_zeros(blocks * PROBE_THREADS as usize)?)
    }

    /// Queue a read of every byte of the pool (16-byte streaming loads, the
    /// decode kernels' own), each thread writing the XOR of its words to
    /// `sink`. The XOR of the whole sink then equals the XOR of the pool.
    pub fn launch_stream_read(
        &self,
        pool: &DevicePool,
        sink: &mut CudaSlice<u32>,
    ) -> Result<(), GpuError> {
        if !pool.bytes().is_multiple_of(16) {
            return Err(invalid("pool size is not a multiple of 16 bytes"));
        }
        let n16 = (pool.bytes() / 16) as u64;
        let blocks = (sink.len() / PROBE_THREADS as usize).max(1) as u32;
        let mut b = self.stream.launch_builder(&self.probe);
        b.arg(&pool.kv).arg(&n16).arg(sink);
        // SAFETY: matches `stream_read`; reads n16 16-byte words of the pool
        // (a whole number of them), writes blocks * PROBE_THREADS sink words.
        unsafe {
            b.launch(LaunchConfig {
                grid_dim: (blocks, 1, 1),
                block_dim: (PROBE_THREADS, 1, 1),
                shared_mem_bytes: 0,
            })
        }?;
        Ok(())
    }

    // --------------------------------------------------------------- scrub

    /// Zero `pages` of a host pool, equal to [`crate::cpu::scrub_pages`].
    /// Copies the pool to the device and back.
    pub fn scrub_pages(
        &self,
        layout: KvLayout,
        kv: &mut [u16],
        pages: &[u32],
    ) -> Result<(), GpuError> {
        let mut pool = self.upload_pool(layout, kv, None)?;
        self.scrub_pages_on(&mut pool, pages)?;
        self.stream.memcpy_dtoh(&pool.kv, kv)?;
        self.stream.synchronize()?;
        Ok(())
    }

    /// Zero `pages` of a device pool (queued on the stream).
    pub fn scrub_pages_on(&self, pool: &mut DevicePool, pages: &[u32]) -> Result<(), GpuError> {
        if pages.is_empty() {
            return Ok(());
        }
        let (k, pb) = Self::page_list_shape(pool, pages)?;
        let s = &self.stream;
        let list = s.clone_htod(pages)?;
        let mut b = s.launch_builder(&self.scrub);
        b.arg(&mut pool.kv).arg(&list).arg(&pb);
        // SAFETY: matches `page_scrub`; pages checked against the pool.
        unsafe {
            b.launch(LaunchConfig {
                grid_dim: (k, 1, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            })
        }?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_without_driver_is_none_not_a_panic() {
        let got = GpuKernels::new();
        if !cuda_available() {
            assert!(matches!(got, Ok(None)), "no driver must give Ok(None)");
        }
        // With a driver, Ok(Some) or a reported error (e.g. no NVRTC) are
        // both fine; reaching this line means nothing panicked.
    }

    #[test]
    fn from_ptx_dir_without_driver_is_none() {
        if !cuda_available() {
            let got = GpuKernels::from_ptx_dir(Path::new("/nonexistent"));
            assert!(matches!(got, Ok(None)));
        }
    }

    #[test]
    fn every_source_defines_its_kernels_without_includes() {
        for s in SOURCES {
            assert!(
                !s.source.contains("#include"),
                "{} includes a header",
                s.file
            );
            for f in s.functions {
                assert!(
                    s.source.contains(&format!("{f}(")) || s.source.contains(&format!("({f},")),
                    "{} lacks {f}",
                    s.file
                );
            }
        }
    }
}
