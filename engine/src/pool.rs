//! A paged KV pool with real bytes.
//!
//! Pages hold bf16 K/V bytes in the layout of [`kvw_kernels::layout`]. Like a
//! real serving engine, freeing a page does not clear it: the next owner
//! inherits the previous owner's bytes until it overwrites them. Each page
//! also remembers who last wrote it (request and KV generation) so a receipt
//! can say whose bytes decode read; that bookkeeping never influences what
//! the kernels compute.

use std::collections::VecDeque;

use kvw_evidence::FreeListPolicy;
use kvw_kernels::{cpu, KvLayout};
use rayon::prelude::*;

/// Who wrote a page: an index into the run's request registry and the
/// request's KV generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WriterId {
    pub req: u32,
    pub generation: u32,
}

impl WriterId {
    /// The owner tag written next to the page for read-time tag checks.
    pub fn tag(self) -> u64 {
        ((self.req as u64 + 1) << 32) | self.generation as u64
    }
}

/// Bookkeeping of one page.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PageMeta {
    /// Last writer of the page's bytes; `None` if never written or scrubbed.
    pub writer: Option<WriterId>,
    /// Whether the page is handed out.
    pub allocated: bool,
    /// `--kv-canary`: the page was poisoned when freed and not rewritten since.
    pub canary: bool,
}

/// Pool operation that broke an invariant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    #[error("page {0} freed while not allocated (double free)")]
    DoubleFree(u32),
}

/// Pools of at least this many bytes are an anonymous mapping with huge
/// pages advised: the incident's decode pool is about 350 MB written, and
/// the first touch of its pages then faults once per 2 MiB instead of once
/// per 4 KiB (the probe's system time fell from about 0.5 s to 0.1 s).
const MAPPED_BYTES: usize = 16 << 20;

/// Mapped pool buffers given back by dropped pools, their bytes zeroed
/// again, for the next pool of the same size: a run of many probes (`kvw
/// bundle`, `kvw bench`) then faults the incident's pages in once, not
/// once per probe.
static SPARE: std::sync::Mutex<Vec<memmap2::MmapMut>> = std::sync::Mutex::new(Vec::new());

/// Spare buffers kept at most: two pools for each of two probes at a time.
const SPARE_MAX: usize = 4;

/// A pool's K/V elements, zeroed when made.
enum Bytes {
    Heap(Vec<u16>),
    Mapped(memmap2::MmapMut),
}

impl Bytes {
    fn zeroed(elems: usize) -> Self {
        let len = elems * 2;
        if len < MAPPED_BYTES {
            return Bytes::Heap(vec![0; elems]);
        }
        let mut spare = SPARE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = spare.iter().position(|m| m.len() == len) {
            return Bytes::Mapped(spare.swap_remove(i));
        }
        drop(spare);
        match memmap2::MmapMut::map_anon(len) {
            Ok(map) => {
                #[cfg(target_os = "linux")]
                if let Err(e) = map.advise(memmap2::Advice::HugePage) {
                    tracing::debug!("no huge pages for a KV pool: {e}");
                }
                Bytes::Mapped(map)
            }
            Err(e) => {
                tracing::debug!("no mapping for a KV pool ({e}); using the heap");
                Bytes::Heap(vec![0; elems])
            }
        }
    }

    fn get(&self) -> &[u16] {
        match self {
            Bytes::Heap(v) => v,
            Bytes::Mapped(m) => bytemuck::cast_slice(m),
        }
    }

    fn get_mut(&mut self) -> &mut [u16] {
        match self {
            Bytes::Heap(v) => v,
            Bytes::Mapped(m) => bytemuck::cast_slice_mut(m),
        }
    }
}

/// One worker's KV pool.
pub struct KvPool {
    pub layout: KvLayout,
    kv: Bytes,
    meta: Vec<PageMeta>,
    /// Owner tag per page (read-time page tagging).
    tags: Vec<u64>,
    free: VecDeque<u32>,
    policy: FreeListPolicy,
    /// Byte changes so far: each write, tail zeroing or scrub of a page
    /// takes the next value.
    clock: u64,
    /// The clock value of each page's last byte change (0: none yet).
    changed_at: Vec<u64>,
}

impl KvPool {
    /// A pool of `pages` pages. The byte array is zero-initialised lazily by
    /// the allocator or the kernel, so pages never touched cost no memory.
    pub fn new(layout: KvLayout, pages: usize, policy: FreeListPolicy) -> Self {
        KvPool {
            layout,
            kv: Bytes::zeroed(pages * layout.page_elems()),
            meta: vec![PageMeta::default(); pages],
            tags: vec![0; pages],
            free: (0..pages as u32).collect(),
            policy,
            clock: 0,
            changed_at: vec![0; pages],
        }
    }

    pub fn pages_total(&self) -> usize {
        self.meta.len()
    }

    pub fn free_pages(&self) -> usize {
        self.free.len()
    }

    /// Take `n` pages from the head of the free list, or `None` if short.
    pub fn alloc(&mut self, n: usize) -> Option<Vec<u32>> {
        if self.free.len() < n {
            return None;
        }
        let pages: Vec<u32> = self.free.drain(..n).collect();
        for &p in &pages {
            self.meta[p as usize].allocated = true;
        }
        Some(pages)
    }

    /// Return pages to the free list. Bytes stay as they are unless `scrub`;
    /// with `canary` the pages are marked as poisoned. FIFO appends at the
    /// tail; LIFO pushes each page to the head, so the page freed last is
    /// reused first.
    pub fn free(&mut self, pages: &[u32], scrub: bool, canary: bool) -> Result<(), PoolError> {
        for &p in pages {
            if !self.meta[p as usize].allocated {
                return Err(PoolError::DoubleFree(p));
            }
        }
        if scrub {
            cpu::scrub_pages(self.layout, self.kv.get_mut(), pages);
            for &p in pages {
                self.changed(p);
            }
        }
        for &p in pages {
            let m = &mut self.meta[p as usize];
            m.allocated = false;
            m.canary = canary;
            if scrub {
                m.writer = None;
                self.tags[p as usize] = 0;
            }
            match self.policy {
                FreeListPolicy::Fifo => self.free.push_back(p),
                FreeListPolicy::Lifo => self.free.push_front(p),
            }
        }
        Ok(())
    }

    pub fn meta(&self, page: u32) -> PageMeta {
        self.meta[page as usize]
    }

    pub fn metas(&self) -> &[PageMeta] {
        &self.meta
    }

    pub fn tags(&self) -> &[u64] {
        &self.tags
    }

    pub fn kv(&self) -> &[u16] {
        self.kv.get()
    }

    /// The pool's clock: how many byte changes it has seen.
    pub fn clock(&self) -> u64 {
        self.clock
    }

    /// Whether no byte of `pages` (nor their owner tags) changed after clock
    /// value `since`.
    pub fn unchanged_since(&self, pages: &[u32], since: u64) -> bool {
        pages.iter().all(|&p| self.changed_at[p as usize] <= since)
    }

    fn changed(&mut self, page: u32) {
        self.clock += 1;
        self.changed_at[page as usize] = self.clock;
    }

    /// Record that `writer` now owns the bytes of `page`.
    fn stamp(&mut self, page: u32, writer: WriterId) {
        self.changed(page);
        let m = &mut self.meta[page as usize];
        m.writer = Some(writer);
        m.canary = false;
        self.tags[page as usize] = writer.tag();
    }

    /// Write one token slot: K and V for the (single) KV head.
    pub fn write_slot(&mut self, page: u32, slot: usize, k: &[u16], v: &[u16], writer: WriterId) {
        let l = self.layout;
        let ko = l.k_offset(page as usize, slot, 0);
        let vo = l.v_offset(page as usize, slot, 0);
        let kv = self.kv.get_mut();
        kv[ko..ko + k.len()].copy_from_slice(k);
        kv[vo..vo + v.len()].copy_from_slice(v);
        self.stamp(page, writer);
    }

    /// Zero the slots `from..page_size` of a page (the forward pads the tail
    /// of a request's last page).
    pub fn zero_tail(&mut self, page: u32, from: usize) {
        let l = self.layout;
        let start = l.k_offset(page as usize, from, 0);
        let end = (page as usize + 1) * l.page_elems();
        self.kv.get_mut()[start..end].fill(0);
        self.changed(page);
    }

    /// Overwrite a whole page with bytes from elsewhere (an RDMA page write).
    pub fn write_page(&mut self, page: u32, bytes: &[u16], writer: WriterId) {
        let n = self.layout.page_elems();
        self.kv.get_mut()[page as usize * n..(page as usize + 1) * n].copy_from_slice(bytes);
        self.stamp(page, writer);
    }

    /// The bytes of one page.
    pub fn page_bytes(&self, page: u32) -> &[u16] {
        self.layout.page(self.kv.get(), page as usize)
    }
}

impl Drop for KvPool {
    /// A mapped buffer goes back to [`SPARE`] with the pages this pool
    /// changed zeroed again (the others were never written), so the next
    /// pool starts from zeroes exactly as a fresh mapping does.
    fn drop(&mut self) {
        let Bytes::Mapped(map) = std::mem::replace(&mut self.kv, Bytes::Heap(Vec::new())) else {
            return;
        };
        let mut spare = SPARE.lock().unwrap_or_else(|e| e.into_inner());
        if spare.len() >= SPARE_MAX {
            return;
        }
        drop(spare);
        let mut map = map;
        let n = self.layout.page_elems();
        let kv: &mut [u16] = bytemuck::cast_slice_mut(&mut map);
        kv.par_chunks_mut(n)
            .zip(&self.changed_at)
            .filter(|(_, &at)| at != 0)
            .for_each(|(page, _)| page.fill(0));
        spare = SPARE.lock().unwrap_or_else(|e| e.into_inner());
        if spare.len() < SPARE_MAX {
            spare.push(map);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> KvLayout {
        KvLayout {
            page_size: 4,
            num_kv_heads: 1,
            head_dim: 8,
        }
    }

    #[test]
    fn lifo_reuses_the_last_freed_page_first_and_keeps_bytes() {
        let mut p = KvPool::new(layout(), 8, FreeListPolicy::Lifo);
        let a = p.alloc(3).unwrap();
        assert_eq!(a, vec![0, 1, 2]);
        let w = WriterId {
            req: 0,
            generation: 0,
        };
        p.write_slot(1, 0, &[7; 8], &[9; 8], w);
        p.free(&a, false, false).unwrap();
        let b = p.alloc(3).unwrap();
        assert_eq!(b, vec![2, 1, 0]);
        assert_eq!(p.page_bytes(1)[0], 7, "freed bytes are not cleared");
        assert_eq!(p.meta(1).writer, Some(w));
    }

    #[test]
    fn every_byte_change_marks_its_page_only() {
        let mut p = KvPool::new(layout(), 4, FreeListPolicy::Lifo);
        let w = WriterId {
            req: 0,
            generation: 0,
        };
        let pages = p.alloc(4).unwrap();
        let mut since = p.clock();
        let changes: [&dyn Fn(&mut KvPool); 4] = [
            &|p| p.write_slot(1, 0, &[1; 8], &[1; 8], w),
            &|p| p.write_page(1, &[2; 64], w),
            &|p| p.zero_tail(1, 2),
            &|p| {
                p.free(&[1], true, false).unwrap();
                assert_eq!(p.alloc(1), Some(vec![1]));
            },
        ];
        for change in changes {
            change(&mut p);
            assert!(!p.unchanged_since(&[1], since));
            assert!(p.unchanged_since(&[0, 2, 3], since));
            since = p.clock();
            assert!(p.unchanged_since(&pages, since));
        }
        // Freeing without a scrub changes no byte.
        p.free(&[2], false, false).unwrap();
        assert!(p.unchanged_since(&pages, since));
    }

    #[test]
    fn fifo_reuses_oldest_free_page_and_scrub_clears() {
        let mut p = KvPool::new(layout(), 4, FreeListPolicy::Fifo);
        let a = p.alloc(2).unwrap();
        p.write_slot(
            0,
            1,
            &[3; 8],
            &[3; 8],
            WriterId {
                req: 1,
                generation: 0,
            },
        );
        p.free(&a, true, false).unwrap();
        assert_eq!(p.alloc(2).unwrap(), vec![2, 3]);
        assert_eq!(p.alloc(2).unwrap(), vec![0, 1]);
        assert!(p.page_bytes(0).iter().all(|&x| x == 0));
        assert_eq!(p.meta(0).writer, None);
    }

    #[test]
    fn double_free_is_refused() {
        let mut p = KvPool::new(layout(), 2, FreeListPolicy::Lifo);
        let a = p.alloc(1).unwrap();
        p.free(&a, false, false).unwrap();
        assert_eq!(p.free(&a, false, false), Err(PoolError::DoubleFree(0)));
        assert!(p.alloc(3).is_none());
    }
}
