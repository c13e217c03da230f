//! Per-request slot allocators: metadata buffer indices and Mamba state slots.
//!
//! Modelled on upstream's `ReqToMetadataIdxAllocator`
//! (`python/sglang/srt/disaggregation/utils.py` at the pinned commit): a
//! deque of free indices, `alloc` pops from the left, `free` appends on the
//! right, and nothing checks that a freed index was held. A second free of
//! the same index therefore puts it in the deque twice, and two later
//! requests are handed the same index (a collision by double free; SGLang
//! #22716's collision comes from PP > 1 stages writing one slot in no fixed
//! order, which is not modelled). The pool reports both facts so the
//! simulator can record them; it never refuses, exactly like upstream.

use std::collections::VecDeque;

/// What [`SlotPool::alloc`] handed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    pub index: u32,
    /// The index was still held by another request (a collision).
    pub collided: bool,
}

/// A FIFO pool of `size` indices.
#[derive(Debug, Clone)]
pub struct SlotPool {
    free: VecDeque<u32>,
    held: Vec<bool>,
}

impl SlotPool {
    pub fn new(size: u32) -> Self {
        SlotPool {
            free: (0..size).collect(),
            held: vec![false; size as usize],
        }
    }

    /// Pop the next free index, or `None` when the deque is empty.
    pub fn alloc(&mut self) -> Option<Slot> {
        let index = self.free.pop_front()?;
        let collided = std::mem::replace(&mut self.held[index as usize], true);
        Some(Slot { index, collided })
    }

    /// Append `index` to the free deque; returns false when it was not held
    /// (a double free: the index is now in the deque twice).
    pub fn free(&mut self, index: u32) -> bool {
        let slot = &mut self.held[index as usize];
        let was_held = *slot;
        *slot = false;
        self.free.push_back(index);
        was_held
    }

    pub fn free_count(&self) -> usize {
        self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_order_and_double_free_collides() {
        let mut p = SlotPool::new(3);
        let a = p.alloc().unwrap();
        assert_eq!((a.index, a.collided), (0, false));
        assert!(p.free(0));
        assert!(!p.free(0), "second free is reported");
        // Fresh indices first, then 0 twice.
        assert_eq!(p.alloc().unwrap().index, 1);
        assert_eq!(p.alloc().unwrap().index, 2);
        let x = p.alloc().unwrap();
        let y = p.alloc().unwrap();
        assert_eq!((x.index, y.index), (0, 0));
        assert!(!x.collided && y.collided, "two holders of index 0");
        assert!(p.alloc().is_none());
    }
}
