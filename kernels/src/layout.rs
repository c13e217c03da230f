//! Byte layout of a paged KV pool.
//!
//! A pool is one flat array of bf16 values (stored as their `u16` bit
//! patterns) holding `pages` pages back to back. A page holds `page_size`
//! token slots; a slot holds K for every KV head, then V for every KV head:
//!
//! ```text
//! page p, slot s:  [K head 0 .. K head H-1][V head 0 .. V head H-1]   (head_dim each)
//! ```
//!
//! The same layout is used by the CUDA kernels, so a pool can be copied to the
//! device as is.

/// Shape of one KV page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvLayout {
    /// Token slots per page.
    pub page_size: usize,
    /// KV heads per slot (GQA groups).
    pub num_kv_heads: usize,
    /// Elements per head.
    pub head_dim: usize,
}

impl KvLayout {
    /// bf16 elements in one token slot (K and V of every KV head).
    pub fn slot_elems(&self) -> usize {
        2 * self.num_kv_heads * self.head_dim
    }

    /// bf16 elements in one page.
    pub fn page_elems(&self) -> usize {
        self.page_size * self.slot_elems()
    }

    /// Bytes in one page.
    pub fn page_bytes(&self) -> usize {
        self.page_elems() * 2
    }

    /// Element offset of K for `head` in `slot` of `page`.
    pub fn k_offset(&self, page: usize, slot: usize, head: usize) -> usize {
        page * self.page_elems() + slot * self.slot_elems() + head * self.head_dim
    }

    /// Element offset of V for `head` in `slot` of `page`.
    pub fn v_offset(&self, page: usize, slot: usize, head: usize) -> usize {
        self.k_offset(page, slot, head) + self.num_kv_heads * self.head_dim
    }

    /// The elements of one page.
    pub fn page<'a>(&self, kv: &'a [u16], page: usize) -> &'a [u16] {
        let n = self.page_elems();
        &kv[page * n..(page + 1) * n]
    }
}

/// Read-time page tagging: every page carries an owner tag, and attention
/// refuses any page whose tag is not the reader's.
#[derive(Debug, Clone, Copy)]
pub struct TagCheck<'a> {
    /// One tag per pool page.
    pub page_tags: &'a [u64],
    /// The reader's tag.
    pub expected: u64,
}

/// Attention stopped at a page whose owner tag was not the reader's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("page {page} (page-table index {index}) carries tag {found:#x}, reader is {expected:#x}")]
pub struct TagRefused {
    pub index: usize,
    pub page: u32,
    pub found: u64,
    pub expected: u64,
}

/// bf16 bit pattern to f32.
#[inline(always)]
pub fn bf16_to_f32(bits: u16) -> f32 {
    f32::from_bits((bits as u32) << 16)
}

/// f32 to bf16 bit pattern (round to nearest even).
#[inline]
pub fn f32_to_bf16(x: f32) -> u16 {
    half::bf16::from_f32(x).to_bits()
}
