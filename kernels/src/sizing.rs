//! How a decode step is cut into splits: pure arithmetic shared by the CUDA
//! launcher and its tests, so the sizing can be checked without a GPU.
//!
//! The CPU emulator (`kernels/cuda/emulator/check.cpp`) mirrors these rules;
//! a change here must be made there too.

/// Splits for the tensor-core variant. `blocks` is the number of blocks one
/// split contributes (requests x head groups); `slots` the blocks the device
/// runs at once (blocks per SM from the occupancy API x SMs). Picks the split
/// count that minimises `waves x (tokens per split + a fixed cost per
/// block)`, smallest on ties, at most `max_splits` (and 1024, and one per
/// page).
pub fn mma_splits(
    blocks: usize,
    slots: usize,
    max_pages: usize,
    page_size: usize,
    max_splits: usize,
) -> usize {
    /// A block's fixed cost (prologue, partial write, merge) in tokens.
    const BLOCK_COST_TOKENS: usize = 256;
    let blocks = blocks.max(1);
    let slots = slots.max(1);
    let limit = max_pages.min(1024).min(max_splits).max(1);
    let mut best = (usize::MAX, 1);
    for s in 1..=limit {
        let waves = (blocks * s).div_ceil(slots);
        let cost = waves * (max_pages.div_ceil(s) * page_size + BLOCK_COST_TOKENS);
        if cost < best.0 {
            best = (cost, s);
        }
    }
    best.1
}

/// Pages per split of the reference variant: enough blocks for
/// `blocks_per_sm` waves over `sm_count` SMs, at most `max_splits` splits.
pub fn reference_pages_per_split(
    blocks: usize,
    sm_count: usize,
    blocks_per_sm: usize,
    max_pages: usize,
    max_splits: usize,
) -> usize {
    let target = (sm_count.max(1) * blocks_per_sm.max(1)).div_ceil(blocks.max(1));
    let target = target.min(max_splits).max(1);
    max_pages.div_ceil(target).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_block_per_slot_needs_no_split() {
        // 64 requests x 8 KV heads on 132 SMs x 2 blocks: 512 blocks already
        // fill about two waves; splitting would only add fixed costs
        // unless it evens out the last wave.
        let s = mma_splits(512, 264, 512, 64, usize::MAX);
        let waves = (512 * s).div_ceil(264);
        assert!(512 * s * 100 / (waves * 264) >= 95, "s = {s}");
    }

    #[test]
    fn a_single_request_is_spread_over_the_device() {
        // One request, 8 KV heads: 8 blocks per split on 264 slots.
        let s = mma_splits(8, 264, 4096, 16, usize::MAX);
        assert!((24..=40).contains(&s), "s = {s}");
    }

    #[test]
    fn split_limits_hold() {
        assert_eq!(mma_splits(8, 264, 4096, 16, 1), 1);
        assert_eq!(mma_splits(8, 264, 4096, 16, 2), 2);
        assert_eq!(mma_splits(8, 264, 3, 16, usize::MAX), 3);
        assert_eq!(mma_splits(0, 0, 0, 16, 0), 1);
        assert_eq!(reference_pages_per_split(8, 132, 16, 64, 1), 64);
        assert_eq!(reference_pages_per_split(8, 132, 16, 64, 2), 32);
        assert_eq!(reference_pages_per_split(8, 132, 16, 64, usize::MAX), 1);
    }
}
