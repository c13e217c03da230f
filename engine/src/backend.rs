//! Where decode attention runs: the CPU reference or the CUDA kernels.
//!
//! With the `cuda` feature and a driver present, decode attention runs on
//! the GPU; otherwise — no feature, no driver (`CudaContext::new` would
//! panic, so the driver is probed first), or `KVW_BACKEND=cpu` — it runs on
//! the CPU reference. Both read the same pool bytes and fail closed on the
//! same owner-tag mismatch, and the read-out is an argmax, so receipts agree
//! across backends except for the `backend` field.

use kvw_evidence::{BackendInfo, BackendKind};
use kvw_kernels::cpu::{self, PagedAttention};
use kvw_kernels::TagRefused;

/// The attention backend of a run.
pub enum Backend {
    /// The CPU reference; decode of a long prompt reads its full splits once
    /// for every remaining step ([`crate::sim::lookahead`]).
    Cpu,
    /// The CPU reference reading every page at every step: the same output
    /// bits as [`Backend::Cpu`], slower; kept so that a test can show the
    /// receipts of both are the same.
    CpuPerStep,
    #[cfg(feature = "cuda")]
    Cuda(Box<kvw_kernels::cuda::GpuKernels>),
}

impl Backend {
    /// The GPU when built with `cuda` and a device answers, else the CPU.
    pub fn detect() -> Backend {
        if std::env::var("KVW_BACKEND").is_ok_and(|b| b == "cpu") {
            return Backend::Cpu;
        }
        #[cfg(feature = "cuda")]
        match kvw_kernels::cuda::GpuKernels::new() {
            Ok(Some(gpu)) => return Backend::Cuda(Box::new(gpu)),
            Ok(None) => tracing::debug!("no CUDA driver or device; using the CPU reference"),
            Err(e) => tracing::warn!("CUDA unavailable ({e}); using the CPU reference"),
        }
        Backend::Cpu
    }

    /// What a receipt records about the backend.
    pub fn info(&self) -> BackendInfo {
        match self {
            Backend::Cpu | Backend::CpuPerStep => BackendInfo {
                kind: BackendKind::Cpu,
                device: format!("cpu ({})", std::env::consts::ARCH),
            },
            #[cfg(feature = "cuda")]
            Backend::Cuda(gpu) => BackendInfo {
                kind: BackendKind::Cuda,
                device: gpu.device_name().to_string(),
            },
        }
    }

    /// Whether decode may read a long prompt's full splits ahead for its
    /// remaining steps.
    pub fn looks_ahead(&self) -> bool {
        matches!(self, Backend::Cpu)
    }

    /// Decode attention for one request.
    pub fn attend(&self, a: &PagedAttention<'_>) -> Result<Vec<f32>, TagRefused> {
        match self {
            Backend::Cpu | Backend::CpuPerStep => cpu::paged_decode_attention(a),
            #[cfg(feature = "cuda")]
            Backend::Cuda(gpu) => match gpu.paged_decode_attention(a) {
                Ok(out) => Ok(out),
                Err(kvw_kernels::cuda::GpuError::Refused(r)) => Err(r),
                Err(e) => {
                    tracing::warn!(
                        "GPU attention failed ({e}); this step runs on the CPU reference"
                    );
                    cpu::paged_decode_attention(a)
                }
            },
        }
    }
}
