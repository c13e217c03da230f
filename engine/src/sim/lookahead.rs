//! Decode attention that reads a long prompt's full splits once.
//!
//! Each decode step attends over the whole page table with the query of its
//! own position ([`attention::query`]), so step after step reads the same
//! prompt pages again. On the CPU, when the pages read fill at least one
//! whole split of [`PAGES_PER_SPLIT`], the first step reads those full
//! splits once for the queries of every step still to come and keeps each
//! query's split states; a later step uses them when its table still starts
//! with those pages and none of their bytes changed since (the pool's
//! clock), and reads only the rest itself. The kernel folds each query in
//! the same order either way ([`cpu::split_states`]), so every output bit is
//! what a read of every page at every step gives
//! ([`Backend::CpuPerStep`]); what decides whether the kept states may be
//! used is the bytes, never time.

use kvw_kernels::cpu::{self, PagedAttention, SplitState, PAGES_PER_SPLIT};
use kvw_kernels::TagRefused;

use crate::attention;
use crate::backend::Backend;
use crate::pool::KvPool;

/// Split states of a request's full prompt splits for its coming steps.
#[derive(Debug, Clone)]
pub struct Lookahead {
    /// The pages the kept splits cover, in table order.
    pages: Vec<u32>,
    /// The decode pool's clock when they were read.
    since: u64,
    /// Decode step (output tokens so far) of the first kept query.
    first_step: usize,
    /// `[split][step - first_step]`.
    states: Vec<Vec<SplitState>>,
}

impl Lookahead {
    fn serves(&self, pool: &KvPool, a: &PagedAttention<'_>, step: usize) -> bool {
        step >= self.first_step
            && self
                .states
                .first()
                .is_some_and(|s| step - self.first_step < s.len())
            && a.page_table.starts_with(&self.pages)
            && a.seq_len >= self.pages.len() * a.layout.page_size
            && pool.unchanged_since(&self.pages, self.since)
    }
}

/// Decode attention of step `step` (output tokens so far) of a request that
/// stops after `steps` tokens; `a.q` is that step's query and `a.kv` the
/// bytes of `pool`.
pub fn attend(
    backend: &Backend,
    pool: &KvPool,
    kept: &mut Option<Box<Lookahead>>,
    a: &PagedAttention<'_>,
    step: usize,
    steps: usize,
) -> Result<Vec<f32>, TagRefused> {
    // The kept states are made for the queries of `attention::query`; a
    // call with another query reads every page.
    if !backend.looks_ahead() || a.q != attention::query(1 + step as u64).as_slice() {
        return backend.attend(a);
    }
    cpu::check_tags(a)?;
    if !kept.as_ref().is_some_and(|k| k.serves(pool, a, step)) {
        let full = (a.seq_len / a.layout.page_size).min(a.page_table.len()) / PAGES_PER_SPLIT;
        *kept = None;
        if full == 0 || steps < step + 2 {
            return backend.attend(a);
        }
        let queries: Vec<Vec<f32>> = (step..steps)
            .map(|s| attention::query(1 + s as u64))
            .collect();
        let refs: Vec<&[f32]> = queries.iter().map(Vec::as_slice).collect();
        *kept = Some(Box::new(Lookahead {
            pages: a.page_table[..full * PAGES_PER_SPLIT].to_vec(),
            since: pool.clock(),
            first_step: step,
            states: cpu::split_states(a, 0..full, &refs),
        }));
    }
    let Some(k) = kept.as_deref() else {
        return backend.attend(a);
    };
    let at = step - k.first_step;
    let tail = cpu::split_states(a, k.states.len()..cpu::split_count(a), &[a.q]);
    Ok(cpu::combine(
        k.states
            .iter()
            .map(|s| &s[at])
            .chain(tail.iter().map(|s| &s[0])),
        a.num_q_heads,
        a.layout.head_dim,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::{k_code, v_code, HEAD_DIM, SM_SCALE};
    use crate::pool::WriterId;
    use kvw_evidence::FreeListPolicy;
    use kvw_kernels::KvLayout;

    /// Kept states serve the steps they were made for, and a byte change in
    /// their pages makes the next step read them again: each step's output
    /// is the bits of a read of every page.
    #[test]
    fn kept_states_serve_until_their_pages_change() {
        let layout = KvLayout {
            page_size: 2,
            num_kv_heads: 1,
            head_dim: HEAD_DIM,
        };
        let pages = PAGES_PER_SPLIT + 3;
        let mut pool = KvPool::new(layout, pages + 1, FreeListPolicy::Fifo);
        let table = pool.alloc(pages).unwrap();
        let w = WriterId {
            req: 0,
            generation: 0,
        };
        for pos in 0..pages * 2 {
            let token = (pos * 7 % 90) as u32 + 32;
            pool.write_slot(
                table[pos / 2],
                pos % 2,
                &k_code(pos as u64),
                &v_code(token),
                w,
            );
        }
        let mut kept = None;
        let mut since = Vec::new();
        for step in 0..4 {
            if step == 2 {
                // Another writer's bytes land in a page the kept split covers.
                pool.write_slot(
                    table[5],
                    1,
                    &k_code(3),
                    &v_code(90),
                    WriterId {
                        req: 1,
                        generation: 0,
                    },
                );
            }
            let q = attention::query(1 + step as u64);
            let a = PagedAttention {
                layout,
                kv: pool.kv_of(&table),
                page_table: &table,
                seq_len: pages * 2 - 1,
                q: &q,
                num_q_heads: 1,
                sm_scale: SM_SCALE,
                tags: None,
            };
            let got = attend(&Backend::Cpu, &pool, &mut kept, &a, step, 4).unwrap();
            let want = cpu::paged_decode_attention(&a).unwrap();
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "step {step}");
            since.push(kept.as_ref().map(|k| (k.since, k.first_step)));
        }
        let first = since[0].expect("the first step keeps the full split");
        assert_eq!(
            since[1],
            Some(first),
            "step 1 is served from the kept states"
        );
        let again = since[2].expect("step 2 keeps its own states");
        assert_eq!(
            again.1, 2,
            "the changed page made step 2 read the split again"
        );
        assert_eq!(since[3], Some(again));
    }
}
