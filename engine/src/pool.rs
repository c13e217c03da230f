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
use kvw_kernels::KvLayout;

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

/// A mapped pool buffer given back by a dropped pool, for the next pool of
/// the same size: a run of many probes (`kvw bundle`, `kvw bench`) then
/// faults the incident's pages in once, not once per probe.
struct Spare {
    map: memmap2::MmapMut,
    /// Elements per page of the pool that gave it back.
    page_elems: usize,
    /// Its pages whose bytes may not be zero.
    dirty: Vec<u32>,
}

static SPARE: std::sync::Mutex<Vec<Spare>> = std::sync::Mutex::new(Vec::new());

/// Spare buffers kept at most: two pools for each of two probes at a time.
const SPARE_MAX: usize = 4;

/// A pool's K/V elements.
enum Bytes {
    Heap(Vec<u16>),
    Mapped(memmap2::MmapMut),
}

impl Bytes {
    /// Room for `elems` elements that read as zeroes: a fresh buffer, or a
    /// spare one with the pages (of `page_elems`) that still owe their
    /// zeroes.
    fn zeroed(elems: usize, page_elems: usize) -> (Self, Vec<u32>) {
        let len = elems * 2;
        if len < MAPPED_BYTES {
            return (Bytes::Heap(vec![0; elems]), Vec::new());
        }
        let mut spare = SPARE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = spare.iter().position(|s| s.map.len() == len) {
            let Spare {
                mut map,
                page_elems: theirs,
                dirty,
            } = spare.swap_remove(i);
            drop(spare);
            if theirs == page_elems {
                return (Bytes::Mapped(map), dirty);
            }
            // Pages of another size: zero what the last pool wrote now.
            let kv: &mut [u16] = bytemuck::cast_slice_mut(&mut map);
            for p in dirty {
                let p = p as usize;
                kv[p * theirs..(p + 1) * theirs].fill(0);
            }
            return (Bytes::Mapped(map), Vec::new());
        }
        drop(spare);
        match memmap2::MmapMut::map_anon(len) {
            Ok(map) => {
                #[cfg(target_os = "linux")]
                if let Err(e) = map.advise(memmap2::Advice::HugePage) {
                    tracing::debug!("no huge pages for a KV pool: {e}");
                }
                (Bytes::Mapped(map), Vec::new())
            }
            Err(e) => {
                tracing::debug!("no mapping for a KV pool ({e}); using the heap");
                (Bytes::Heap(vec![0; elems]), Vec::new())
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
///
/// A page can read as zeroes before its bytes are: a scrub, or a spare
/// buffer's page the last pool wrote, leaves the page *owing* its zeroes,
/// and the pool writes them only when the page is next read or written in
/// part ([`KvPool::settle`]). A page that is overwritten whole, or never
/// touched again, costs nothing. Every read goes through [`KvPool::kv_of`]
/// or [`KvPool::page_bytes`], which refuse a page that still owes.
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
    /// Pages that read as zeroes whose bytes are not zeroed yet.
    owed: Vec<bool>,
    /// Set while this pool holds bytes lent by another ([`KvPool::lend`]).
    journal: Option<Journal>,
}

/// What a pool holding lent bytes saved to give them back unchanged: each
/// page as it was before the borrower first wrote to it.
struct Journal {
    /// Pages saved, or that need no saving (they owed their zeroes when lent).
    is_saved: Vec<bool>,
    saved: Vec<(u32, Box<[u16]>)>,
}

impl KvPool {
    /// A pool of `pages` pages, every one reading as zeroes. Pages never
    /// touched cost no memory.
    pub fn new(layout: KvLayout, pages: usize, policy: FreeListPolicy) -> Self {
        let (kv, dirty) = Bytes::zeroed(pages * layout.page_elems(), layout.page_elems());
        let mut owed = vec![false; pages];
        for p in dirty {
            owed[p as usize] = true;
        }
        KvPool {
            layout,
            kv,
            meta: vec![PageMeta::default(); pages],
            tags: vec![0; pages],
            free: (0..pages as u32).collect(),
            policy,
            clock: 0,
            changed_at: vec![0; pages],
            owed,
            journal: None,
        }
    }

    /// A pool that continues from this one: the same pages, owners, tags,
    /// free list and clock, working on this pool's bytes, which it saves
    /// page by page before writing to them. [`KvPool::take_back`] restores
    /// them, so one run's bytes serve several continuations in turn without
    /// a copy of the whole pool (`crate::sim::fork`). This pool has no
    /// bytes until then.
    pub fn lend(&mut self) -> KvPool {
        KvPool {
            layout: self.layout,
            kv: std::mem::replace(&mut self.kv, Bytes::Heap(Vec::new())),
            meta: self.meta.clone(),
            tags: self.tags.clone(),
            free: self.free.clone(),
            policy: self.policy,
            clock: self.clock,
            changed_at: self.changed_at.clone(),
            owed: self.owed.clone(),
            // A page that owes its zeroes here reads as zeroes whatever its
            // bytes: the borrower may write over them without saving them.
            journal: Some(Journal {
                is_saved: self.owed.clone(),
                saved: Vec::new(),
            }),
        }
    }

    /// Take back the bytes lent to `borrower`, every page it wrote to
    /// restored to what it was when lent.
    pub fn take_back(&mut self, mut borrower: KvPool) {
        let journal = borrower
            .journal
            .take()
            .expect("take_back is given the pool its bytes were lent to");
        let mut kv = std::mem::replace(&mut borrower.kv, Bytes::Heap(Vec::new()));
        let n = self.layout.page_elems();
        let bytes = kv.get_mut();
        for (page, saved) in journal.saved {
            let p = page as usize;
            bytes[p * n..(p + 1) * n].copy_from_slice(&saved);
        }
        self.kv = kv;
    }

    /// While the bytes are lent, save `page` before its first write.
    fn before_write(&mut self, page: u32) {
        if let Some(journal) = &mut self.journal {
            if !journal.is_saved[page as usize] {
                journal.is_saved[page as usize] = true;
                let bytes = self.layout.page(self.kv.get(), page as usize);
                journal.saved.push((page, bytes.into()));
            }
        }
    }

    /// Write the zeroes `pages` owe, so their bytes can be read.
    pub fn settle(&mut self, pages: &[u32]) {
        for &p in pages {
            if self.owed[p as usize] {
                self.before_write(p);
                let n = self.layout.page_elems();
                self.kv.get_mut()[p as usize * n..(p as usize + 1) * n].fill(0);
                self.owed[p as usize] = false;
            }
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

    /// Return pages to the free list. Bytes stay as they are unless `scrub`
    /// (the pages then read as zeroes); with `canary` the pages are marked
    /// as poisoned. FIFO appends at the tail; LIFO pushes each page to the
    /// head, so the page freed last is reused first.
    pub fn free(&mut self, pages: &[u32], scrub: bool, canary: bool) -> Result<(), PoolError> {
        for &p in pages {
            if !self.meta[p as usize].allocated {
                return Err(PoolError::DoubleFree(p));
            }
        }
        if scrub {
            for &p in pages {
                self.owed[p as usize] = true;
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

    /// The pool's bytes, for a read of `pages` (settled first: a page that
    /// still owes its zeroes is a bug of the caller and panics).
    pub fn kv_of(&self, pages: &[u32]) -> &[u16] {
        if let Some(&p) = pages.iter().find(|&&p| self.owed[p as usize]) {
            panic!("page {p} is read before its zeroes are written (settle it first)");
        }
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
        self.settle(&[page]);
        self.before_write(page);
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
        self.settle(&[page]);
        self.before_write(page);
        let l = self.layout;
        let start = l.k_offset(page as usize, from, 0);
        let end = (page as usize + 1) * l.page_elems();
        self.kv.get_mut()[start..end].fill(0);
        self.changed(page);
    }

    /// Overwrite a whole page with bytes from elsewhere (an RDMA page write).
    pub fn write_page(&mut self, page: u32, bytes: &[u16], writer: WriterId) {
        self.before_write(page);
        self.owed[page as usize] = false;
        let n = self.layout.page_elems();
        self.kv.get_mut()[page as usize * n..(page as usize + 1) * n].copy_from_slice(bytes);
        self.stamp(page, writer);
    }

    /// The bytes of one page (settled first, as for [`KvPool::kv_of`]).
    pub fn page_bytes(&self, page: u32) -> &[u16] {
        self.layout.page(self.kv_of(&[page]), page as usize)
    }
}

impl Drop for KvPool {
    /// A mapped buffer goes back to [`SPARE`] as it is, with the list of
    /// pages whose bytes this pool may have left non-zero: the next pool of
    /// its size owes those pages their zeroes.
    fn drop(&mut self) {
        let Bytes::Mapped(map) = std::mem::replace(&mut self.kv, Bytes::Heap(Vec::new())) else {
            return;
        };
        let dirty = (0..self.meta.len() as u32)
            .filter(|&p| self.changed_at[p as usize] != 0 || self.owed[p as usize])
            .collect();
        let mut spare = SPARE.lock().unwrap_or_else(|e| e.into_inner());
        if spare.len() < SPARE_MAX {
            spare.push(Spare {
                map,
                page_elems: self.layout.page_elems(),
                dirty,
            });
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
        p.settle(&[0]);
        assert!(p.page_bytes(0).iter().all(|&x| x == 0));
        assert_eq!(p.meta(0).writer, None);
    }

    #[test]
    #[should_panic(expected = "before its zeroes are written")]
    fn a_scrubbed_page_is_not_read_before_it_is_settled() {
        let mut p = KvPool::new(layout(), 2, FreeListPolicy::Lifo);
        let a = p.alloc(1).unwrap();
        p.write_slot(
            a[0],
            0,
            &[5; 8],
            &[5; 8],
            WriterId {
                req: 0,
                generation: 0,
            },
        );
        p.free(&a, true, false).unwrap();
        p.kv_of(&a);
    }

    /// A borrower's writes of every kind (slot, tail, page, a scrub then a
    /// read) land in the lent bytes; taking them back restores every page.
    #[test]
    fn lent_bytes_come_back_as_they_were() {
        let w = WriterId {
            req: 0,
            generation: 0,
        };
        let mut lender = KvPool::new(layout(), 6, FreeListPolicy::Lifo);
        let pages = lender.alloc(6).unwrap();
        for (i, &page) in pages.iter().enumerate() {
            lender.write_page(page, &[i as u16 + 1; 64], w);
        }
        // Page 5 owes its zeroes when lent: a borrower need not save it.
        lender.free(&pages[5..], true, false).unwrap();
        let five = |p: &KvPool| p.kv_of(&pages[..5])[..5 * 64].to_vec();
        let before = five(&lender);
        for round in 0..2 {
            let mut b = lender.lend();
            b.write_slot(pages[0], 1, &[9; 8], &[9; 8], w);
            b.zero_tail(pages[1], 2);
            b.write_page(pages[2], &[7; 64], w);
            b.free(&pages[3..5], true, false).unwrap();
            b.settle(&pages[3..]);
            assert!(b.page_bytes(pages[3]).iter().all(|&x| x == 0));
            assert_eq!(b.page_bytes(pages[0])[16], 9, "round {round}");
            assert_eq!(b.page_bytes(pages[2])[0], 7);
            lender.take_back(b);
            assert_eq!(five(&lender), before, "round {round}");
        }
        lender.settle(&pages[5..]);
        assert!(lender.page_bytes(pages[5]).iter().all(|&x| x == 0));
    }

    /// A buffer a dropped pool gave back reads as zeroes in the next pool of
    /// its size, page by page, before and after a write in part.
    #[test]
    fn a_spare_buffer_reads_as_zeroes() {
        let l = KvLayout {
            page_size: 64,
            num_kv_heads: 1,
            head_dim: 128,
        };
        let pages = MAPPED_BYTES / l.page_bytes();
        let w = WriterId {
            req: 0,
            generation: 0,
        };
        let all: Vec<u32> = (0..pages as u32).collect();
        let mut first = KvPool::new(l, pages, FreeListPolicy::Lifo);
        first.alloc(pages).unwrap();
        for &p in &all[..pages / 2] {
            first.write_page(p, &vec![3; l.page_elems()], w);
        }
        drop(first);
        let mut next = KvPool::new(l, pages, FreeListPolicy::Lifo);
        next.alloc(pages).unwrap();
        next.write_slot(1, 0, &[1; 128], &[2; 128], w);
        next.settle(&all);
        let kv = next.kv_of(&all);
        let (slot, rest) = kv.split_at(l.slot_elems());
        assert!(slot.iter().all(|&x| x == 0), "page 0 reads as zeroes");
        assert!(rest[..l.page_elems() - l.slot_elems()]
            .iter()
            .all(|&x| x == 0));
        let page1 = next.page_bytes(1);
        assert_eq!((page1[0], page1[128]), (1, 2));
        assert!(
            page1[256..].iter().all(|&x| x == 0),
            "the rest of a page written in part"
        );
        assert!(kv[2 * l.page_elems()..].iter().all(|&x| x == 0));
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
