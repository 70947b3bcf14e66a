// Split-KV decode attention for few query rows per sequence (decode,
// speculative verification, chunked prefill against a cache), sm_80 and newer.
//
// One CTA computes BM packed rows (decode_params.h: the query heads of one
// KV head times the new rows) against one split of one sequence's keys, so
// each K/V byte is read once per KV head. K/V blocks of BN keys stream
// through a STAGES-deep cp.async ring, from a contiguous cache or from pages
// found through the block table (whose entries ride the ring's lead ahead of
// the blocks' own loads in the same ring). Each warp owns 16
// rows (BM / 16 warps across the rows) and a share of each block's keys (the
// other WARPS / (BM / 16) across the keys), with its own online softmax; a
// block of 8 rows turns the products around, keys as the MMA's rows, and all
// its warps share its rows (keys_as_rows.cuh). At the end the key-sharing
// warps are merged through shared memory, and the CTA writes its output (one
// split) or its normalized part and log-sum-exp (several: merged within the
// cluster on sm_90 with at most kMaxDecodeClusterSplits splits,
// cluster_merge.cuh, else by attn_decode_combine).
//
// An FP8 cache (TKV = e4m3 or e5m2, q in T) streams half the bytes and is
// converted to T in registers, exactly, as the fragments are loaded: K's fragments come
// from ldmatrix on bytes (four keys' bytes per register, so the head dim is
// permuted the same way in Q's fragments), V's from ldmatrix.trans on byte
// pairs (so each register holds two output columns, put back in place when
// the warps are merged). The (sequence, KV head)'s descale factors scale the
// scores (with the softmax scale) and the output.
//
// PAIRED (an FP8 cache at head dim D / 2 = 64, at most 4 packed rows per KV
// head): one CTA takes two KV heads, 2y and 2y + 1, as one of head dim D. Its
// block of 8 rows holds head 2y's rows, then head 2y + 1's, each row's Q in
// its head's half of the D columns and zeros in the other, so S^T = K Q^T
// gives each row its own head's scores and each row keeps its own head's
// half of O^T. In the serving engines' token-major layout a key's row of K
// and V is then 128 bytes, the two heads' 64 side by side, and the 8-row MMA
// tile, half padding at GQA 4, is full: over a shuffled paged pool the
// decode measured 10% faster, over a contiguous cache the same
// (docs/perf-log.md, "decode v8"). Each thread reads its chunks from its own
// head, so any strides work; head-major caches are left unpaired by the host
// (two streams a thread measured slower).
//
// PAGE_DESCALE (a paged FP8 cache): the descale factors are per (page, KV
// head) rather than per (sequence, KV head), so they change from key to key.
// Each key's pair rides the K/V ring beside its row (one thread a key copies
// them once a block), and the consumers scale each score by its key's K
// factor, and each probability by its key's V factor over the split's first
// key's (for P in T: a ratio stays near 1 where f16 could not hold a small
// factor's products); that first factor scales the output.
//
// WG (sm_90a, a 16-bit cache, 64 packed rows): the two products of each
// block by warpgroup MMAs (warpgroup_products.cuh), each warpgroup taking
// all 64 rows and its share of the block's keys; Q, K and V land in the
// layout those read (SmemTileSw128), and the rest is the 16-row path's.
#include "attention/common/online_softmax.cuh"
#include "attention/common/register_tile.cuh"
#include "attention/common/smem_tile.cuh"
#include "attention/decode/cluster_merge.cuh"
#include "attention/decode/decode_layout.h"
#include "attention/decode/decode_params.h"
#include "attention/decode/keys_as_rows.cuh"
#include "attention/decode/tile_heads.cuh"
#include "attention/head_dims.h"
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#include "attention/decode/warpgroup_products.cuh"
#endif

namespace cujit::decode {

// Dynamic shared memory: decode_layout.h. FP8 variants ask for at least one
// CTA per SM, which lets ptxas use the registers the conversions need (left to
// itself it holds some at 128 registers and spills); so does every variant on
// sm_80/sm_89, where ptxas held 16-bit ones at 80, 128 or 168 registers and
// spilled 8-64 bytes (paged and contiguous alike). The 16-bit variants on
// sm_90 keep the heuristic they were tuned with (a minimum of 0 emits no
// directive): given every register, ptxas takes 20-50 more in the picks.
__host__ __device__ constexpr int decode_min_ctas_per_sm(bool fp8) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  return 1;
#else
  return fp8 ? 1 : 0;
#endif
}
template <int D, int BM, int BN, int STAGES, int WARPS, class T, class TKV, bool CAUSAL, bool PAGED, bool PAIRED,
          bool PAGE_DESCALE, bool WG = false, int PAGE = 0>
__global__ void __launch_bounds__(WARPS * 32, decode_min_ctas_per_sm(is_fp8<TKV>::value)) attn_decode(const __grid_constant__ DecodeParams p) {
  static_assert(same_type<T, f16>::value || same_type<T, bf16>::value, "T is f16 or bf16");
  constexpr bool kFp8 = is_fp8<TKV>::value;
  static_assert(kFp8 || same_type<TKV, T>::value, "the cache is in T, or FP8 (e4m3 or e5m2)");
  static_assert(!kFp8 || D <= 128 || BM == 8, "an FP8 cache at head dim 256 takes blocks of 8 rows (16 spill)");
  static_assert(kDecodeHeadDims.contains(D), "D is one of kDecodeHeadDims");
  static_assert(BM == 8 || (BM % 16 == 0 && BM <= 64), "BM is 8 (keys_as_rows.cuh), 16, 32, 48 or 64 packed rows");
  constexpr bool kKeysAsRows = BM == 8;  // the products turned around: keys_as_rows.cuh
  constexpr int WM = decode_row_warps(BM);  // warps across the rows
  static_assert(WARPS % WM == 0, "the warps tile the rows evenly");
  constexpr int WN = WARPS / WM;   // warps across each block's keys
  static_assert(BN % (16 * WN) == 0, "each warp takes whole 16-key steps of a block");
  static_assert(!WG || (BN / WN) % 64 == 0, "a warpgroup takes 64 or 128 keys of a block");
  static_assert(STAGES >= 2, "the K/V ring needs at least two stages");
  static_assert(!PAGED || BN <= WARPS * 32, "paged: each key of a block has its own thread to look its page up");
  static_assert(!PAIRED || (kFp8 && BM == 8 && D == 128), "paired KV heads: an FP8 cache at head dim 64, 8 rows");
  constexpr int kHeadD = PAIRED ? D / 2 : D;  // one KV head's columns
  static_assert(!PAGE_DESCALE || (kFp8 && PAGED), "descale factors per page: a paged FP8 cache");
  constexpr int kFactorHeads = decode_page_factor_heads(PAGE_DESCALE, PAIRED);
  static_assert(!WG || (BM == 64 && !kFp8 && D <= 128), "warpgroup MMAs: 64 rows over a 16-bit cache, D <= 128");
  static_assert(PAGE >= 0 && (PAGE == 0 || PAGED), "PAGE: the pool's page size where the plan compiled for it, else 0");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  static_assert(!WG, "warpgroup MMAs need sm_90a");
#endif

  constexpr int kThreads = WARPS * 32;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr bool kClusterMerge = decode_cluster_mergeable(D, BM);  // else p.cluster_merge is 0
#else
  constexpr bool kClusterMerge = false;
#endif
  constexpr int MT = 1;         // one 16-row m-tile per warp
  constexpr int KW = BN / WN;  // keys of a block per warp
  constexpr int NT = KW / 8;
  constexpr int KT = D / 16;
  constexpr int DT = D / 8;
  constexpr int PT = KW / 16;
  constexpr int KB = element_traits<TKV>::bytes;
  // Over an FP8 cache, blocks of 8 rows push their parts to the CTA that
  // merges them; the others leave them for it to pull (cluster_merge.cuh).
  constexpr bool kPushParts = kClusterMerge && decode_pushes_parts(BM, KB);
  static_assert(!kPushParts || (kKeysAsRows && kFp8), "the pushed merge is the FP8 keys-as-rows epilogue's");
  using QTile = typename select_type<WG, SmemTileSw128<BM, D>, SmemTile<BM, D, 2>>::type;
  using KVTile = typename select_type<WG, SmemTileSw128<BN, D>, SmemTile<BN, D, KB>>::type;
  constexpr int kChunks = D / 8;                   // 16-byte chunks per row of Q and the output
  constexpr int kKvChunks = D * KB / 16;           // and per row of K and V
  static_assert(kThreads % kKvChunks == 0, "each thread loads one column of chunks");
  constexpr int kRowsPerPass = kThreads / kKvChunks;
  static_assert(BN % kRowsPerPass == 0, "the threads cover a K/V block in whole passes");
  constexpr int kPasses = BN / kRowsPerPass;
  static_assert(!PAGED || kPasses <= kMaxPagedLoadPasses, "paged: each load pass holds its key's page lookup");
  // A page size known here, a multiple of the rows a load pass covers, and
  // either a whole number of pages a block or a whole number of blocks a
  // page: a block starts a page or lies in one (its first key, k_begin + block
  // * BN, is a multiple of BN), and a thread's passes within a page step its
  // sources by a constant, reading the page's id once.
  constexpr bool kPageSteps =
      PAGE > 0 && PAGE % kRowsPerPass == 0 && (BN % PAGE == 0 || PAGE % BN == 0);

  extern __shared__ __align__(128) unsigned char smem[];
  // WG: the swizzle atoms start 1024-byte aligned (the host adds the slack).
  const u32 sQ = WG ? (smem_addr(smem) + u32(kDecodeWgAlign - 1)) & ~u32(kDecodeWgAlign - 1) : smem_addr(smem);
  const u32 sK = sQ + QTile::kBytes;
  const u32 sV = sK + STAGES * KVTile::kBytes;

  const int tid = threadIdx.x;
  const int lane = tid % 32;
  const int warp = tid / 32;
  const int warp_m = warp % WM;  // rows warp_m * 16 ...
  const int warp_n = warp / WM;  // keys warp_n * KW ... of each block
  const int m_block = int(blockIdx.x / unsigned(p.splits));
  const int split = int(blockIdx.x) - m_block * p.splits;
  const int head_kv = blockIdx.y;  // PAIRED: the pair, KV heads 2y and 2y + 1
  const int batch = blockIdx.z;
  const int m0 = m_block * BM;
  // The CTA's rows: PAIRED, each KV head's p.rows, the second head's after
  // the first's (tile_heads.cuh maps a row to its KV head). Read where used,
  // so that unpaired code compiles as it did before PAIRED: some variants sit
  // at 255 registers.
  auto rows = [&] { return PAIRED ? 2 * p.rows : p.rows; };
  using Heads = TileHeads<PAIRED, kHeadD>;

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Where the other CTA pushes this CTA's rows' parts, the barrier they
  // complete on: set up before anything is waited for.
  const u32 parts_bar = sQ + u32(decode_parts_barrier_offset(D, BM, BN, STAGES, WARPS, PAGED, KB, kFactorHeads));
  if constexpr (kPushParts) {
    if (p.cluster_merge && tid == 0) expect_pushed_parts<kHeadD, BM, PAIRED>(p, parts_bar, split, m0);
  }
#endif

  // Everything below may read what the previous kernel in the stream wrote
  // (q, the cache, its table and lengths).
  grid_dependency_wait();
  launch_dependent_grids();

  // Lengths past seq_k (which the host checked the table against) are
  // clamped, so a bad length cannot send a load out of bounds. Keys past the
  // length are not loaded (zero-filled): a cache may hold anything there, NaN
  // included, and 0 * NaN would reach the output.
  const int len = min(max(p.seq_lens != nullptr ? p.seq_lens[batch] : p.seq_k, 0), p.seq_k);
  const int k_begin = split * p.split_keys;
  const int k_end = min(len, k_begin + p.split_keys);
  const int n_blocks = k_end > k_begin ? int(unsigned(k_end - k_begin + BN - 1) / unsigned(BN)) : 0;
  const int offset = p.causal_offset + len - p.seq_k;

  // FP8: the K descale joins the softmax scale; the V descale, the output's
  // normalizer.
  float scale_log2 = p.scale_log2;
  float v_descale = 1.f;
  if constexpr (kFp8 && !PAIRED && !PAGE_DESCALE) {
    const i64 at = batch * p.descale_stride[0] + head_kv * p.descale_stride[1];
    scale_log2 *= p.k_descale[at];
    v_descale = p.v_descale[at];
  }

  // Q rows: packed row r is position r / group of head head_kv * group + r % group
  // (PAIRED: of its own KV head, in that head's half of the columns).
  {
    constexpr int kTotal = BM * kChunks;
#pragma unroll
    for (int it = 0; it < (kTotal + kThreads - 1) / kThreads; ++it) {
      const int idx = it * kThreads + tid;
      if (kTotal % kThreads == 0 || idx < kTotal) {
        const int row = idx / kChunks;
        const int col = (idx % kChunks) * 8;
        const int r = m0 + row;
        const int rh = Heads::row_in_head(p, r);
        const bool valid = r < rows() && Heads::owns(p, r, col);
        const QueryRow q = query_row(p, Heads::kv_head(p, head_kv, r), rh);
        const char* src = static_cast<const char*>(p.q) + (batch * p.q_stride[0] + q.head * p.q_stride[1] +
                                                           q.pos * p.q_stride[2] + Heads::column_in_head(col)) * 2;
        cp_async_cg_16(sQ + QTile::offset(row, col), valid ? src : p.q, valid ? 16 : 0);
      }
    }
    cp_async_commit_group();
  }

  // This thread loads chunk column my_col of rows my_row + pass * kRowsPerPass
  // of each block, kLead blocks ahead of the one in use: STAGES - 1, or with
  // warpgroup MMAs STAGES - 2, whose last block's P V still reads its stage
  // while the next block's loads go out. Paged: a block's page ids (the table
  // entries from its first key's page to its last key's, at most BN) are
  // copied by cp.async into a shared slot in the group that carries the data
  // of the block kLead before it, so they land kLead blocks before its own
  // loads are issued: a table read queues behind the K/V bytes in flight, and with
  // less lead than the ring's a deep ring waited on it every block (the
  // paged decode got slower with every stage past three). Slots are indexed
  // block % (2 * STAGES), so that the prologue's need no barrier between
  // them and each is rewritten a barrier after its last read.
  const int my_row = tid / kKvChunks;
  const int my_col = (tid % kKvChunks) * (16 / KB);  // elements, of the tile
  // PAIRED: the thread's chunks are of KV head 2y + my_col / 64, at my_col % 64.
  const int my_head_kv = PAIRED ? 2 * head_kv + my_col / kHeadD : head_kv;
  const int my_src_col = PAIRED ? my_col % kHeadD : my_col;
  constexpr int kLead = WG ? STAGES - 2 : STAGES - 1;
  static_assert(kLead >= 1, "warpgroup MMAs keep a stage for the last block's P V: at least 3 stages");
  constexpr int kTableSlots = 2 * STAGES;
  const u32 sTable = sV + STAGES * KVTile::kBytes;  // [kTableSlots][BN] page ids
  // PAGE_DESCALE: [STAGES][K, V][kFactorHeads][BN] factors, one a key. A
  // thread's two keys of a 16-key step sit side by side, for one 8-byte load:
  // keys g and g + 8 (keys as rows), 2c and 2c + 1 (else, as they come).
  const u32 sFactors = sTable + kTableSlots * BN * 4;
  auto factor_slot = [&](int block, int kv, int head, int slot) {
    return sFactors + u32((((block % STAGES) * 2 + kv) * kFactorHeads + head) * BN + slot) * 4;
  };
  auto factor_key_slot = [](int key) { return kKeysAsRows ? (key & ~15) | (key & 7) << 1 | (key >> 3 & 1) : key; };
  // A key's page index and the page size: constants where PAGE is known.
  auto page_of = [&](unsigned key) { return PAGE > 0 ? key / unsigned(PAGE) : p.page_div.quotient(key); };
  const unsigned page_keys = PAGE > 0 ? unsigned(PAGE) : p.page_div.divisor;
  auto first_page_index = [&](int block) { return int(page_of(unsigned(k_begin + block * BN))); };
  auto copy_table = [&](int block) {
    if constexpr (PAGED) {
      if (block >= n_blocks) return;
      const int first = first_page_index(block);
      const int last = int(page_of(unsigned(min(k_begin + (block + 1) * BN, k_end) - 1)));
      if (tid <= last - first) {  // at most BN <= threads entries (static_assert above)
        cp_async_ca_4(sTable + u32((block % kTableSlots) * BN + tid) * 4,
                      p.block_table + batch * p.table_stride + first + tid);
      }
    }
  };
  // A key's pool page (clamped to the pool) and its row in the page, from
  // block `block`'s table slot (`first`: that block's first page index). A
  // key past the split's end takes its last key's page.
  struct KeyPage {
    int page;
    unsigned row;
  };
  auto key_page = [&](int block, int first, int key) {
    const unsigned in_range = unsigned(min(key, k_end - 1));
    const unsigned index = page_of(in_range);
    const int entry = int(ld_shared_b32(sTable + u32((block % kTableSlots) * BN + int(index) - first) * 4));
    return KeyPage{max(min(entry, p.num_pages - 1), 0), in_range - index * page_keys};
  };
  const char* k_head = static_cast<const char*>(p.k) + my_head_kv * p.k_stride[1] * KB;
  const char* v_head = static_cast<const char*>(p.v) + my_head_kv * p.v_stride[1] * KB;
  // Contiguous caches: this thread's sources for its first row of the
  // split's first block, and the bytes from one load pass (kRowsPerPass keys)
  // or one block (BN keys) to the next, so that a copy's address is a 64-bit
  // add where it was a product of strides per copy (~12 instructions a
  // copy). Only where it measured faster (docs/perf-log.md "decode v17"):
  // blocks of 8 rows at head dim 128 (4% on a small decode), warpgroup tiles
  // and FP8 caches (2-3% at 32 and 64 rows). A 16-bit block of 32 rows
  // measured 0.5% slower with it, and the pointers' ~8 more registers
  // spilled at head dim 256 and where one 16-bit warp takes all of a block's
  // keys.
  constexpr bool kSteppedSources = !PAGED && D <= 128 && (kFp8 || WG || (kKeysAsRows && D == 128));
  const i64 k_key_bytes = p.k_stride[2] * KB, v_key_bytes = p.v_stride[2] * KB;
  const char* k_src_first = k_head + (i64(batch) * p.k_stride[0] + i64(k_begin + my_row) * p.k_stride[2] + my_src_col) * KB;
  const char* v_src_first = v_head + (i64(batch) * p.v_stride[0] + i64(k_begin + my_row) * p.v_stride[2] + my_src_col) * KB;
  // kPageSteps: row my_row of page 0 (the page's base is added per page).
  const i64 k_page_bytes = p.k_stride[0] * KB, v_page_bytes = p.v_stride[0] * KB;
  const char* k_row_src = k_head + (i64(my_row) * p.k_stride[2] + my_src_col) * KB;
  const char* v_row_src = v_head + (i64(my_row) * p.v_stride[2] + my_src_col) * KB;
  auto load_kv = [&](int block) {
    if (block >= n_blocks) return;
    const u32 stage = u32(block % STAGES) * KVTile::kBytes;
    const int first = PAGED ? first_page_index(block) : 0;
    if constexpr (PAGE_DESCALE) {
      // Each key's page factors, by one thread a key (BN <= threads, as for
      // the page lookups), once a block and before its rows: the threads
      // that load a row's chunks take several rows a block each, and copying
      // the factors in their passes cost every warp instructions on every
      // pass. A key past the split's end takes its last key's page, so every
      // slot holds some page's factors (such a key's score is masked, its
      // probability 0).
      if (tid < BN) {
        const i64 page = key_page(block, first, k_begin + block * BN + tid).page;
        const int slot = factor_key_slot(tid);
#pragma unroll
        for (int h = 0; h < kFactorHeads; ++h) {
          const i64 at = page * p.descale_stride[0] + i64(PAIRED ? 2 * head_kv + h : head_kv) * p.descale_stride[1];
          cp_async_ca_4(factor_slot(block, 0, h, slot), p.k_descale + at);
          cp_async_ca_4(factor_slot(block, 1, h, slot), p.v_descale + at);
        }
      }
    }
    const char* k_step_src = k_src_first + i64(block) * BN * k_key_bytes;  // kSteppedSources: pass 0's
    const char* v_step_src = v_src_first + i64(block) * BN * v_key_bytes;
    // kPageSteps: the block's first key's row in its page (0 where a block
    // starts a page), and this thread's sources in the current page.
    const unsigned block_row0 = PAGE > BN ? unsigned(k_begin + block * BN) % unsigned(PAGE) : 0u;
    const char* k_page_src = nullptr;
    const char* v_page_src = nullptr;
#pragma unroll
    for (int pass = 0; pass < kPasses; ++pass) {
      const int row = my_row + pass * kRowsPerPass;
      const int key = k_begin + block * BN + row;
      const bool valid = key < k_end;
      if constexpr (kPageSteps) {
        // Pass `pass` covers block rows pass * kRowsPerPass + [0,
        // kRowsPerPass): page (pass * kRowsPerPass) / PAGE of the block's
        // table slot, rows from block_row0 + (pass * kRowsPerPass) % PAGE.
        // A key past the split's end may read a slot its block did not
        // fill: its page id is clamped to the pool and its row stays in the
        // page, so its address is in the pool (it is not loaded).
        constexpr int kPassesPerPage = PAGE / kRowsPerPass;
        if (pass % kPassesPerPage == 0) {
          const int slot = PAGE <= BN ? pass / kPassesPerPage : 0;
          const int entry = int(ld_shared_b32(sTable + u32((block % kTableSlots) * BN + slot) * 4));
          const unsigned page = unsigned(max(min(entry, p.num_pages - 1), 0));
          k_page_src = k_row_src + page * k_page_bytes;
          v_page_src = v_row_src + page * v_page_bytes;
          if constexpr (PAGE > BN) {
            k_page_src += block_row0 * k_key_bytes;
            v_page_src += block_row0 * v_key_bytes;
          }
        } else {
          k_page_src += kRowsPerPass * k_key_bytes;
          v_page_src += kRowsPerPass * v_key_bytes;
        }
        cp_async_cg_16(sK + stage + KVTile::offset(row, my_col), k_page_src, valid ? 16 : 0);
        cp_async_cg_16(sV + stage + KVTile::offset(row, my_col), v_page_src, valid ? 16 : 0);
      } else if constexpr (PAGED) {
        // Keys past the split's end take its last key's address (they are
        // not loaded). Page ids and rows as 32-bit unsigned, so each product
        // with a stride is one wide multiply-add: a paged decode computes
        // these addresses every block, between its barrier and its math.
        const KeyPage at = key_page(block, first, key);
        const unsigned long long page = unsigned(at.page), page_row = at.row;
        const char* k_src = k_head + (page * p.k_stride[0] + page_row * p.k_stride[2] + my_src_col) * KB;
        const char* v_src = v_head + (page * p.v_stride[0] + page_row * p.v_stride[2] + my_src_col) * KB;
        cp_async_cg_16(sK + stage + KVTile::offset(row, my_col), k_src, valid ? 16 : 0);
        cp_async_cg_16(sV + stage + KVTile::offset(row, my_col), v_src, valid ? 16 : 0);
      } else if constexpr (kSteppedSources) {
        cp_async_cg_16(sK + stage + KVTile::offset(row, my_col), valid ? k_step_src : p.k, valid ? 16 : 0);
        cp_async_cg_16(sV + stage + KVTile::offset(row, my_col), valid ? v_step_src : p.v, valid ? 16 : 0);
        k_step_src += kRowsPerPass * k_key_bytes;
        v_step_src += kRowsPerPass * v_key_bytes;
      } else {
        // The products of strides, as before the stepped sources: their
        // machine code stays the same where stepping is not used.
        const i64 outer = batch, inner = key;
        const char* k_src = k_head + (outer * p.k_stride[0] + inner * p.k_stride[2] + my_src_col) * KB;
        const char* v_src = v_head + (outer * p.v_stride[0] + inner * p.v_stride[2] + my_src_col) * KB;
        cp_async_cg_16(sK + stage + KVTile::offset(row, my_col), valid ? k_src : p.k, valid ? 16 : 0);
        cp_async_cg_16(sV + stage + KVTile::offset(row, my_col), valid ? v_src : p.v, valid ? 16 : 0);
      }
    }
  };

  // kLead blocks in flight ahead of the one in use; every group is
  // committed even when empty, so the wait counts are constants. Group n
  // carries block n's K/V and block n + kLead's page ids; the page ids
  // of the first kLead blocks come first, and are waited for.
  if constexpr (PAGED) {
#pragma unroll
    for (int s = 0; s < kLead; ++s) copy_table(s);
    cp_async_commit_group();
    cp_async_wait_group<0>();
    __syncthreads();
  }
#pragma unroll
  for (int s = 0; s < kLead; ++s) {
    load_kv(s);
    copy_table(s + kLead);
    cp_async_commit_group();
  }
  cp_async_wait_group<kLead>();  // the Q group
  __syncthreads();

  // PAGE_DESCALE: the V factor of the split's first key, per KV head of the
  // tile (its page is block 0's first table entry, landed above; no key:
  // 1). Probabilities are scaled by their key's factor over it, the output
  // by it.
  float v_first[kFactorHeads > 0 ? kFactorHeads : 1] = {1.f};
  float v_first_inv[kFactorHeads > 0 ? kFactorHeads : 1] = {1.f};
  if constexpr (PAGE_DESCALE) {
    const int entry = int(ld_shared_b32(sTable));
    const i64 page = max(min(entry, p.num_pages - 1), 0);
#pragma unroll
    for (int h = 0; h < kFactorHeads; ++h) {
      const float f = p.v_descale[page * p.descale_stride[0] + i64(PAIRED ? 2 * head_kv + h : head_kv) * p.descale_stride[1]];
      v_first[h] = n_blocks > 0 ? f : 1.f;
      v_first_inv[h] = rcp_approx_or_zero(v_first[h]);  // no division: its slow path branches on the value
    }
    v_descale = v_first[0];
  }

  const int warp_key0 = warp_n * KW;  // this warp's keys within a block
  // Each block: wait until it has landed, then issue the loads kLead
  // blocks ahead.
  auto next_block = [&](int block) {
    cp_async_wait_group<kLead - 1>();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if constexpr (WG) sm90::fence_proxy_async_shared();  // this thread's landed bytes, for the MMAs' reads
#endif
    __syncthreads();  // the block (and block + kLead's page ids) landed for all; block + kLead's stage is free
    load_kv(block + kLead);
    copy_table(block + 2 * kLead);
    cp_async_commit_group();
  };

  // After the loop the warps that shared the keys are merged: row max m_w
  // (log2 units) and sum l_w per warp give the row's M and L, and O is the
  // sum over warps, in warp order, of each warp's O times exp2(m_w - M) / L.
  // Most warps scale their own rows before storing them, a barrier after
  // storing their statistics. Over an FP8 cache the warps of a block of 8
  // rows store theirs unscaled beside their statistics, and the summing pass
  // weighs them: one barrier and one pass over the statistics fewer (1-2%
  // on those decodes, docs/perf-log.md "decode v13"). 16-bit blocks of 8 keep
  // the two barriers: on sm_90, where ptxas picks their register target
  // itself, the weighted pass made it spill.
  constexpr bool kWeightedSum = kKeysAsRows && kFp8;
  constexpr int kRowFloats = decode_merge_row_floats(D);
  const u32 merge = sQ;
  const u32 stat_max = merge + u32(WN * BM * kRowFloats * 4);
  const u32 stat_sum = stat_max + u32(WN * BM * 4);
  const float neg_inf = -__int_as_float(0x7f800000);
  // The row's M and L, and each warp's exp2(m_w - M) (0 for a warp without
  // keys; M = -inf: none has any).
  auto row_stats = [&](int row, float& max_all, float& sum_all, float (&warp_scale)[WN]) {
    float mx = neg_inf;
#pragma unroll
    for (int w = 0; w < WN; ++w) mx = fmaxf(mx, ld_shared_f32(stat_max + u32((w * BM + row) * 4)));
    const float safe = mx == neg_inf ? 0.f : mx;
    float sum = 0.f;
#pragma unroll
    for (int w = 0; w < WN; ++w) {
      const float m = ld_shared_f32(stat_max + u32((w * BM + row) * 4));
      const float l = ld_shared_f32(stat_sum + u32((w * BM + row) * 4));
      warp_scale[w] = ex2_approx(m - safe);
      sum += l * warp_scale[w];
    }
    max_all = mx;
    sum_all = sum;
  };

  if constexpr (kKeysAsRows) {
    constexpr int MK = KW / 16;  // 16-key m-tiles per warp and block
    constexpr int OT = D / 16;   // 16-column tiles of O^T
    u32 q[OT][2];
    load_q_columns<D, TKV, QTile>(q, sQ, lane);
    // The first hidden key of this thread's rows 2c and 2c + 1; PAIRED, their
    // own KV heads' descale factors.
    int key_limit[2];
    float row_scale_log2[2] = {scale_log2, scale_log2};
    float row_v_descale[2] = {v_descale, v_descale};
    int row_head[2] = {0, 0};                  // PAGE_DESCALE: the row's factors (its KV head of the tile)
    float row_v_ratio[2] = {1.f, 1.f};         // PAGE_DESCALE: 1 / the row's v_first
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = m0 + 2 * (lane % 4) + r;
      const int pos = int(p.group_div.quotient(unsigned(Heads::row_in_head(p, row))));
      key_limit[r] = CAUSAL ? min(k_end, pos + offset + 1) : k_end;
      if constexpr (PAGE_DESCALE) {
        row_head[r] = Heads::half(p, row);
        row_v_descale[r] = row_head[r] != 0 ? v_first[kFactorHeads - 1] : v_first[0];
        row_v_ratio[r] = row_head[r] != 0 ? v_first_inv[kFactorHeads - 1] : v_first_inv[0];
      } else if constexpr (PAIRED) {
        const i64 at = batch * p.descale_stride[0] + Heads::kv_head(p, head_kv, row) * p.descale_stride[1];
        row_scale_log2[r] = scale_log2 * p.k_descale[at];
        row_v_descale[r] = p.v_descale[at];
      }
    }
    // PAGE_DESCALE: s[mk][2 hi + r] *= the K (kv 0) or V (kv 1) factor of
    // key 16 mk + g + 8 hi for row r's head, times ratio[r].
    auto scale_by_factors = [&](float (&s)[MK][4], int block, int kv, const float (&ratio)[2]) {
#pragma unroll
      for (int mk = 0; mk < MK; ++mk) {
        const int slot = warp_key0 + mk * 16 + 2 * (lane / 4);  // keys g and g + 8 (factor_key_slot)
        float f0[2], f1[2];
        ld_shared_v2_f32(f0[0], f0[1], factor_slot(block, kv, row_head[0], slot));
        if constexpr (PAIRED) {
          ld_shared_v2_f32(f1[0], f1[1], factor_slot(block, kv, row_head[1], slot));
        } else {
          f1[0] = f0[0];
          f1[1] = f0[1];
        }
#pragma unroll
        for (int hi = 0; hi < 2; ++hi) {
          s[mk][2 * hi] *= f0[hi] * ratio[0];
          s[mk][2 * hi + 1] *= f1[hi] * ratio[1];
        }
      }
    };
    float o[OT][4];
    zero(o);
    KeysAsRowsSoftmax<MK, OT> softmax(row_scale_log2);
    for (int block = 0; block < n_blocks; ++block) {
      next_block(block);
      const u32 k_stage = sK + u32(block % STAGES) * KVTile::kBytes;
      const u32 v_stage = sV + u32(block % STAGES) * KVTile::kBytes;
      float s[MK][4];
      zero(s);
      score_block<D, MK, T, TKV, KVTile>(s, q, k_stage, warp_key0, lane);
      if constexpr (PAGE_DESCALE) scale_by_factors(s, block, 0, {1.f, 1.f});
      // Keys past the split's end or a row's diagonal: a select per score.
      const int key0 = k_begin + block * BN + warp_key0;
#pragma unroll
      for (int mk = 0; mk < MK; ++mk)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = key0 + mk * 16 + lane / 4 + 8 * (e / 2);
          s[mk][e] = key < key_limit[e % 2] ? s[mk][e] : neg_inf;
        }
      softmax.update(s, o);
      if constexpr (PAGE_DESCALE) scale_by_factors(s, block, 1, row_v_ratio);
      pv_block<D, MK, T, TKV, KVTile>(o, s, v_stage, warp_key0, lane);
    }
    cp_async_wait_group<0>();
    __syncthreads();  // the ring is free: it becomes the merge buffer
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    // ... and, merging in the cluster, the other CTA's to store its part in
    // (its reads are done: no release).
    if (kPushParts && p.cluster_merge) cluster_arrive_relaxed();
#endif

    // FP8 (kWeightedSum): each row's O unnormalized, times the V descale,
    // beside the statistics with no barrier between. Tiles 2q and 2q + 1
    // hold a row's adjacent columns (ot_column): one 8-byte store for the
    // pair.
    float l[2], m[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      l[r] = softmax.total_sum(r);
      m[r] = l[r] == 0.f ? neg_inf : softmax.row_max[r] * row_scale_log2[r];
      if (lane < 4) {
        st_shared_f32(stat_max + u32((warp_n * BM + 2 * lane + r) * 4), m[r]);
        st_shared_f32(stat_sum + u32((warp_n * BM + 2 * lane + r) * 4), l[r]);
      }
      if constexpr (kWeightedSum) {
        const u32 row_addr = merge + u32((warp_n * BM + 2 * (lane % 4) + r) * kRowFloats * 4);
#pragma unroll
        for (int t = 0; t < OT; t += 2)
#pragma unroll
          for (int high = 0; high < 2; ++high) {
            const int e = 2 * high + r;
            st_shared_v2_f32(row_addr + u32(ot_column<kFp8>(t, e, lane) * 4), o[t][e] * row_v_descale[r],
                             o[t + 1][e] * row_v_descale[r]);
          }
      }
    }
    if constexpr (!kWeightedSum) {
      __syncthreads();
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = 2 * (lane % 4) + r;
        float max_all, sum_all, warp_scale[WN];
        row_stats(row, max_all, sum_all, warp_scale);
        const float factor = ex2_approx(m[r] - (max_all == neg_inf ? 0.f : max_all)) * rcp_approx_or_zero(sum_all);
        const u32 row_addr = merge + u32((warp_n * BM + row) * kRowFloats * 4);
#pragma unroll
        for (int t = 0; t < OT; ++t)
#pragma unroll
          for (int high = 0; high < 2; ++high) {
            const int e = 2 * high + r;
            st_shared_f32(row_addr + u32(ot_column<kFp8>(t, e, lane) * 4), o[t][e] * factor);
          }
      }
    }
  } else {
    // Q's A fragment of head-dim step kt. FP8: columns 4c..4c+3 of the step
    // stand where the mma expects 2c, 2c+1, 2c+8, 2c+9, as in K's fragments.
    auto load_q_frag = [&](u32 (&a)[4], int kt) {
      if constexpr (kFp8) {
        const int row = warp_m * 16 + lane / 4;
        const int col = kt * 16 + 4 * (lane % 4);
        ld_shared_v2_b32(a[0], a[2], sQ + QTile::offset(row, col));
        ld_shared_v2_b32(a[1], a[3], sQ + QTile::offset(row + 8, col));
      } else {
        ldmatrix_x4(a, sQ + QTile::offset(warp_m * 16 + lane % 16, kt * 16 + (lane / 16) * 8));
      }
    };
    constexpr bool kQInRegisters = !WG && D <= 128;  // else read per block: the registers go to O (WG: not read)
    u32 q_frag[kQInRegisters ? KT : 1][4];
    if constexpr (kQInRegisters) {
#pragma unroll
      for (int kt = 0; kt < KT; ++kt) load_q_frag(q_frag[kt], kt);
    }

    // The first hidden key of each of this thread's rows.
    int key_limit[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = m0 + warp_m * 16 + mt * 16 + lane / 4 + 8 * r;
        const int pos = int(p.group_div.quotient(unsigned(row)));
        key_limit[mt][r] = CAUSAL ? min(k_end, pos + offset + 1) : k_end;
      }
    }

    float o[MT][DT][4];
    zero(o);
    OnlineSoftmax<MT, NT, DT> softmax(scale_log2);

    // Keys past the split's end or a row's diagonal: a select per score.
    auto mask_scores = [&](float (&s)[MT][NT][4], int block) {
      const int key0 = k_begin + block * BN + warp_key0;
      const float neg_inf = -__int_as_float(0x7f800000);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int r = 0; r < 2; ++r)
#pragma unroll
          for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int key = key0 + nt * 8 + 2 * (lane % 4) + e;
              s[mt][nt][2 * r + e] = key < key_limit[mt][r] ? s[mt][nt][2 * r + e] : neg_inf;
            }
    };

    if constexpr (WG) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
      // Each block's S = Q K^T goes out with the last block's O += P V behind
      // it: the softmax waits for S alone and runs while P V does, and O is
      // rescaled once P V has landed (the ring's lead, kLead, leaves the
      // stage P V reads alone).
      u32 pa[KW / 16][4];
      // Inlined at two calls, the first block's (first: no P V before it) and
      // the loop's, so that no branch sits between P V's registers and its
      // issue (one there made ptxas move them and add a warpgroup arrive).
      auto wg_block = [&](int block, bool first) {
        next_block(block);
        const u32 k_stage = sK + u32(block % STAGES) * KVTile::kBytes;
        const u32 v_last = sV + u32((block + STAGES - 1) % STAGES) * KVTile::kBytes;
        float s[MT][NT][4];
        issue_warpgroup_scores<D, KW, BN, T>(s[0], sQ, k_stage + u32(warp_key0 * 128));
        sm90::wgmma_commit_group();
        if (!first) issue_warpgroup_pv<D, KW, BN, T>(o[0], pa, v_last + u32(warp_key0 * 128));
        sm90::wgmma_commit_group();  // P V's group, empty for the first block
        sm90::wgmma_wait_group<1>();
        sm90::fence_accumulators(s[0]);
        mask_scores(s, block);
        float correction[MT][2];
        softmax.update_scores(s, correction);
        sm90::wgmma_wait_group<0>();
        sm90::fence_accumulators(o[0]);
        OnlineSoftmax<MT, NT, DT>::rescale(o, correction);
#pragma unroll
        for (int kk = 0; kk < KW / 16; ++kk) to_operand_a<T>(s, 0, kk, pa[kk]);
      };
      if (n_blocks > 0) {
        wg_block(0, true);
        for (int block = 1; block < n_blocks; ++block) wg_block(block, false);
        issue_warpgroup_pv<D, KW, BN, T>(o[0], pa, sV + u32((n_blocks - 1) % STAGES) * KVTile::kBytes +
                                                       u32(warp_key0 * 128));
        sm90::wgmma_commit_group();
        sm90::wgmma_wait_group<0>();
        sm90::fence_accumulators(o[0]);
      }
#endif
    } else {  // mma.sync: each warp its 16 rows
    for (int block = 0; block < n_blocks; ++block) {
      next_block(block);
      const u32 k_stage = sK + u32(block % STAGES) * KVTile::kBytes;
      const u32 v_stage = sV + u32(block % STAGES) * KVTile::kBytes;

      auto q_of = [&](u32 (&a)[4], int kt) {
        if constexpr (kQInRegisters) {
#pragma unroll
          for (int i = 0; i < 4; ++i) a[i] = q_frag[kt][i];
        } else {
          load_q_frag(a, kt);
        }
      };
      float s[MT][NT][4];
      zero(s);
      if constexpr (kFp8) {
        // Per ldmatrix: 16 keys by two 16-column steps of the head dim, the
        // register of matrix j holding key lane / 4 (+ 8 for j >= 2), columns
        // 4 (lane % 4) .. + 3 of step j % 2.
#pragma unroll
        for (int kt2 = 0; kt2 < KT / 2; ++kt2) {
          u32 a0[4], a1[4];
          q_of(a0, 2 * kt2);
          q_of(a1, 2 * kt2 + 1);
#pragma unroll
          for (int np = 0; np < NT / 2; ++np) {
            const int mi = lane / 8;
            u32 b[4], lo, hi;
            ldmatrix_x4(b, k_stage + KVTile::offset(warp_key0 + np * 16 + (mi / 2) * 8 + lane % 8, (2 * kt2 + mi % 2) * 16));
            cvt_fp8x4<TKV, T>(b[0], lo, hi);
            mma_m16n8k16<T>(s[0][2 * np], a0, lo, hi);
            cvt_fp8x4<TKV, T>(b[1], lo, hi);
            mma_m16n8k16<T>(s[0][2 * np], a1, lo, hi);
            cvt_fp8x4<TKV, T>(b[2], lo, hi);
            mma_m16n8k16<T>(s[0][2 * np + 1], a0, lo, hi);
            cvt_fp8x4<TKV, T>(b[3], lo, hi);
            mma_m16n8k16<T>(s[0][2 * np + 1], a1, lo, hi);
          }
        }
      } else {
#pragma unroll
        for (int kt = 0; kt < KT; ++kt) {
          u32 a[4];
          q_of(a, kt);
#pragma unroll
          for (int np = 0; np < NT / 2; ++np) {
            const int mi = lane / 8;
            u32 b[4];
            ldmatrix_x4(b, k_stage + KVTile::offset(warp_key0 + np * 16 + (mi / 2) * 8 + lane % 8, kt * 16 + (mi % 2) * 8));
            mma_m16n8k16<T>(s[0][2 * np], a, b[0], b[1]);
            mma_m16n8k16<T>(s[0][2 * np + 1], a, b[2], b[3]);
          }
        }
      }
      // PAGE_DESCALE: s[0][nt][2 r + e] *= key nt * 8 + 2c + e's K (kv 0) or
      // V (kv 1) factor, times ratio.
      auto scale_by_factors = [&](int kv, float ratio) {
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          float f[2];
          ld_shared_v2_f32(f[0], f[1], factor_slot(block, kv, 0, warp_key0 + nt * 8 + 2 * (lane % 4)));
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            s[0][nt][e] *= f[e] * ratio;
            s[0][nt][2 + e] *= f[e] * ratio;
          }
        }
      };
      if constexpr (PAGE_DESCALE) scale_by_factors(0, 1.f);
      mask_scores(s, block);
      softmax.update(s, o);
      if constexpr (PAGE_DESCALE) scale_by_factors(1, v_first_inv[0]);

#pragma unroll
      for (int pk = 0; pk < PT; ++pk) {
        u32 a[4];
        to_operand_a<T>(s, 0, pk, a);
        if constexpr (kFp8) {
          // Per ldmatrix.trans of byte pairs: 16 keys by two 16-column chunks.
          // Matrix j's register holds keys 2 (lane % 4) and + 1 (+ 8 for odd
          // j) at columns 2g and 2g + 1 (g = lane / 4) of chunk j / 2: its
          // even column and its odd one are the B operands of two tiles, o
          // tile 4 dq + 2 (j / 2) (columns 2n of the chunk) and the next
          // (2n + 1).
#pragma unroll
          for (int dq = 0; dq < D / 32; ++dq) {
            const int mi = lane / 8;
            u32 b[4], even_lo, odd_lo, even_hi, odd_hi;
            ldmatrix_x4_trans(b, v_stage + KVTile::offset(warp_key0 + pk * 16 + (mi % 2) * 8 + lane % 8, (2 * dq + mi / 2) * 16));
#pragma unroll
            for (int c = 0; c < 2; ++c) {
              cvt_fp8x4<TKV, T>(byte_perm<0x3120>(b[2 * c]), even_lo, odd_lo);
              cvt_fp8x4<TKV, T>(byte_perm<0x3120>(b[2 * c + 1]), even_hi, odd_hi);
              mma_m16n8k16<T>(o[0][4 * dq + 2 * c], a, even_lo, even_hi);
              mma_m16n8k16<T>(o[0][4 * dq + 2 * c + 1], a, odd_lo, odd_hi);
            }
          }
        } else {
#pragma unroll
          for (int dp = 0; dp < DT / 2; ++dp) {
            const int mi = lane / 8;
            u32 b[4];
            ldmatrix_x4_trans(b, v_stage + KVTile::offset(warp_key0 + pk * 16 + (mi % 2) * 8 + lane % 8, dp * 16 + (mi / 2) * 8));
            mma_m16n8k16<T>(o[0][2 * dp], a, b[0], b[1]);
            mma_m16n8k16<T>(o[0][2 * dp + 1], a, b[2], b[3]);
          }
        }
      }
    }
    }  // the mma.sync blocks (left at the indentation they had before WG)
    cp_async_wait_group<0>();
    __syncthreads();  // the ring is free: it becomes the merge buffer
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = warp_m * 16 + mt * 16 + lane / 4 + 8 * r;
        const float l = softmax.total_sum(mt, r);
        const float m = l == 0.f ? neg_inf : softmax.row_max[mt][r] * scale_log2;
        if (lane % 4 == 0) {
          st_shared_f32(stat_max + u32((warp_n * BM + row) * 4), m);
          st_shared_f32(stat_sum + u32((warp_n * BM + row) * 4), l);
        }
      }
    }
    __syncthreads();
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = warp_m * 16 + mt * 16 + lane / 4 + 8 * r;
        float max_all, sum_all, warp_scale[WN];
        row_stats(row, max_all, sum_all, warp_scale);
        const float l = softmax.total_sum(mt, r);
        const float m = l == 0.f ? neg_inf : softmax.row_max[mt][r] * scale_log2;
        float factor = ex2_approx(m - (max_all == neg_inf ? 0.f : max_all)) * rcp_approx_or_zero(sum_all);
        if constexpr (kFp8) {
          factor *= v_descale;
          const u32 row_addr = merge + u32((warp_n * BM + row) * kRowFloats * 4);
          // Tiles 2i and 2i + 1 hold columns 4 (lane % 4) .. + 3 of chunk i,
          // interleaved (the PV loop above).
#pragma unroll
          for (int i = 0; i < DT / 2; ++i) {
            const float* even = o[mt][2 * i];
            const float* odd = o[mt][2 * i + 1];
            st_shared_v4_f32(row_addr + u32((i * 16 + 4 * (lane % 4)) * 4), even[2 * r] * factor, odd[2 * r] * factor,
                             even[2 * r + 1] * factor, odd[2 * r + 1] * factor);
          }
        } else {
#pragma unroll
          for (int dt = 0; dt < DT; ++dt) {
            const u32 addr = merge + u32(((warp_n * BM + row) * kRowFloats + dt * 8 + 2 * (lane % 4)) * 4);
            st_shared_v2_f32(addr, o[mt][dt][2 * r] * factor, o[mt][dt][2 * r + 1] * factor);
          }
        }
      }
    }
  }
  __syncthreads();

  // Each thread sums 8 columns of one row over the warps (weighted, where
  // they were stored unscaled) and stores them (PAIRED: those in its row's KV
  // head's half).
  constexpr float kLn2 = 0.6931471805599453f;
  const i64 part_row0 = ((i64(split) * p.batch + batch) * p.heads_kv + head_kv) * p.rows;
  const u32 cluster_part = merge + u32(decode_merge_bytes(D, BM, WARPS));  // cluster_merge only
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (kPushParts && p.cluster_merge) cluster_wait();  // the other CTA's ring is free
#endif
#pragma unroll
  for (int it = 0; it < (BM * kChunks + kThreads - 1) / kThreads; ++it) {
    const int idx = it * kThreads + tid;
    const int row = idx / kChunks;
    const int col = (idx % kChunks) * 8;
    const int r = m0 + row;
    if ((BM * kChunks % kThreads == 0 || idx < BM * kChunks) && r < rows() &&
        Heads::owns(p, r, col)) {
      // Weighted, the statistics come first; else after the sum, where the
      // unweighted variants' machine code has them.
      float max_all, sum_all, warp_scale[WN], inv_sum;
      if constexpr (kWeightedSum) {
        row_stats(row, max_all, sum_all, warp_scale);
        inv_sum = rcp_approx_or_zero(sum_all);
      }
      float sum[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int w = 0; w < WN; ++w) {
        float x[4], y[4];
        const u32 addr = merge + u32(((w * BM + row) * kRowFloats + col) * 4);
        ld_shared_v4_f32(x, addr);
        ld_shared_v4_f32(y, addr + 16);
        if constexpr (kWeightedSum) {
          const float weight = warp_scale[w] * inv_sum;
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            sum[i] = fmaf(x[i], weight, sum[i]);
            sum[4 + i] = fmaf(y[i], weight, sum[4 + i]);
          }
        } else {
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            sum[i] += x[i];
            sum[4 + i] += y[i];
          }
        }
      }
      if constexpr (!kWeightedSum) row_stats(row, max_all, sum_all, warp_scale);
      const float lse2 = sum_all == 0.f ? neg_inf : max_all + lg2_approx(sum_all);
      const int rh = Heads::row_in_head(p, r);
      const int hcol = Heads::column_in_head(col);
      if (p.splits == 1) {
        const QueryRow q = query_row(p, Heads::kv_head(p, head_kv, r), rh);
        u32 packed[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) packed[i] = cvt_rn_x2<T>(sum[2 * i], sum[2 * i + 1]);
        char* dst = static_cast<char*>(p.o) +
                    (batch * p.o_stride[0] + q.head * p.o_stride[1] + q.pos * p.o_stride[2] + hcol) * 2;
        st_global_v4_b32(dst, packed);
        if (p.lse != nullptr && hcol == 0) {
          p.lse[(i64(batch) * p.heads_kv * p.group + q.head) * p.seq_q + q.pos] = lse2 * kLn2;
        }
      } else if (kPushParts && p.cluster_merge) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        push_cluster_part<D, BM>(cluster_part, parts_bar, split, row, col, sum, lse2, hcol == 0);
#endif
      } else if (kClusterMerge && p.cluster_merge) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        leave_cluster_part<D, BM>(cluster_part, row, col, sum, lse2, hcol == 0);
#endif
      } else {
        // The parts in the layout of one KV head a CTA (the combine pass's).
        const i64 part_row =
            PAIRED ? ((i64(split) * p.batch + batch) * p.heads_kv + Heads::kv_head(p, head_kv, r)) * p.rows + rh
                   : part_row0 + r;
        float* dst = p.partial_o + part_row * kHeadD + hcol;
        st_global_v4_f32(dst, {sum[0], sum[1], sum[2], sum[3]});
        st_global_v4_f32(dst + 4, {sum[4], sum[5], sum[6], sum[7]});
        if (hcol == 0) p.partial_lse2[part_row] = lse2;
      }
    }
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (kPushParts) {
    if (p.cluster_merge) {
      merge_pushed_cluster_parts<D, BM, kThreads, T, PAIRED>(p, cluster_part, parts_bar, split, m0, batch,
                                                               head_kv);
    }
  } else if constexpr (kClusterMerge) {
    if (p.cluster_merge) merge_pulled_cluster_parts<D, BM, kThreads, T, PAIRED>(p, cluster_part, m0, batch, head_kv);
  }
#endif
}

}  // namespace cujit::decode
