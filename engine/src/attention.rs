//! The attention model whose answer reveals the KV it attended to.
//!
//! One attention layer, head_dim 128, one KV head:
//!
//! * **K** of the token at position `p` is a positional code: the four
//!   base-32 digits of `p`, one-hot each, side by side (4 × 32 = 128 dims,
//!   so 32⁴ = 1,048,576 positions — exactly the incident's context length);
//! * **V** of a token is its code: one-hot of the token id (ids are ASCII, < 128);
//! * decode step `i` asks for the token at position `i + 1` with a sharp
//!   positional query (the K code of that position times a large scale);
//! * the output is read out as the nearest token code (argmax).
//!
//! So a correct engine answers a request with its own prompt, echoed from
//! position 1. If decode attends to pages another request wrote, the answer
//! is that request's text — its canary included. The math is ordinary
//! softmax attention over paged bf16 KV, run by [`kvw_kernels`].

use rand::{Rng, RngCore};

use kvw_kernels::layout::f32_to_bf16;

/// Elements per head.
pub const HEAD_DIM: usize = 128;
/// Base of the positional code.
const BASE: usize = 32;
/// Digits of the positional code.
const DIGITS: usize = 4;
/// Largest position the code can address.
pub const MAX_POSITIONS: u64 = (BASE as u64).pow(DIGITS as u32);
/// Softmax scale: one mismatching digit costs a factor e^-8 ≈ 3·10⁻⁴.
pub const SM_SCALE: f32 = 8.0;
/// The placeholder token upstream puts in place of a rejected prompt.
pub const PLACEHOLDER: u32 = 0;

fn digits(pos: u64) -> [usize; DIGITS] {
    let mut d = [0; DIGITS];
    for (j, x) in d.iter_mut().enumerate() {
        *x = (pos as usize >> (5 * j)) & (BASE - 1);
    }
    d
}

/// K code of position `pos` as bf16 bits.
pub fn k_code(pos: u64) -> [u16; HEAD_DIM] {
    let one = f32_to_bf16(1.0);
    let mut k = [0u16; HEAD_DIM];
    for (j, d) in digits(pos).into_iter().enumerate() {
        k[j * BASE + d] = one;
    }
    k
}

/// V code of a token as bf16 bits.
pub fn v_code(token: u32) -> [u16; HEAD_DIM] {
    let mut v = [0u16; HEAD_DIM];
    v[token as usize % HEAD_DIM] = f32_to_bf16(1.0);
    v
}

/// Query that asks for the token at `pos`.
pub fn query(pos: u64) -> Vec<f32> {
    let mut q = vec![0.0; HEAD_DIM];
    for (j, d) in digits(pos).into_iter().enumerate() {
        q[j * BASE + d] = 1.0;
    }
    q
}

/// Nearest token code to an attention output.
pub fn read_out(out: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &x) in out.iter().enumerate() {
        if x > out[best] {
            best = i;
        }
    }
    best as u32
}

/// Text to token ids (ASCII; anything else becomes `?`).
pub fn encode(text: &str) -> Vec<u32> {
    text.chars()
        .map(|c| {
            if c.is_ascii() && c != '\0' {
                c as u32
            } else {
                '?' as u32
            }
        })
        .collect()
}

/// Token ids to text; the placeholder shows as `␀`.
pub fn decode(ids: &[u32]) -> String {
    ids.iter()
        .map(|&t| match t {
            PLACEHOLDER => '\u{2400}',
            t => char::from_u32(t)
                .filter(|c| !c.is_control())
                .unwrap_or('\u{fffd}'),
        })
        .collect()
}

/// A tenant's canary: a string that must never appear in anybody else's answer.
pub fn canary(tenant: &str, rng: &mut impl RngCore) -> String {
    format!("CANARY-{tenant}-{:04x}", rng.next_u32() & 0xffff)
}

const WORDS: &[&str] = &[
    "ledger",
    "invoice",
    "patient",
    "contract",
    "salary",
    "account",
    "merger",
    "draft",
    "password",
    "diagnosis",
    "routing",
    "quarterly",
    "private",
    "balance",
    "memo",
    "board",
];

/// A tenant's prompt of exactly `len` tokens: a start marker, the canary,
/// then seeded filler words.
pub fn document(tenant: &str, canary: &str, len: usize, rng: &mut impl Rng) -> Vec<u32> {
    let mut text = format!("^{canary} {tenant} confidential:");
    while text.len() < len {
        text.push(' ');
        text.push_str(WORDS[rng.random_range(0..WORDS.len())]);
    }
    text.truncate(len);
    encode(&text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kvw_kernels::cpu::{paged_decode_attention, PagedAttention};
    use kvw_kernels::KvLayout;

    #[test]
    fn attention_over_paged_codes_retrieves_the_asked_position() {
        let layout = KvLayout {
            page_size: 16,
            num_kv_heads: 1,
            head_dim: HEAD_DIM,
        };
        let text = encode("^hello paged world, this spans several pages of sixteen");
        let pages = text.len().div_ceil(16);
        let mut kv = vec![0u16; (pages + 2) * layout.page_elems()];
        // Scatter the pages in reverse order, as a LIFO free list would.
        let table: Vec<u32> = (0..pages as u32).rev().map(|p| p + 2).collect();
        for (pos, &t) in text.iter().enumerate() {
            let page = table[pos / 16] as usize;
            let ko = layout.k_offset(page, pos % 16, 0);
            let vo = layout.v_offset(page, pos % 16, 0);
            kv[ko..ko + HEAD_DIM].copy_from_slice(&k_code(pos as u64));
            kv[vo..vo + HEAD_DIM].copy_from_slice(&v_code(t));
        }
        let mut got = Vec::new();
        for pos in 1..text.len() as u64 {
            let q = query(pos);
            let out = paged_decode_attention(&PagedAttention {
                layout,
                kv: &kv,
                page_table: &table,
                seq_len: text.len(),
                q: &q,
                num_q_heads: 1,
                sm_scale: SM_SCALE,
                tags: None,
            })
            .unwrap();
            got.push(read_out(&out));
        }
        assert_eq!(decode(&got), decode(&text[1..]));
    }

    #[test]
    fn codes_cover_the_incident_context() {
        assert_eq!(MAX_POSITIONS, 1_048_576);
        assert_ne!(k_code(681_280), k_code(681_281));
        assert_eq!(decode(&[PLACEHOLDER, 'a' as u32]), "\u{2400}a");
    }
}
