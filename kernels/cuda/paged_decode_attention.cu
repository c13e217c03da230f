// Split-KV ("flash-decoding") paged decode attention with the owner-tag
// check fused into the page walk.
//
// Why this file exists: decode attention is the one place where a serving
// engine reads whole pages of KV bytes on behalf of a request. In the
// PD-disaggregation incident those reads crossed tenants; with read-time page
// tagging every page carries an owner tag and this kernel refuses to read a
// page whose tag is not the reader's (the Cloudflare prototype of read-time
// page tagging). The CPU reference is
// `kernels/src/cpu.rs::paged_decode_attention`; the two must agree.
//
// Layout (identical to `kernels/src/layout.rs`): the pool is a flat array of
// bf16 bit patterns; pages back to back; a page holds `page_size` token slots;
// a slot holds K for every KV head, then V for every KV head, HEAD_DIM values
// each.
//
// Work split:
//   * `paged_decode_split_g{1,2,4,8}`: grid (splits, kv_heads * chunks, batch),
//     128 threads. A block walks one range of the request's page table for
//     one KV head and G query heads of that head's GQA group (a group larger
//     than 8 is cut into chunks of G). Each K/V vector is loaded once and used
//     by all G query heads. A half-warp (16 lanes x 8 dims) owns one token at
//     a time; the 8 half-warps of the block interleave over tokens and keep
//     their own online-softmax state, merged through shared memory at the
//     end. The block writes its unnormalised partial (max, sum, acc) in the
//     log2 domain.
//   * `paged_decode_reduce`: merges the splits of one query head by
//     log-sum-exp and normalises.
//
// Tags: before touching any KV byte a block compares the u64 tag of every
// page in its range with the reader's tag. On a mismatch it records the
// page-table index (smallest wins, so the host learns the first refused index
// of the whole call, as the CPU reference reports it), contributes an empty
// partial and returns. The reduce kernel poisons the output of a refused
// request with NaN; the host fails the call closed.
//
// Token position -> page-table index is a multiply-high, not a division:
// `page_magic` = ceil(2^32 / page_size), which gives exactly pos / page_size
// for every pos < 2^32 / page_size when page_size >= 2 (the host checks
// both).
//
// Self-contained for NVRTC: no includes, own bf16 -> f32 conversion.

typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

#define HEAD_DIM 128
#define THREADS 128
#define LANES_PER_TOKEN 16
#define DIMS_PER_LANE 8
#define TOKEN_GROUPS (THREADS / LANES_PER_TOKEN)
// `refused[b]` holds 0xffffffff - (first refused page-table index), or 0 when
// nothing was refused, so a plain memset to zero resets it between calls and
// atomicMax keeps the smallest index.
#define NO_REFUSAL 0xffffffffu

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

// bf16 is the upper half of an f32: the low element of a 32-bit word is the
// element at the lower address (little endian).
__device__ __forceinline__ void bf16x8_to_f32(const uint4 w, float* f) {
    f[0] = __uint_as_float(w.x << 16);
    f[1] = __uint_as_float(w.x & 0xffff0000u);
    f[2] = __uint_as_float(w.y << 16);
    f[3] = __uint_as_float(w.y & 0xffff0000u);
    f[4] = __uint_as_float(w.z << 16);
    f[5] = __uint_as_float(w.z & 0xffff0000u);
    f[6] = __uint_as_float(w.w << 16);
    f[7] = __uint_as_float(w.w & 0xffff0000u);
}

// Inline-PTX helpers. The CPU emulator (emulator/emu.h) defines
// KVW_HOST_EMULATION and supplies plain C++ versions of exactly these two.
#ifndef KVW_HOST_EMULATION
// Streaming 16-byte load: KV bytes are read once per call, keep them out of L1.
__device__ __forceinline__ uint4 load_stream(const u16* p) {
    uint4 r;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
        : "l"(p));
    return r;
}

// 2^x on the special-function unit alone. The hot loop only takes it of
// x <= 0 (a softmax weight or rescale factor); ex2(-inf) is +0, and flushing
// weights below 2^-126 to zero changes nothing visible.
__device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
#endif

template <int G, int UNROLL>
__device__ __forceinline__ void split_body(
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
    u32* __restrict__ refused) {
    __shared__ float sm_m[TOKEN_GROUPS][G];
    __shared__ float sm_l[TOKEN_GROUPS][G];
    __shared__ float sm_acc[TOKEN_GROUPS][G][HEAD_DIM];

    const u32 tid = threadIdx.x;
    const u32 split = blockIdx.x;
    const u32 chunks = group / G;
    const u32 kvh = blockIdx.y / chunks;
    const u32 qh0 = kvh * group + (blockIdx.y % chunks) * G;
    const u32 b = blockIdx.z;
    const u32 num_q_heads = num_kv_heads * group;

    const u32 seq_len = seq_lens[b];
    const u32 used_pages = (seq_len + page_size - 1) / page_size;
    const u32 page_begin = split * pages_per_split;
    const u32 page_end = min(page_begin + pages_per_split, used_pages);
    const u32* table = page_tables + table_offsets[b];

    // Partial (m, l) of query head qh0 + g live at out_row + g; its acc at
    // (out_row + g) * HEAD_DIM.
    const size_t out_row = ((size_t)b * num_splits + split) * num_q_heads + qh0;

    // Owner-tag check over the whole range, before any KV byte is read.
    bool bad = false;
    if (check_tags != 0u && page_begin < page_end) {
        const u64 expected = expected_tags[b];
        for (u32 i = page_begin + tid; i < page_end; i += THREADS) {
            if (page_tags[table[i]] != expected) {
                atomicMax(&refused[b], NO_REFUSAL - i);
                bad = true;
            }
        }
    }
    // Uniform across the block: every thread reaches the barrier.
    const bool refuse = __syncthreads_or(bad) != 0;
    if (refuse || page_begin >= page_end) {
        for (u32 i = tid; i < G * HEAD_DIM; i += THREADS) {
            part_acc[out_row * HEAD_DIM + i] = 0.0f;
        }
        if (tid < G) {
            part_m[out_row + tid] = neg_inf();
            part_l[out_row + tid] = 0.0f;
        }
        return;
    }

    const u32 lane = tid % LANES_PER_TOKEN;
    const u32 tg = tid / LANES_PER_TOKEN;

    // Queries of the G heads, this lane's 8 dims, pre-scaled so that
    // exp2(score) == exp(q . k * sm_scale).
    float qr[G][DIMS_PER_LANE];
#pragma unroll
    for (int g = 0; g < G; ++g) {
        const float4* qp = reinterpret_cast<const float4*>(
            q + ((size_t)b * num_q_heads + qh0 + g) * HEAD_DIM + lane * DIMS_PER_LANE);
        const float4 a = qp[0];
        const float4 c = qp[1];
        qr[g][0] = a.x * scale_log2;
        qr[g][1] = a.y * scale_log2;
        qr[g][2] = a.z * scale_log2;
        qr[g][3] = a.w * scale_log2;
        qr[g][4] = c.x * scale_log2;
        qr[g][5] = c.y * scale_log2;
        qr[g][6] = c.z * scale_log2;
        qr[g][7] = c.w * scale_log2;
    }

    float m[G];
    float l[G];
    float acc[G][DIMS_PER_LANE];
#pragma unroll
    for (int g = 0; g < G; ++g) {
        m[g] = neg_inf();
        l[g] = 0.0f;
#pragma unroll
        for (int j = 0; j < DIMS_PER_LANE; ++j) acc[g][j] = 0.0f;
    }

    const size_t slot_elems = (size_t)2 * num_kv_heads * HEAD_DIM;
    const size_t page_elems = (size_t)page_size * slot_elems;
    const u32 k_off = kvh * HEAD_DIM + lane * DIMS_PER_LANE;
    const u32 v_off = k_off + num_kv_heads * HEAD_DIM;

    const u32 pos_begin = page_begin * page_size;
    const u32 pos_end = min(page_end * page_size, seq_len);

    // `base` is uniform across the block, so every lane of a warp runs the
    // same number of iterations and reaches every shuffle.
    for (u32 base = pos_begin; base < pos_end; base += TOKEN_GROUPS * UNROLL) {
        uint4 kw[UNROLL];
        uint4 vw[UNROLL];
        bool valid[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const u32 pos = base + u * TOKEN_GROUPS + tg;
            valid[u] = pos < pos_end;
            if (valid[u]) {
                // pos / page_size by multiply-high (see page_magic).
                const u32 index = __umulhi(pos, page_magic);
                const u32 slot = pos - index * page_size;
                const u16* slot_ptr = kv + (size_t)table[index] * page_elems + slot * slot_elems;
                kw[u] = load_stream(slot_ptr + k_off);
                vw[u] = load_stream(slot_ptr + v_off);
            } else {
                kw[u] = make_uint4(0u, 0u, 0u, 0u);
                vw[u] = make_uint4(0u, 0u, 0u, 0u);
            }
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            float kf[DIMS_PER_LANE];
            bf16x8_to_f32(kw[u], kf);
            float s[G];
#pragma unroll
            for (int g = 0; g < G; ++g) {
                float d = 0.0f;
#pragma unroll
                for (int j = 0; j < DIMS_PER_LANE; ++j) d = fmaf(qr[g][j], kf[j], d);
                s[g] = d;
            }
            // Butterfly sum over the 16 lanes of the half-warp; every lane
            // ends with the same bits (each step adds a symmetric pair).
#pragma unroll
            for (int off = LANES_PER_TOKEN / 2; off > 0; off /= 2) {
#pragma unroll
                for (int g = 0; g < G; ++g) s[g] += __shfl_xor_sync(0xffffffffu, s[g], off);
            }
            if (valid[u]) {
                float vf[DIMS_PER_LANE];
                bf16x8_to_f32(vw[u], vf);
#pragma unroll
                for (int g = 0; g < G; ++g) {
                    if (G >= 4) {
                        // Rescale only when the running max grows (rare
                        // after the first tokens); s[g] is the same in all
                        // 16 lanes, so the branch is uniform within the
                        // half-warp.
                        if (s[g] > m[g]) {
                            const float corr = fast_exp2(m[g] - s[g]);
                            l[g] *= corr;
#pragma unroll
                            for (int j = 0; j < DIMS_PER_LANE; ++j) acc[g][j] *= corr;
                            m[g] = s[g];
                        }
                        const float p = fast_exp2(s[g] - m[g]);
                        l[g] += p;
#pragma unroll
                        for (int j = 0; j < DIMS_PER_LANE; ++j) acc[g][j] = fmaf(p, vf[j], acc[g][j]);
                    } else {
                        // Small groups have compute to spare; the branchy
                        // form above makes ptxas spill for G == 2.
                        const float m_new = fmaxf(m[g], s[g]);
                        const float corr = fast_exp2(m[g] - m_new);
                        const float p = fast_exp2(s[g] - m_new);
                        l[g] = fmaf(l[g], corr, p);
#pragma unroll
                        for (int j = 0; j < DIMS_PER_LANE; ++j) acc[g][j] = fmaf(acc[g][j], corr, p * vf[j]);
                        m[g] = m_new;
                    }
                }
            }
        }
    }

    // Merge the 8 token groups of the block.
#pragma unroll
    for (int g = 0; g < G; ++g) {
#pragma unroll
        for (int j = 0; j < DIMS_PER_LANE; ++j) sm_acc[tg][g][lane * DIMS_PER_LANE + j] = acc[g][j];
        if (lane == 0) {
            sm_m[tg][g] = m[g];
            sm_l[tg][g] = l[g];
        }
    }
    __syncthreads();
    for (u32 i = tid; i < G * HEAD_DIM; i += THREADS) {
        const u32 g = i / HEAD_DIM;
        const u32 d = i % HEAD_DIM;
        float mx = neg_inf();
#pragma unroll
        for (int t = 0; t < TOKEN_GROUPS; ++t) {
            if (sm_l[t][g] > 0.0f) mx = fmaxf(mx, sm_m[t][g]);
        }
        float sum = 0.0f;
        float a = 0.0f;
#pragma unroll
        for (int t = 0; t < TOKEN_GROUPS; ++t) {
            if (sm_l[t][g] > 0.0f) {
                const float f = exp2f(sm_m[t][g] - mx);
                sum = fmaf(sm_l[t][g], f, sum);
                a = fmaf(sm_acc[t][g][d], f, a);
            }
        }
        part_acc[out_row * HEAD_DIM + i] = a;
        if (d == 0) {
            part_m[out_row + g] = mx;
            part_l[out_row + g] = sum;
        }
    }
}

#define SPLIT_KERNEL(NAME, G, UNROLL, MIN_BLOCKS)                                                \
    extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS) NAME(                      \
        const u16* __restrict__ kv, const u32* __restrict__ page_tables,                         \
        const u32* __restrict__ table_offsets, const u32* __restrict__ seq_lens,                 \
        const float* __restrict__ q, const u64* __restrict__ page_tags,                          \
        const u64* __restrict__ expected_tags, u32 check_tags, u32 num_kv_heads, u32 group,      \
        u32 page_size, u32 page_magic, u32 pages_per_split, u32 num_splits, float scale_log2,    \
        float* __restrict__ part_m, float* __restrict__ part_l, float* __restrict__ part_acc,    \
        u32* __restrict__ refused) {                                                             \
        split_body<G, UNROLL>(kv, page_tables, table_offsets, seq_lens, q, page_tags,            \
                              expected_tags, check_tags, num_kv_heads, group, page_size,         \
                              page_magic, pages_per_split, num_splits, scale_log2, part_m,       \
                              part_l, part_acc, refused);                                        \
    }

// (name, query heads per block, tokens in flight per half-warp, min blocks per SM)
SPLIT_KERNEL(paged_decode_split_g1, 1, 4, 4)
SPLIT_KERNEL(paged_decode_split_g2, 2, 4, 4)
SPLIT_KERNEL(paged_decode_split_g4, 4, 2, 4)
SPLIT_KERNEL(paged_decode_split_g8, 8, 2, 2)

// Merge the splits of one query head (grid: num_q_heads x batch, HEAD_DIM
// threads) and normalise. A refused request gets NaN everywhere.
extern "C" __global__ void __launch_bounds__(HEAD_DIM) paged_decode_reduce(
    const float* __restrict__ part_m,
    const float* __restrict__ part_l,
    const float* __restrict__ part_acc,
    const u32* __restrict__ refused,
    u32 num_q_heads,
    u32 num_splits,
    float* __restrict__ out) {
    const u32 qh = blockIdx.x;
    const u32 b = blockIdx.y;
    const u32 d = threadIdx.x;
    float* o = out + ((size_t)b * num_q_heads + qh) * HEAD_DIM + d;
    if (refused[b] != 0u) {
        *o = __int_as_float(0x7fc00000);
        return;
    }
    float mx = neg_inf();
    for (u32 s = 0; s < num_splits; ++s) {
        const size_t row = ((size_t)b * num_splits + s) * num_q_heads + qh;
        if (part_l[row] > 0.0f) mx = fmaxf(mx, part_m[row]);
    }
    float sum = 0.0f;
    float a = 0.0f;
    for (u32 s = 0; s < num_splits; ++s) {
        const size_t row = ((size_t)b * num_splits + s) * num_q_heads + qh;
        const float l = part_l[row];
        if (l > 0.0f) {
            const float f = exp2f(part_m[row] - mx);
            sum = fmaf(l, f, sum);
            a = fmaf(part_acc[row * HEAD_DIM + d], f, a);
        }
    }
    *o = sum > 0.0f ? a / sum : 0.0f;
}
