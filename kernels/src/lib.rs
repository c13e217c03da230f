//! Paged KV kernels for kvwitness.
//!
//! The engine keeps KV caches as real bytes in pages, exactly like a serving
//! engine does, and these kernels are the only code that reads or rewrites
//! those bytes in bulk:
//!
//! * [`cpu::paged_decode_attention`] — split-KV decode attention over a page
//!   table, with the read-time owner-tag check fused in;
//! * [`cpu::adler32_pages`] — the handoff checksum of SGLang PR #39500;
//! * [`cpu::scrub_pages`] — zeroing of freed pages.
//!
//! The CPU versions are the reference. The CUDA versions (sources under
//! `kernels/cuda/`, launched through `cudarc` behind the `cuda` feature) must
//! agree with them; `kvw-gpu-check` (feature `cuda`) compares the two on random inputs.

pub mod accuracy;
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod gpu_bench;
pub mod layout;
pub mod sizing;

pub use layout::{KvLayout, TagCheck, TagRefused};
