//! f32 buffers that start on a cache line ([`Aligned`]), for the fold's
//! queries, accumulators and widened K and V: vector loads from them never
//! straddle two lines.

/// f32 values starting on a cache line, so that no vector load from them
/// straddles two lines (such loads cost about a third of the loads'
/// throughput).
pub(super) struct Aligned(Vec<Line>, usize);

#[derive(Debug, Clone, Copy)]
#[repr(C, align(64))]
struct Line([f32; 16]);

// SAFETY: sixteen f32 and nothing else: any bits are a valid value, no
// padding (64 bytes at alignment 64).
unsafe impl bytemuck::Zeroable for Line {}
// SAFETY: as above.
unsafe impl bytemuck::Pod for Line {}

impl Aligned {
    pub(super) fn zeroed(len: usize) -> Self {
        Aligned(vec![Line([0.0; 16]); len.div_ceil(16)], len)
    }
}

impl AsRef<[f32]> for Aligned {
    fn as_ref(&self) -> &[f32] {
        &bytemuck::cast_slice(&self.0)[..self.1]
    }
}

impl AsMut<[f32]> for Aligned {
    fn as_mut(&mut self) -> &mut [f32] {
        &mut bytemuck::cast_slice_mut(&mut self.0)[..self.1]
    }
}
