// Runs the CUDA kernels of kernels/cuda/ on the CPU (through emu.h) against
// plain references: decode attention (both variants: the scalar reference
// kernel and the tensor-core kernel for groups of 8) against a
// double-precision dense softmax with the same fail-closed tag rule as
// kernels/src/cpu.rs, Adler-32 against a byte-by-byte Adler-32, scrub
// against zeroing. Decode cases include splits of many pages (forced by a
// split limit, as DecodeTuning::max_splits does on the GPU) with a refused
// page inside a split. Errors are RMS-relative (|got - want| / |want|).
//
// Why it exists: CI has no GPU, and the real-hardware check only runs when a
// GPU is lent. The host side below mirrors kernels/src/cuda.rs
// (prepare_decode / launch_decode / finish_decode: GQA chunking, split
// sizing, the refusal encoding), so a change to either side that breaks the
// contract shows up here.
//
// Build and run (scripts/ci/cuda-compile-check.sh does this):
//   g++ -std=c++17 -O2 -I kernels/cuda/emulator -o kvw-cuda-emu
//     kernels/cuda/emulator/check.cpp
//     -x c++ -include emu.h kernels/cuda/paged_decode_attention.cu
//     -x c++ -include emu.h kernels/cuda/paged_decode_mma.cu
//     -x c++ -include emu.h kernels/cuda/page_checksum.cu
//     -x c++ -include emu.h kernels/cuda/page_scrub.cu
//     -x c++ -include emu.h kernels/cuda/bandwidth_probe.cu
//   ./kvw-cuda-emu
#include "emu.h"

#include <algorithm>
#include <numeric>
#include <utility>

typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

extern "C" {
#define SPLIT_ARGS                                                                             \
    const u16*, const u32*, const u32*, const u32*, const float*, const u64*, const u64*, u32, \
        u32, u32, u32, u32, u32, u32, float, float*, float*, float*, u32*
void paged_decode_split_g1(SPLIT_ARGS);
void paged_decode_split_g2(SPLIT_ARGS);
void paged_decode_split_g4(SPLIT_ARGS);
void paged_decode_split_g8(SPLIT_ARGS);
void paged_decode_reduce(const float*, const float*, const float*, const u32*, u32, u32, float*);
void paged_decode_mma_g8(SPLIT_ARGS, u32*, float*);
void adler32_page_partials(const unsigned char*, const u32*, u64, u32*, u32*);
void adler32_combine(const u32*, const u32*, u32, u64, u32*);
void page_scrub(unsigned char*, const u32*, u64);
void stream_read(const uint4*, u64, u32*);
}

static const int D = 128;  // HEAD_DIM
// RMS-relative: f32 arithmetic (and the MMA variant's split bf16 operands)
// lands far below; one dropped page of 16 among N tokens moves the output by
// about sqrt(16 / N), 1.6e-2 at 64k tokens.
static const double TOLERANCE = 1e-3;
static bool only_mma = false;

struct Rng {
    u64 s;
    u64 next() {
        s += 0x9e3779b97f4a7c15ull;
        u64 z = s;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    float unit() { return (float)(next() >> 40) / (float)(1 << 24) * 2.f - 1.f; }
    size_t below(size_t n) { return next() % n; }
};

static u16 to_bf16(float f) {
    u32 b;
    std::memcpy(&b, &f, 4);
    return (u16)((b + 0x7fff + ((b >> 16) & 1)) >> 16);
}
static float from_bf16(u16 h) {
    u32 b = (u32)h << 16;
    float f;
    std::memcpy(&f, &b, 4);
    return f;
}

struct Layout {
    size_t page_size, kv_heads;
    size_t slot() const { return 2 * kv_heads * D; }
    size_t page() const { return page_size * slot(); }
};
struct Req {
    std::vector<u32> table;
    u32 seq;
    std::vector<float> q;
    u64 expected;
};
struct Res {
    bool refused;
    u32 index;
    std::vector<float> out;
};

// Kernel variants: the scalar split kernel + reduce, or (groups that are a
// multiple of 8) the tensor-core kernel with the fused combine.
enum Variant { REFERENCE, MMA };

// Split count of the tensor-core variant, as cuda.rs sizes it: the count
// that minimises waves x (tokens per split + a fixed cost per block), with
// `slots` = blocks per SM (from the occupancy API on the GPU) x SMs.
static size_t mma_splits(size_t blocks, size_t slots, size_t max_pages, size_t page_size, size_t max_splits) {
    const size_t limit = std::max<size_t>(1, std::min<size_t>({max_pages, (size_t)1024, max_splits}));
    size_t best = 1, best_cost = (size_t)-1;
    for (size_t s = 1; s <= limit; ++s) {
        const size_t waves = (blocks * s + slots - 1) / slots;
        const size_t cost = waves * (((max_pages + s - 1) / s) * page_size + 256);
        if (cost < best_cost) { best = s; best_cost = cost; }
    }
    return best;
}

// Mirrors GpuKernels::{prepare_decode, launch_decode, finish_decode}.
static std::vector<Res> kernel_decode(Layout l, const std::vector<u16>& kv, const std::vector<u64>& tags,
                                      const std::vector<Req>& reqs, int nqh, float scale, bool check,
                                      int sm_count, Variant variant, size_t max_splits, size_t* splits_out) {
    const int group = nqh / (int)l.kv_heads;
    int chunk = 1;
    for (int c : {8, 4, 2, 1})
        if (group % c == 0) { chunk = c; break; }
    if (variant == MMA && chunk != 8) variant = REFERENCE;
    std::vector<u32> flat, offs, seqs;
    std::vector<float> q;
    std::vector<u64> expected;
    size_t max_pages = 0;
    for (const auto& r : reqs) {
        u32 seq = (u32)std::min<size_t>(r.seq, r.table.size() * l.page_size);
        size_t used = (seq + l.page_size - 1) / l.page_size;
        offs.push_back((u32)flat.size());
        seqs.push_back(seq);
        flat.insert(flat.end(), r.table.begin(), r.table.begin() + used);
        q.insert(q.end(), r.q.begin(), r.q.end());
        expected.push_back(r.expected);
        max_pages = std::max(max_pages, used);
    }
    if (flat.empty()) flat.push_back(0);
    const size_t ny = l.kv_heads * (group / chunk);
    const size_t per_split = reqs.size() * ny;
    size_t pps;
    if (variant == MMA) {
        const size_t s = mma_splits(per_split, (size_t)sm_count * 2, max_pages, l.page_size, max_splits);
        pps = std::max<size_t>(1, (max_pages + s - 1) / s);
    } else {
        size_t target = std::max<size_t>(1, (sm_count * 16 + per_split - 1) / per_split);
        target = std::min(target, max_splits);
        pps = std::max<size_t>(1, (max_pages + target - 1) / target);
    }
    size_t splits = std::max<size_t>(1, (max_pages + pps - 1) / pps);
    *splits_out = splits;
    size_t rows = reqs.size() * splits * nqh;
    // Poison the work buffers: every value read must have been written.
    std::vector<float> pm(rows, 1e30f), pl(rows, 1e30f), pa(rows * D, 1e30f);
    std::vector<float> out(reqs.size() * nqh * D, -7.f);
    std::vector<u32> refused(reqs.size(), 0);
    std::vector<u32> arrivals(reqs.size() * ny, 0);
    const u64* tag_buf = check ? tags.data() : expected.data();
    const float scale_log2 = scale * 1.4426950408889634f;
    const u32 page_magic = (u32)(((1ull << 32) + l.page_size - 1) / l.page_size);
    const dim3u grid{(unsigned)splits, (unsigned)ny, (unsigned)reqs.size()};
    if (variant == MMA) {
        // Poison the ring too: masked positions must be written, not inherited.
        std::memset(emu::dyn_smem, 0xff, sizeof emu::dyn_smem);
        emu::launch(grid, dim3u{128, 1, 1}, [&] {
            paged_decode_mma_g8(kv.data(), flat.data(), offs.data(), seqs.data(), q.data(), tag_buf,
                                expected.data(), check ? 1u : 0u, (u32)l.kv_heads, (u32)group,
                                (u32)l.page_size, page_magic, (u32)pps, (u32)splits, scale_log2, pm.data(),
                                pl.data(), pa.data(), refused.data(), arrivals.data(), out.data());
        });
    } else {
        auto split = chunk == 1 ? paged_decode_split_g1
                   : chunk == 2 ? paged_decode_split_g2
                   : chunk == 4 ? paged_decode_split_g4
                                : paged_decode_split_g8;
        emu::launch(grid, dim3u{128, 1, 1}, [&] {
            split(kv.data(), flat.data(), offs.data(), seqs.data(), q.data(), tag_buf, expected.data(),
                  check ? 1u : 0u, (u32)l.kv_heads, (u32)group, (u32)l.page_size, page_magic, (u32)pps,
                  (u32)splits, scale_log2, pm.data(), pl.data(), pa.data(), refused.data());
        });
        emu::launch(dim3u{(unsigned)nqh, (unsigned)reqs.size(), 1}, dim3u{(unsigned)D, 1, 1}, [&] {
            paged_decode_reduce(pm.data(), pl.data(), pa.data(), refused.data(), (u32)nqh, (u32)splits,
                                out.data());
        });
    }
    std::vector<Res> res;
    for (size_t i = 0; i < reqs.size(); ++i) {
        auto b = out.begin() + i * nqh * D;
        std::vector<float> o(b, b + nqh * D);
        if (refused[i] != 0) {
            // Fails closed on the device too: every output of the request NaN.
            bool all_nan = std::all_of(o.begin(), o.end(), [](float x) { return std::isnan(x); });
            res.push_back({true, all_nan ? 0xffffffffu - refused[i] : 0xfffffffeu, {}});
        } else {
            res.push_back({false, 0, o});
        }
    }
    return res;
}

// Dense softmax attention in double precision; refuses like cpu.rs: the
// first page-table index, among the pages read, whose tag is not the reader's.
static Res reference(Layout l, const std::vector<u16>& kv, const std::vector<u64>& tags, const Req& r,
                     int nqh, float scale, bool check) {
    const int group = nqh / (int)l.kv_heads;
    const u32 seq = (u32)std::min<size_t>(r.seq, r.table.size() * l.page_size);
    const size_t used = (seq + l.page_size - 1) / l.page_size;
    if (check)
        for (size_t i = 0; i < used; ++i)
            if (tags[r.table[i]] != r.expected) return {true, (u32)i, {}};
    auto at = [&](u32 pos, size_t head) {
        return &kv[r.table[pos / l.page_size] * l.page() + (pos % l.page_size) * l.slot() + head * D];
    };
    std::vector<float> out(nqh * D, 0.f);
    for (int qh = 0; qh < nqh; ++qh) {
        const size_t h = qh / group;
        std::vector<double> s(seq);
        double m = -1e300;
        for (u32 p = 0; p < seq; ++p) {
            const u16* k = at(p, h);
            double d = 0;
            for (int j = 0; j < D; ++j) d += (double)r.q[qh * D + j] * from_bf16(k[j]);
            s[p] = d * scale;
            m = std::max(m, s[p]);
        }
        double z = 0;
        std::vector<double> acc(D, 0);
        for (u32 p = 0; p < seq; ++p) {
            const double w = std::exp(s[p] - m);
            const u16* v = at(p, l.kv_heads + h);
            z += w;
            for (int j = 0; j < D; ++j) acc[j] += w * from_bf16(v[j]);
        }
        for (int j = 0; j < D; ++j) out[qh * D + j] = z > 0 ? (float)(acc[j] / z) : 0.f;
    }
    return {false, 0, out};
}

static double rms_rel(const std::vector<float>& got, const std::vector<float>& want) {
    double num = 0, den = 0;
    for (size_t j = 0; j < want.size(); ++j) {
        const double e = (double)got[j] - want[j];
        num += e * e;
        den += (double)want[j] * want[j];
    }
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

static int check_attention(Rng& rng) {
    int cases = 0, fails = 0, refusals_in_split = 0, multi_page = 0;
    int per_variant[2] = {0, 0};
    double worst[2] = {0, 0};
    const char* names[2] = {"reference", "mma"};
    const std::pair<size_t, int> shapes[] = {{2, 1}, {2, 2}, {1, 3}, {2, 4}, {2, 8}, {1, 16}};
    // (SMs, split limit): few splits, many splits, and one or two splits
    // forced so that every split walks many pages.
    const std::pair<int, size_t> sizings[] = {{1, 1024}, {4, 1024}, {132, 1}, {132, 2}};
    for (size_t page_size : {16, 24, 32, 64})
    for (auto [kv_heads, group] : shapes)
    for (int mode = 0; mode < 3; ++mode)  // tags off, on, on with a foreign page read
    for (auto [sm_count, max_splits] : sizings) {
        const Layout l{page_size, kv_heads};
        const size_t pool_pages = 96;
        std::vector<u16> kv(pool_pages * l.page());
        for (auto& x : kv) x = to_bf16(rng.unit());
        std::vector<u32> perm(pool_pages);
        std::iota(perm.begin(), perm.end(), 0);
        for (size_t i = pool_pages - 1; i > 0; --i) std::swap(perm[i], perm[rng.below(i + 1)]);
        std::vector<u64> tags(pool_pages, 0);
        std::vector<Req> reqs;
        const int nreq = 1 + (int)rng.below(3);
        const int nqh = (int)kv_heads * group;
        size_t taken = 0;
        for (int i = 0; i < nreq; ++i) {
            const size_t n = 1 + rng.below(30);
            Req r;
            r.table.assign(perm.begin() + taken, perm.begin() + taken + n);
            taken += n;
            switch (rng.below(6)) {
                case 0: r.seq = (u32)(n * page_size + 5); break;  // past the table
                case 1: r.seq = 1; break;
                case 2: r.seq = 0; break;
                default: r.seq = (u32)((n - 1) * page_size + 1 + rng.below(page_size));
            }
            r.expected = 100 + i;
            for (u32 p : r.table) tags[p] = r.expected;
            r.q.resize(nqh * D);
            for (auto& x : r.q) x = rng.unit();
            reqs.push_back(r);
        }
        // A foreign page just past a request's read range must not matter.
        if (taken < pool_pages) tags[perm[taken]] = 0xf0e1;
        int bad_req = -1;
        size_t bad_index = 0;
        if (mode == 2) {
            bad_req = (int)rng.below(nreq);
            const Req& r = reqs[bad_req];
            const size_t used = (std::min<size_t>(r.seq, r.table.size() * page_size) + page_size - 1) / page_size;
            if (used) {
                bad_index = rng.below(used);
                tags[r.table[bad_index]] = 0xbad;
                if (bad_index + 1 < used && rng.below(2)) tags[r.table[bad_index + 1 + rng.below(used - bad_index - 1)]] = 0xbad2;
            } else {
                bad_req = -1;
            }
        }
        const float scale = (cases % 2) ? 1.0f : 1.0f / std::sqrt((float)D);
        const bool check = mode > 0;
        std::vector<Res> want;
        for (int i = 0; i < nreq; ++i) want.push_back(reference(l, kv, tags, reqs[i], nqh, scale, check));
        for (Variant v : {REFERENCE, MMA}) {
            if (v == MMA && group % 8 != 0) continue;
            if (v == REFERENCE && only_mma) continue;
            size_t splits = 0;
            const auto got = kernel_decode(l, kv, tags, reqs, nqh, scale, check, sm_count, v, max_splits, &splits);
            for (int i = 0; i < nreq; ++i) {
                ++cases;
                ++per_variant[v];
                const size_t used = (std::min<size_t>(reqs[i].seq, reqs[i].table.size() * page_size) + page_size - 1) / page_size;
                const size_t pps = splits ? (used + splits - 1) / splits : used;
                if (pps > 1) ++multi_page;
                if (want[i].refused || got[i].refused) {
                    if (want[i].refused != got[i].refused || want[i].index != got[i].index) {
                        ++fails;
                        std::printf("FAIL refusal %s page=%zu kv=%zu group=%d req=%d: want %d@%u got %d@%u\n",
                                    names[v], page_size, kv_heads, group, i, want[i].refused, want[i].index,
                                    got[i].refused, got[i].index);
                    } else if (i == bad_req && pps > 1 && want[i].index % pps != 0) {
                        ++refusals_in_split;
                    }
                    continue;
                }
                const double err = rms_rel(got[i].out, want[i].out);
                worst[v] = std::max(worst[v], err);
                if (!(err <= TOLERANCE)) {
                    ++fails;
                    std::printf("FAIL attention %s page=%zu kv=%zu group=%d mode=%d req=%d seq=%u splits=%zu err=%g\n",
                                names[v], page_size, kv_heads, group, mode, i, reqs[i].seq, splits, err);
                }
            }
        }
    }
    std::printf("attention: %d cases (reference %d, mma %d), %d failed; RMS-relative error: reference %.2e, mma "
                "%.2e (tolerance %.0e)\n",
                cases, per_variant[0], per_variant[1], fails, worst[0], worst[1], TOLERANCE);
    std::printf("attention: %d request-launches with splits of several pages, %d refusals inside a split\n",
                multi_page, refusals_in_split);
    // The coverage this check claims must not silently vanish.
    if (multi_page == 0 || refusals_in_split == 0 || per_variant[MMA] == 0 || (!only_mma && per_variant[REFERENCE] == 0)) {
        std::printf("FAIL coverage: no multi-page splits, refusals inside a split or MMA cases\n");
        ++fails;
    }
    return fails;
}

static u32 adler_serial(u32 h, const unsigned char* p, size_t n) {
    u64 a = h & 0xffff, b = h >> 16;
    for (size_t i = 0; i < n; ++i) {
        a = (a + p[i]) % 65521;
        b = (b + a) % 65521;
    }
    return (u32)((b << 16) | a);
}

static int check_checksum_and_scrub(Rng& rng) {
    int cases = 0, fails = 0;
    for (size_t page_bytes : {48ul, 4096ul, 65536ul, 262144ul}) {
        const size_t npages = 24;
        std::vector<unsigned char> pool(npages * page_bytes);
        for (auto& b : pool) b = (unsigned char)rng.next();
        std::fill(pool.begin(), pool.begin() + page_bytes, 0xff);  // saturated page
        for (size_t len : {1ul, 2ul, 17ul, 40ul}) {
            std::vector<u32> pages(len);
            for (auto& p : pages) p = (u32)rng.below(npages);
            u32 want = 1;
            for (u32 p : pages) want = adler_serial(want, pool.data() + p * page_bytes, page_bytes);
            std::vector<u32> pa(len), pb(len);
            u32 got = 0;
            emu::launch(dim3u{(unsigned)len, 1, 1}, dim3u{256, 1, 1}, [&] {
                adler32_page_partials(pool.data(), pages.data(), page_bytes, pa.data(), pb.data());
            });
            emu::launch(dim3u{1, 1, 1}, dim3u{256, 1, 1},
                        [&] { adler32_combine(pa.data(), pb.data(), (u32)len, page_bytes, &got); });
            ++cases;
            if (got != want) {
                ++fails;
                std::printf("FAIL adler32 page_bytes=%zu pages=%zu: want %08x got %08x\n", page_bytes, len,
                            want, got);
            }
        }
        std::vector<u32> pages = {3, 5, 3, 20};
        auto want = pool;
        for (u32 p : pages) std::fill(want.begin() + p * page_bytes, want.begin() + (p + 1) * page_bytes, 0);
        emu::launch(dim3u{(unsigned)pages.size(), 1, 1}, dim3u{256, 1, 1},
                    [&] { page_scrub(pool.data(), pages.data(), page_bytes); });
        ++cases;
        if (pool != want) {
            ++fails;
            std::printf("FAIL scrub page_bytes=%zu\n", page_bytes);
        }
    }
    std::printf("adler32 + scrub: %d cases, %d failed\n", cases, fails);
    return fails;
}

// The streaming probe must read every word: XOR of the sink == XOR of all.
static int check_stream_read(Rng& rng) {
    int fails = 0;
    for (size_t n16 : {1ul, 7ul, 4096ul, 10000ul}) {
        std::vector<uint4> buf(n16);
        u32 want = 0;
        for (auto& w : buf) {
            w = make_uint4((u32)rng.next(), (u32)rng.next(), (u32)rng.next(), (u32)rng.next());
            want ^= w.x ^ w.y ^ w.z ^ w.w;
        }
        for (unsigned blocks : {1u, 3u}) {
            std::vector<u32> sink(blocks * 256, 0xdeadbeef);
            emu::launch(dim3u{blocks, 1, 1}, dim3u{256, 1, 1}, [&] { stream_read(buf.data(), n16, sink.data()); });
            u32 got = 0;
            for (u32 x : sink) got ^= x;
            if (got != want) {
                ++fails;
                std::printf("FAIL stream_read n16=%zu blocks=%u\n", n16, blocks);
            }
        }
    }
    std::printf("stream_read: 8 cases, %d failed\n", fails);
    return fails;
}

int main() {
    Rng rng{0x6b7677};
    const char* only = std::getenv("KVW_EMU_ONLY");  // "mma": the tensor-core cases alone
    if (only && std::strcmp(only, "mma") == 0) only_mma = true;
    const int fails = check_attention(rng) + check_checksum_and_scrub(rng) + check_stream_read(rng);
    std::printf("kvw-cuda-emu: %s\n", fails ? "FAIL" : "OK");
    return fails ? 1 : 0;
}
