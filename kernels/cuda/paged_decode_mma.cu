// Paged decode attention for a GQA group of 8 query heads on the tensor
// cores, with a multi-stage cp.async copy ring, the owner-tag check running
// ahead of the copies, and the split merge fused into the last block.
//
// Why this file exists: at 8 query heads per KV head the scalar kernel
// (paged_decode_attention.cu, kept as the reference variant) spends about
// 125 warp instructions on every 512-byte token (FMAs, shuffles, exp), so it
// is bound by instruction issue, not by memory. Here Q K^T and P V are
// mma.sync m16n8k16 products (bf16 in, f32 accumulate) over all 8 heads at
// once, so a 16-token tile costs 32 MMAs and a few dozen other instructions.
//
// Same inputs, layout, refusal rule and partial format as the reference
// kernel; the CPU reference is kernels/src/cpu.rs::paged_decode_attention.
//
// Precision. Both MMA operands are bf16. K and V are bf16 already. Q (f32)
// and the softmax weights P (f32) are split into a bf16 high part and a bf16
// low part (x - hi); the 16 rows of the MMA's A operand hold the 8 heads'
// high parts in rows 0-7 and their low parts in rows 8-15, so one MMA gives
// both halves and the thread adds them: Q K^T comes out within f32 rounding
// of the f32 product, P V within about 2^-16 of it, at no extra MMA.
//
// Work split: grid (splits, kv_heads * group / 8, batch), 128 threads (4
// warps). A block walks one range of the request's page table for one KV
// head. Positions are taken in stages of 64 tokens (32 KB of K and V); each
// warp owns 16 tokens of a stage. STAGES stage buffers in dynamic shared
// memory form a ring: while stage k is computed, stages k+1 and k+2 are in
// flight (cp.async.cg, 16 bytes a copy, L1 bypassed). K and V rows are
// stored with their 16-byte chunks XOR-swizzled by (token & 7), so the
// ldmatrix reads of 8 rows hit 8 distinct bank groups.
//
// Tags, failing closed, ahead of the copies: the page ids and owner tags a
// stage needs are loaded by one thread per page two iterations before the
// stage is copied (page id, then tag, then compare: one step per
// iteration, so no load latency is exposed), and the verdict joins the
// barrier that precedes the copy (__syncthreads_or). A block copies no byte
// of a page whose tag has not been compared. On a mismatch it records the
// page-table index in refused[b] (smallest wins), stops, and contributes an
// empty partial.
//
// Fused combine: every block writes its partial (max, sum, acc in the log2
// domain, the reference kernel's format), then counts itself in
// arrivals[b * gridDim.y + y]; the last block of (request, head group)
// merges the splits of its 8 heads and writes the output, or NaN when the
// request was refused. Every head group reads every page of the request, so
// a foreign page is refused by a block of each group, and that block has
// arrived before its group's last one reads refused[b]. The host zeroes
// refused[] and the counters before every launch.
//
// Self-contained for NVRTC: no includes. The CPU emulator
// (emulator/emu.h) defines KVW_HOST_EMULATION and supplies plain C++
// versions of the inline-PTX helpers, including the fragment semantics of
// ldmatrix and mma.sync.

typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

#define HEAD_DIM 128
#define MMA_THREADS 128
#define MMA_WARPS 4
#define HEADS 8
#define STAGE_TOKENS 64
#define WARP_TOKENS 16
#define STAGES 3
// K or V of one stage: 64 rows of 256 bytes.
#define TILE_BYTES (STAGE_TOKENS * HEAD_DIM * 2)
#define STAGE_BYTES (2 * TILE_BYTES)
// A stage of 64 positions touches at most 64 / 2 + 1 pages (page_size >= 2).
#define MAX_STAGE_PAGES 33
// Page-id lists: one more than the ring, because a stage's list is written
// (by threads already in iteration k) while slower threads may still be
// issuing the copies of the stage STAGES back.
#define PAGE_LISTS (STAGES + 1)
#define NO_REFUSAL 0xffffffffu

#ifndef KVW_HOST_EMULATION
extern __shared__ __align__(16) unsigned char kvw_mma_smem[];
#define MMA_SMEM kvw_mma_smem

__device__ __forceinline__ float mma_neg_inf() { return __int_as_float(0xff800000); }

__device__ __forceinline__ float mma_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ u32 smem_u32(const void* p) {
    u32 r;
    asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p));
    return r;
}

// 16 bytes global -> shared, asynchronously, through L2 only.
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_u32(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Wait until at most STAGES - 2 committed groups of this thread are pending.
__device__ __forceinline__ void cp_async_wait_ring() {
    asm volatile("cp.async.wait_group %0;" ::"n"(STAGES - 2) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// Four 8x8 b16 matrices; lanes 8i..8i+7 give the row addresses of matrix i.
__device__ __forceinline__ void ldmatrix_x4(u32* r, const void* row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(row))
                 : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(u32* r, const void* row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(row))
                 : "memory");
}

// D = A (16x16, row) * B (16x8, col) + D, bf16 in, f32 accumulate.
__device__ __forceinline__ void mma_bf16_16816(float* d, const u32* a, u32 b0, u32 b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Loads of values other blocks of this launch wrote: through L2, not L1.
__device__ __forceinline__ float load_cg(const float* p) {
    float v;
    asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
}
__device__ __forceinline__ u32 load_cg(const u32* p) {
    u32 v;
    asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
}
#endif

// f32 -> bf16 bits, round to nearest even (finite inputs).
__device__ __forceinline__ u32 bf16_bits(float x) {
    const u32 u = __float_as_uint(x);
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}
__device__ __forceinline__ float bf16_value(u32 h) { return __uint_as_float(h << 16); }

// Split x and y into bf16 high and low parts, packed as MMA operand words
// (the lower-index element in the low half).
__device__ __forceinline__ void split_pair(float x, float y, u32& hi, u32& lo) {
    const u32 hx = bf16_bits(x), hy = bf16_bits(y);
    hi = hx | (hy << 16);
    lo = bf16_bits(x - bf16_value(hx)) | (bf16_bits(y - bf16_value(hy)) << 16);
}

// Byte offset of 16-byte chunk `chunk` of row `row` in a swizzled tile.
__device__ __forceinline__ u32 swz(u32 row, u32 chunk) { return row * (HEAD_DIM * 2) + ((chunk ^ (row & 7u)) << 4); }

extern "C" __global__ void __launch_bounds__(MMA_THREADS, 2) paged_decode_mma_g8(
    const u16* __restrict__ kv,
    const u32* __restrict__ page_tables,
    const u32* __restrict__ table_offsets,
    const u32* __restrict__ seq_lens,
    const float* __restrict__ q,
    const u64* __restrict__ page_tags,
    const u64* __restrict__ expected_tags,
    u32 check_tags,
    u32 num_kv_heads,
    u32 group,
    u32 page_size,
    u32 page_magic,
    u32 pages_per_split,
    u32 num_splits,
    float scale_log2,
    float* __restrict__ part_m,
    float* __restrict__ part_l,
    float* __restrict__ part_acc,
    u32* __restrict__ refused,
    u32* __restrict__ arrivals,
    float* __restrict__ out) {
    __shared__ u32 sm_pages[PAGE_LISTS][MAX_STAGE_PAGES];
    __shared__ u32 sm_last;
    unsigned char* const ring = MMA_SMEM;

    const u32 tid = threadIdx.x;
    const u32 warp = tid / 32;
    const u32 lane = tid % 32;
    const u32 g = lane / 4;  // MMA group: head row, token row
    const u32 t = lane % 4;  // thread in group
    const u32 split = blockIdx.x;
    const u32 chunks = group / HEADS;
    const u32 kvh = blockIdx.y / chunks;
    const u32 qh0 = kvh * group + (blockIdx.y % chunks) * HEADS;
    const u32 b = blockIdx.z;
    const u32 num_q_heads = num_kv_heads * group;

    const u32 seq_len = seq_lens[b];
    const u32 used_pages = (seq_len + page_size - 1) / page_size;
    const u32 page_begin = split * pages_per_split;
    const u32 page_end = min(page_begin + pages_per_split, used_pages);
    const u32* table = page_tables + table_offsets[b];
    const size_t out_row = ((size_t)b * num_splits + split) * num_q_heads + qh0;
    const u32 pos_begin = page_begin * page_size;
    const u32 pos_end = page_begin < page_end ? min(page_end * page_size, seq_len) : pos_begin;
    const u32 nstages = (pos_end - pos_begin + STAGE_TOKENS - 1) / STAGE_TOKENS;
    const u64 expected = expected_tags[b];

    const size_t slot_elems = (size_t)2 * num_kv_heads * HEAD_DIM;
    const size_t page_elems = (size_t)page_size * slot_elems;

    // The page-table index this thread looks after in stage k (one thread
    // per page of the stage), or false when the stage has no such page.
    auto stage_index = [&](u32 k, u32& index) -> bool {
        if (k >= nstages) return false;
        const u32 s0 = pos_begin + k * STAGE_TOKENS;
        const u32 s1 = min(s0 + STAGE_TOKENS, pos_end);
        const u32 p0 = __umulhi(s0, page_magic);
        index = p0 + tid;
        return index <= __umulhi(s1 - 1, page_magic);
    };
    // Compare a loaded tag; record a refusal (smallest index wins).
    auto tag_bad = [&](bool valid, u32 index, u64 tag) -> bool {
        if (!valid || check_tags == 0u || tag == expected) return false;
        atomicMax(&refused[b], NO_REFUSAL - index);
        return true;
    };

    // Prologue: stages 0 .. STAGES-1 checked at once (page ids to shared).
    bool bad = false;
#pragma unroll
    for (u32 k = 0; k < STAGES; ++k) {
        u32 i = 0;
        const bool v = stage_index(k, i);
        if (v) {
            const u32 page = table[i];
            sm_pages[k][tid] = page;
            bad |= tag_bad(true, i, check_tags ? page_tags[page] : expected);
        }
    }
    // The rolling check: stage k+STAGES is finalised (tag compared, page id
    // stored) in iteration k, its tag loaded in iteration k-1, its page id
    // in iteration k-2.
    u32 idx_fin = 0, idx_tag = 0;
    bool v_fin = stage_index(STAGES, idx_fin);
    bool v_tag = stage_index(STAGES + 1, idx_tag);
    u32 page_fin = v_fin ? table[idx_fin] : 0u;
    u32 page_tag = v_tag ? table[idx_tag] : 0u;
    u64 tag_fin = (v_fin && check_tags) ? page_tags[page_fin] : expected;

    // Queries, pre-scaled so that exp2(score) == exp(q . k * sm_scale), as
    // the A operand of Q K^T: rows 0-7 the high parts of heads 0-7, rows
    // 8-15 their low parts; 8 k-steps of 16 dims.
    u32 qa[HEAD_DIM / 16][4];
    {
        const float* qrow = q + ((size_t)b * num_q_heads + qh0 + g) * HEAD_DIM;
#pragma unroll
        for (int kk = 0; kk < HEAD_DIM / 16; ++kk) {
            const float2 x = *reinterpret_cast<const float2*>(qrow + kk * 16 + 2 * t);
            const float2 y = *reinterpret_cast<const float2*>(qrow + kk * 16 + 8 + 2 * t);
            split_pair(x.x * scale_log2, x.y * scale_log2, qa[kk][0], qa[kk][1]);
            split_pair(y.x * scale_log2, y.y * scale_log2, qa[kk][2], qa[kk][3]);
        }
    }

    // Issue the copies of stage k into its ring slot; masked positions (past
    // pos_end) get zeros so that P V never multiplies stale bytes.
    const u32 k_off = kvh * HEAD_DIM;
    const u32 v_off = (num_kv_heads + kvh) * HEAD_DIM;
    auto issue = [&](u32 k) {
        if (k < nstages) {
            unsigned char* st = ring + (k % STAGES) * STAGE_BYTES;
            const u32 s0 = pos_begin + k * STAGE_TOKENS;
            const u32 p0 = __umulhi(s0, page_magic);
            const u32 part = lane;  // 0-15: K chunks, 16-31: V chunks
            const u32 chunk = part % 16;
            unsigned char* tile = st + (part / 16) * TILE_BYTES;
            const u32 elem = (part < 16 ? k_off : v_off) + chunk * 8;
#pragma unroll 4
            for (u32 r = warp; r < STAGE_TOKENS; r += MMA_WARPS) {
                const u32 pos = s0 + r;
                void* dst = tile + swz(r, chunk);
                if (pos < pos_end) {
                    const u32 index = __umulhi(pos, page_magic);
                    const u32 page = sm_pages[k % PAGE_LISTS][index - p0];
                    const u16* src = kv + (size_t)page * page_elems + (size_t)(pos - index * page_size) * slot_elems + elem;
                    cp_async16(dst, src);
                } else {
                    *reinterpret_cast<uint4*>(dst) = make_uint4(0u, 0u, 0u, 0u);
                }
            }
        }
        cp_async_commit();  // always, so every thread counts the same groups
    };

    bool refuse = __syncthreads_or(bad) != 0;
    if (!refuse) {
#pragma unroll
        for (u32 k = 0; k + 1 < STAGES; ++k) issue(k);
    }

    float m = mma_neg_inf();  // running max of head g (log2 domain)
    float l = 0.0f;           // this thread's share of the running sum
    float acc[HEAD_DIM / 8][4];
#pragma unroll
    for (int n = 0; n < HEAD_DIM / 8; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;

    for (u32 k = 0; !refuse && k < nstages; ++k) {
        // Finalise stage k+STAGES, load the tag of stage k+STAGES+1, the
        // page id of stage k+STAGES+2.
        bad = tag_bad(v_fin, idx_fin, tag_fin);
        if (v_fin) sm_pages[(k + STAGES) % PAGE_LISTS][tid] = page_fin;
        v_fin = v_tag;
        idx_fin = idx_tag;
        page_fin = page_tag;
        tag_fin = (v_fin && check_tags) ? page_tags[page_fin] : expected;
        v_tag = stage_index(k + STAGES + 2, idx_tag);
        page_tag = v_tag ? table[idx_tag] : 0u;

        cp_async_wait_ring();
        // Stage k has landed for every thread, every warp is done with the
        // slot of stage k-1, stage k+STAGES's pages are verified.
        refuse = __syncthreads_or(bad) != 0;
        if (refuse) break;
        issue(k + STAGES - 1);

        const u32 first = k * STAGE_TOKENS + warp * WARP_TOKENS;  // relative to pos_begin
        const u32 span = pos_end - pos_begin;
        if (first >= span) continue;  // warp-uniform
        const u32 valid = min(span - first, (u32)WARP_TOKENS);
        const unsigned char* st = ring + (k % STAGES) * STAGE_BYTES;
        const unsigned char* kt = st;
        const unsigned char* vt = st + TILE_BYTES;
        const u32 row0 = warp * WARP_TOKENS;

        // S^T for 16 tokens: two n-tiles of 8 tokens, 8 k-steps.
        float s[2][4];
#pragma unroll
        for (int n = 0; n < 2; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
        const u32 mat = lane / 8;
#pragma unroll
        for (u32 kk = 0; kk < HEAD_DIM / 16; ++kk) {
            u32 kb[4];
            const u32 row = row0 + (mat / 2) * 8 + lane % 8;
            ldmatrix_x4(kb, kt + swz(row, 2 * kk + mat % 2));
            mma_bf16_16816(s[0], qa[kk], kb[0], kb[1]);
            mma_bf16_16816(s[1], qa[kk], kb[2], kb[3]);
        }
        // Scores of head g at tokens n*8 + 2t + j: high rows plus low rows.
        float sc[2][2];
        float mx = mma_neg_inf();
#pragma unroll
        for (int n = 0; n < 2; ++n) {
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                const u32 tok = n * 8 + 2 * t + j;
                sc[n][j] = tok < valid ? s[n][j] + s[n][j + 2] : mma_neg_inf();
                mx = fmaxf(mx, sc[n][j]);
            }
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_new = fmaxf(m, mx);
        const float corr = mma_exp2(m - m_new);
        m = m_new;
        float p[2][2];
        float psum = 0.0f;
#pragma unroll
        for (int n = 0; n < 2; ++n) {
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                p[n][j] = mma_exp2(sc[n][j] - m_new);
                psum += p[n][j];
            }
        }
        l = fmaf(l, corr, psum);
        // P as the A operand of P V (rows 0-7 high parts, 8-15 low parts;
        // k = the 16 tokens).
        u32 pa[4];
        split_pair(p[0][0], p[0][1], pa[0], pa[1]);
        split_pair(p[1][0], p[1][1], pa[2], pa[3]);
#pragma unroll
        for (int n = 0; n < HEAD_DIM / 8; ++n) {
            acc[n][0] *= corr;
            acc[n][1] *= corr;
            acc[n][2] *= corr;
            acc[n][3] *= corr;
        }
#pragma unroll
        for (u32 dt = 0; dt < HEAD_DIM / 16; ++dt) {
            u32 vb[4];
            const u32 row = row0 + (mat % 2) * 8 + lane % 8;
            ldmatrix_x4_trans(vb, vt + swz(row, 2 * dt + mat / 2));
            mma_bf16_16816(acc[2 * dt], pa, vb[0], vb[1]);
            mma_bf16_16816(acc[2 * dt + 1], pa, vb[2], vb[3]);
        }
    }
    cp_async_wait_all();
    __syncthreads();  // ring free: reuse it for the merge

    float* sm_m = reinterpret_cast<float*>(ring);  // [warp][head]
    float* sm_l = sm_m + MMA_WARPS * HEADS;
    float* sm_o = sm_l + MMA_WARPS * HEADS;  // [warp][head][dim]
    if (refuse || pos_begin >= pos_end) {
        for (u32 i = tid; i < HEADS * HEAD_DIM; i += MMA_THREADS) part_acc[out_row * HEAD_DIM + i] = 0.0f;
        if (tid < HEADS) {
            part_m[out_row + tid] = mma_neg_inf();
            part_l[out_row + tid] = 0.0f;
        }
    } else {
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        if (t == 0) {
            sm_m[warp * HEADS + g] = m;
            sm_l[warp * HEADS + g] = l;
        }
        float* o = sm_o + (warp * HEADS + g) * HEAD_DIM;
#pragma unroll
        for (int n = 0; n < HEAD_DIM / 8; ++n) {
            o[n * 8 + 2 * t] = acc[n][0] + acc[n][2];
            o[n * 8 + 2 * t + 1] = acc[n][1] + acc[n][3];
        }
        __syncthreads();
        for (u32 i = tid; i < HEADS * HEAD_DIM; i += MMA_THREADS) {
            const u32 h = i / HEAD_DIM;
            float mx = mma_neg_inf();
#pragma unroll
            for (int w = 0; w < MMA_WARPS; ++w) {
                if (sm_l[w * HEADS + h] > 0.0f) mx = fmaxf(mx, sm_m[w * HEADS + h]);
            }
            float sum = 0.0f, a = 0.0f;
#pragma unroll
            for (int w = 0; w < MMA_WARPS; ++w) {
                const float lw = sm_l[w * HEADS + h];
                if (lw > 0.0f) {
                    const float f = exp2f(sm_m[w * HEADS + h] - mx);
                    sum = fmaf(lw, f, sum);
                    a = fmaf(sm_o[w * HEADS * HEAD_DIM + i], f, a);
                }
            }
            part_acc[out_row * HEAD_DIM + i] = a;
            if (i % HEAD_DIM == 0) {
                part_m[out_row + h] = mx;
                part_l[out_row + h] = sum;
            }
        }
    }

    // Fused combine: the last block of (request, head group) merges.
    __threadfence();
    __syncthreads();
    u32* group_count = arrivals + (size_t)b * gridDim.y + blockIdx.y;
    if (tid == 0) sm_last = atomicAdd(group_count, 1u) == num_splits - 1 ? 1u : 0u;
    __syncthreads();
    if (sm_last == 0u) return;
    __threadfence();
    const bool poisoned = load_cg(&refused[b]) != 0u;
    const float nan = __int_as_float(0x7fc00000);
    for (u32 h = 0; h < HEADS; ++h) {
        const u32 d = tid;  // MMA_THREADS == HEAD_DIM
        float* o = out + ((size_t)b * num_q_heads + qh0 + h) * HEAD_DIM + d;
        if (poisoned) {
            *o = nan;
            continue;
        }
        float mx = mma_neg_inf();
        for (u32 sp = 0; sp < num_splits; ++sp) {
            const size_t row = ((size_t)b * num_splits + sp) * num_q_heads + qh0 + h;
            if (load_cg(&part_l[row]) > 0.0f) mx = fmaxf(mx, load_cg(&part_m[row]));
        }
        float sum = 0.0f, a = 0.0f;
        for (u32 sp = 0; sp < num_splits; ++sp) {
            const size_t row = ((size_t)b * num_splits + sp) * num_q_heads + qh0 + h;
            const float lw = load_cg(&part_l[row]);
            if (lw > 0.0f) {
                const float f = exp2f(load_cg(&part_m[row]) - mx);
                sum = fmaf(lw, f, sum);
                a = fmaf(load_cg(&part_acc[row * HEAD_DIM + d]), f, a);
            }
        }
        *o = sum > 0.0f ? a / sum : 0.0f;
    }
}
