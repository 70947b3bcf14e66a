// Parameters of the split-KV decode kernel and its combine pass: plain data
// shared by the host (which fills them) and device code. No includes beyond
// the fast divisor, so NVRTC and the host compiler both accept it.
#pragma once
#include "common/fast_divisor.h"

namespace cujit {

// Query rows are packed per KV head: the `group` query heads that share one
// K/V head and the seq_q new rows of a sequence form rows = group * seq_q
// "packed rows", row r being query position r / group of head
// head_kv * group + r % group. So each K/V byte is read once per KV head.
struct DecodeParams {
  const void* q;  // [B, Hq, Sq, D] through q_stride
  const void* k;  // contiguous: [B, Hkv, S_cap, D]; paged: [num_pages, Hkv, page_size, D]
  const void* v;
  void* o;                // [B, Hq, Sq, D]
  float* lse;             // [B, Hq, Sq] contiguous, natural log, or null
  long long q_stride[3];  // elements: batch, head, row
  long long k_stride[3];  // contiguous: batch, head, row; paged: page, head, row in the page
  long long v_stride[3];
  long long o_stride[3];
  const int* block_table;  // paged: row b at block_table + b * table_stride
  long long table_stride;
  const int* seq_lens;  // [B] key counts, or null (every sequence has seq_k)
  // An FP8 cache's descale factors: value = stored FP8 value x factor, the
  // (sequence b, KV head h)'s at [b * descale_stride[0] + h * descale_stride[1]].
  const float* k_descale;
  const float* v_descale;
  long long descale_stride[2];
  // With splits > 1 each CTA writes its part, normalized, here, and the
  // combine pass merges them: [splits, B, Hkv, rows, D] and [splits, B, Hkv, rows]
  // (log2 of the part's sum of exp2, max included).
  float* partial_o;
  float* partial_lse2;
  int batch;
  int heads_kv;
  int seq_q;
  int seq_k;  // the longest sequence (lengths are clamped to it)
  int group;
  int rows;      // group * seq_q
  int num_pages;  // pool size: page ids are clamped below it
  FastDivisor group_div;  // by group
  FastDivisor page_div;   // by page_size (paged only)
  int split_keys;  // keys per split, a multiple of the kernel's BN
  int splits;
  // sm_90: the launch's clusters are the splits of each row block, which
  // merge their parts through distributed shared memory (no partial_o, no
  // combine pass); 2 <= splits <= kMaxDecodeClusterSplits.
  int cluster_merge;
  float scale_log2;   // softmax scale * log2(e)
  int causal_offset;  // causal: key j visible to row i iff j <= i + causal_offset + (L - seq_k)
};

// The most splits of a row's keys (the combine pass holds their weights in
// registers, kMaxDecodeSplits / 32 per lane).
constexpr int kMaxDecodeSplits = 256;
// Splits merged within their cluster at most: on the H100, clusters of 2 beat
// the combine pass on every shape measured, while clusters of 4 and 8 were
// slower than it on some (docs/perf-log.md, "decode v4").
constexpr int kMaxDecodeClusterSplits = 2;

// Threads per CTA of the combine pass, one CTA per packed row.
constexpr int kDecodeCombineThreads = 128;

struct DecodeCombineParams {
  const float* partial_o;
  const float* partial_lse2;
  void* o;
  float* lse;
  long long o_stride[3];
  int batch;
  int heads_kv;
  int seq_q;
  int group;
  int rows;
  int splits;
  FastDivisor group_div;
  FastDivisor rows_div;
  FastDivisor heads_kv_div;
};

// CUJIT_CHECK=1's check of a cache's device-side contents (check_kv.cu).
struct CheckKvParams {
  const int* seq_lens;     // [batch] or null
  const int* block_table;  // paged: [batch, table_stride], or null
  long long table_stride;
  int batch;
  int pages_per_seq;  // table entries a sequence may use
  int page_size;
  int max_seq_k;
  int num_pages;
  // Out: the smallest bad index, batch * (pages_per_seq + 1) + slot, where
  // slot pages_per_seq stands for the sequence's length. Starts at INT_MAX.
  int* first_bad;
};

}  // namespace cujit
