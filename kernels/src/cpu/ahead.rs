//! The prefetch of the next block's bytes while one is folded ([`Ahead`]),
//! so that reading memory overlaps the arithmetic instead of alternating
//! with it. A prefetch reads nothing and changes no value.

use super::fold::BLOCK;

/// The next block's bytes, asked for (prefetched) a few cache lines at a
/// time while the current block is folded, so that reading memory overlaps
/// the arithmetic instead of alternating with it. The kernels call
/// [`Ahead::tick`] once per key of each pass over the block (scores,
/// widening, each 64 elements of the V sums); the block's end asks for
/// whatever is left. A prefetch reads nothing and changes no value.
pub(super) struct Ahead {
    /// The next line to ask for, and the end of its run of adjacent slots.
    at: *const u8,
    end: *const u8,
    /// Lines not yet asked for.
    left: usize,
    /// All the runs: (start, end) addresses; `runs[next]` comes after
    /// the current one.
    runs: [(*const u8, *const u8); BLOCK],
    next: usize,
    /// Lines asked for per tick.
    per_tick: usize,
}

impl Ahead {
    /// The lines of `slots` (each `slot_elems` values, inside `kv`),
    /// spread over `ticks`. Adjacent slots (those of one page) make one
    /// run of lines.
    pub(super) fn new(kv: &[u16], slots: &[usize], slot_elems: usize, ticks: usize) -> Self {
        assert!(slots.len() <= BLOCK);
        let base = kv.as_ptr().cast::<u8>();
        let bytes = 2 * slot_elems;
        let mut runs = [(base, base); BLOCK];
        let mut count = 0;
        for &o in slots {
            // Addresses only (wrapping arithmetic): nothing is read through
            // them but prefetches, which cannot fault.
            let start = base.wrapping_add(2 * o);
            if count > 0 && runs[count - 1].1 == start {
                runs[count - 1].1 = start.wrapping_add(bytes);
            } else {
                runs[count] = (start, start.wrapping_add(bytes));
                count += 1;
            }
        }
        // The lines `ask` walks: each run's, from its start, 64 bytes apart.
        let left = runs[..count]
            .iter()
            .map(|&(start, end)| (end as usize - start as usize).div_ceil(64))
            .sum();
        Ahead {
            at: runs[0].0,
            end: runs[0].1,
            left,
            runs,
            next: 1,
            per_tick: left.div_ceil(ticks.max(1)),
        }
    }

    /// Ask for the next few lines. Inlined into the kernels' loops, with
    /// no call and no vector register: a call there would make the caller
    /// save its accumulators around it.
    #[inline(always)]
    pub(super) fn tick(&mut self) {
        for _ in 0..self.per_tick.min(self.left) {
            self.ask();
        }
    }

    /// Ask for every line not yet asked for.
    pub(super) fn rest(&mut self) {
        while self.left > 0 {
            self.ask();
        }
    }

    /// Ask for the next line; there is one (`left > 0`).
    #[inline(always)]
    fn ask(&mut self) {
        if self.at >= self.end {
            (self.at, self.end) = self.runs[self.next];
            self.next += 1;
        }
        prefetch(self.at);
        self.at = self.at.wrapping_add(64);
        self.left -= 1;
    }
}

/// Ask for the cache line holding `p` (a hint: it reads nothing).
#[inline(always)]
fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch does not access memory as far as the program can
    // tell, whatever the address; it cannot fault.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
