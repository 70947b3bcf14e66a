/* cujit's C interface: jit::attention, ragged batches (jit/varlen.h) and the
 * serving API (jit/serving.h) behind a stable ABI, for callers that are not C++ (the Python binding in
 * bindings/python loads it with ctypes).
 * No C++ exception crosses it: every call returns a status, and the failed
 * call's message stays readable from the same thread until its next call. */
#ifndef CUJIT_C_H
#define CUJIT_C_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define CUJIT_C_API __attribute__((visibility("default")))
#else
#define CUJIT_C_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped when a struct below changes layout or a function is added; callers check it. */
#define CUJIT_C_ABI_VERSION 6
CUJIT_C_API int cujit_c_abi_version(void);

/* 0 on success, else jit::ErrorCode + 1. */
typedef enum {
  CUJIT_OK = 0,
  CUJIT_INVALID_ARGUMENT = 1,
  CUJIT_UNSUPPORTED = 2,
  CUJIT_NO_DEVICE = 3,
  CUJIT_DRIVER = 4,
  CUJIT_COMPILE = 5,
  CUJIT_CACHE = 6,
  CUJIT_INTERNAL = 7
} cujit_status;

/* CUJIT_E4M3: FP8 (torch.float8_e4m3fn): q, k and v of cujit_attention and
 * cujit_plan (with descale factors, sm_89 or newer, head dim 64 or 128), or
 * a KV cache. CUJIT_E5M2: FP8 (torch.float8_e5m2), a KV cache only (any
 * architecture the cache's decode runs on). */
typedef enum { CUJIT_F16 = 0, CUJIT_BF16 = 1, CUJIT_E4M3 = 2, CUJIT_E5M2 = 3 } cujit_dtype;

/* A [B, H, S, D] view of device memory; strides in elements, any order, with
 * a contiguous last dimension. */
typedef struct {
  void* data;
  int32_t dtype; /* cujit_dtype */
  int64_t shape[4];
  int64_t strides[4];
} cujit_tensor;

typedef struct {
  int32_t causal;       /* nonzero: causal mask */
  int32_t bottom_right; /* nonzero: the diagonal ends at the last key (FlashAttention); else top-left (PyTorch) */
  float scale;          /* softmax scale; 0 means 1/sqrt(D) */
  void* stream;         /* a CUstream / cudaStream_t; NULL is the default stream */
  float* lse;           /* NULL, or float32 [B, Hq, Sq] on the device for the log-sum-exp */
  /* FP8 inputs (q, k and v CUJIT_E4M3, out CUJIT_F16 or CUJIT_BF16): float32
   * descale factors on the device, as FlashAttention-3's, value = stored x
   * factor; batch b's and KV head h's at [b * descale_strides[0] + h *
   * descale_strides[1]] (a query head uses its KV head's; for a ragged batch,
   * cujit_attention_varlen, b is the sequence). NULL for 16-bit inputs. */
  const float* q_descale;
  const float* k_descale;
  const float* v_descale;
  int64_t descale_strides[2]; /* read only when has_descale_strides; else a contiguous [B, Hkv]; {0, 0}: one factor
                                 per tensor, {0, 1}: one per KV head */
  int32_t has_descale_strides;
} cujit_options;

/* out = softmax(scale * q k^T [+ mask]) v. q, k, v and out all CUJIT_F16 or
 * all CUJIT_BF16; or q, k and v CUJIT_E4M3 with out CUJIT_F16 or CUJIT_BF16
 * and options->q_descale, k_descale and v_descale set. Asynchronous on
 * options->stream (the first call for a new shape class compiles and tunes
 * first). */
CUJIT_C_API cujit_status cujit_attention(const cujit_tensor* q, const cujit_tensor* k, const cujit_tensor* v,
                                         const cujit_tensor* out, const cujit_options* options);

/* The variant cujit_attention would launch for these arguments (tuning it if
 * needed), as "family/variant", into buffer (truncated to size - 1). */
CUJIT_C_API cujit_status cujit_plan(const cujit_tensor* q, const cujit_tensor* k, const cujit_tensor* v,
                                    const cujit_tensor* out, const cujit_options* options, char* buffer, size_t size);

/* The message of this thread's last failed call ("" after a success). */
CUJIT_C_API const char* cujit_last_error(void);

/* Attention over a ragged batch (jit/varlen.h; docs/serving.md, "Ragged
 * batches"), in FlashAttention's varlen layout: the sequences' rows packed
 * one after another. */

/* Sequence b has query rows [cu_seqlens_q[b], cu_seqlens_q[b + 1]) and keys
 * [cu_seqlens_k[b], cu_seqlens_k[b + 1]); a sequence may have none. */
typedef struct {
  const int32_t* cu_seqlens_q; /* int32 [batch + 1] on the device, non-decreasing from 0; NULL only for batch 0 */
  const int32_t* cu_seqlens_k; /* likewise for the keys */
  int64_t batch;               /* sequences */
  int64_t max_seqlen_q;        /* the longest sequence's query rows (the host's copy; not read back) */
  int64_t max_seqlen_k;        /* the longest sequence's keys */
} cujit_varlen_batch;

/* out = softmax(scale * q k^T [+ mask]) v for each sequence of `batch`. q and
 * out [1, Hq, total_q, D], k and v [1, Hkv, total_k, D]: packed
 * [total, H, D] storage is shape {1, H, total, D} with strides
 * {total * H * D, D, H * D, 1}. options as for cujit_attention, with the
 * causal diagonal of each sequence (bottom_right: its last query row sees its
 * last key); options->lse, when set, is float32 contiguous [Hq, total_q].
 * Rows outside every sequence are not written. Asynchronous on
 * options->stream. */
CUJIT_C_API cujit_status cujit_attention_varlen(const cujit_tensor* q, const cujit_tensor* k, const cujit_tensor* v,
                                                const cujit_tensor* out, const cujit_varlen_batch* batch,
                                                const cujit_options* options);

/* A ragged batch's plan (jit::VarlenAttentionPlan; docs/serving.md, "A plan
 * per step"): the tile list made once per step by cujit_varlen_plan_prepare,
 * the attention kernel alone in each cujit_varlen_plan_run (one per layer).
 * Neither allocates, synchronizes or tunes, so both can be captured in a
 * CUDA graph. */
typedef struct cujit_varlen_plan cujit_varlen_plan;

/* Arguments as cujit_attention_varlen's: validates, tunes (on the first call
 * per shape class, on options->stream, with these inputs; out is not
 * written), loads the kernels and allocates the tile list's memory.
 * options->causal, bottom_right and scale hold for the plan. *plan is NULL on
 * failure. */
CUJIT_C_API cujit_status cujit_varlen_plan_create(const cujit_tensor* q, const cujit_tensor* k, const cujit_tensor* v,
                                                  const cujit_tensor* out, const cujit_varlen_batch* batch,
                                                  const cujit_options* options, cujit_varlen_plan** plan);
/* Lists the tiles of `batch` (the plan's counts; its pointers may differ) on
 * `stream`, for the runs after it in stream order. */
CUJIT_C_API cujit_status cujit_varlen_plan_prepare(const cujit_varlen_plan* plan, const cujit_varlen_batch* batch,
                                                   void* stream);
/* One layer over the list of the last prepare before it: q, k, v and out of
 * the plan's shapes and types (any data and strides). options (NULL: the
 * defaults) gives the stream, lse and descale factors; its causal,
 * bottom_right and scale must be the plan's. */
CUJIT_C_API cujit_status cujit_varlen_plan_run(const cujit_varlen_plan* plan, const cujit_tensor* q,
                                               const cujit_tensor* k, const cujit_tensor* v, const cujit_tensor* out,
                                               const cujit_options* options);
/* The same two with the tile list in `workspace` (device memory of at least
 * cujit_varlen_plan_workspace_bytes, 16-byte aligned; NULL: the plan's own):
 * a run names the workspace its prepare listed into. One plan can so keep a
 * list per stream, in memory from the caller's allocator. */
CUJIT_C_API cujit_status cujit_varlen_plan_prepare_in(const cujit_varlen_plan* plan, const cujit_varlen_batch* batch,
                                                      void* stream, void* workspace);
CUJIT_C_API cujit_status cujit_varlen_plan_run_in(const cujit_varlen_plan* plan, const cujit_tensor* q,
                                                  const cujit_tensor* k, const cujit_tensor* v,
                                                  const cujit_tensor* out, const cujit_options* options,
                                                  void* workspace);
/* Device memory the plan holds for its tile list (and a workspace needs). */
CUJIT_C_API cujit_status cujit_varlen_plan_workspace_bytes(const cujit_varlen_plan* plan, size_t* bytes);
/* "family/variant" of the attention kernel each run launches into buffer
 * (truncated to size - 1); "" for a batch with nothing to compute. */
CUJIT_C_API cujit_status cujit_varlen_plan_describe(const cujit_varlen_plan* plan, char* buffer, size_t size);
/* Frees the plan and its tile list; NULL is a no-op. */
CUJIT_C_API void cujit_varlen_plan_destroy(cujit_varlen_plan* plan);

/* Attention over a KV cache (jit/serving.h; docs/serving.md). */

/* The keys and values a batch attends to, read in place. Contiguous
 * (block_table NULL): k and v are [B, Hkv, S_cap, D] views. Paged: k and v
 * are page pools viewed as [num_pages, Hkv, page_size, D] (vLLM's
 * [num_pages, page_size, Hkv, D] storage is that view with permuted strides),
 * and row b of block_table lists sequence b's page ids in order. */
typedef struct {
  cujit_tensor k;
  cujit_tensor v;
  const int32_t* block_table; /* int32 [B, block_table_stride] on the device, or NULL (contiguous) */
  int64_t pages_per_seq;      /* table entries per row that may be read */
  int64_t block_table_stride; /* elements between table rows; 0 means pages_per_seq */
  const int32_t* seq_lens;    /* int32 [B] on the device: keys per sequence, new rows included; NULL: all max_seq_k */
  /* FP8 caches (k and v CUJIT_E4M3 or CUJIT_E5M2): float32 descale factors on the device,
   * value = stored x factor, sequence b's and KV head h's at
   * [b * descale_strides[0] + h * descale_strides[1]]; NULL for 16-bit caches. */
  const float* k_descale;
  const float* v_descale;
  int64_t descale_strides[2]; /* read only when has_descale_strides; else a contiguous [B, Hkv] */
  int32_t has_descale_strides;
  int32_t descale_per_page; /* nonzero (a paged FP8 cache): the factors are per page instead, the page at pool
                               index p's at [p * descale_strides[0] + h * descale_strides[1]] (default strides: a
                               contiguous [num_pages, Hkv]); as the plan's shape says */
} cujit_kv_cache;

/* What a plan is made for (jit::KvAttentionShape). */
typedef struct {
  int64_t batch;
  int64_t heads_q;
  int64_t heads_kv;
  int64_t head_dim;
  int32_t dtype;                /* cujit_dtype */
  int64_t seq_q;                /* new query rows per sequence: 1 for decode */
  int64_t max_seq_k;            /* the longest sequence's key count */
  int64_t page_size;            /* 0: contiguous cache; else keys per page, 1 to 256 */
  int32_t per_sequence_lengths; /* nonzero: the cache gives seq_lens */
  int32_t kv_dtype;             /* CUJIT_E4M3, CUJIT_E5M2: an FP8 cache; 0 or dtype: the cache is in dtype */
  int32_t head_major;           /* nonzero: the runs' caches are head-major ([B, Hkv, S, D], [pages, Hkv, page_size,
                                   D]); 0: token-major (vLLM's, FlashAttention's). A hint for speed only
                                   (jit::KvAttentionShape::token_major): either layout runs under either value */
  int32_t descale_per_page;     /* nonzero: a paged FP8 cache's descale factors are per (page, KV head)
                                   (cujit_kv_cache.descale_per_page) */
} cujit_kv_shape;

/* NULL options mean causal, scale 1/sqrt(D), splits chosen by the plan. A
 * zero-filled struct is NOT the same: causal = 0 is the non-causal mask. */
typedef struct {
  int32_t causal;     /* nonzero: row i of a sequence with L keys sees keys j <= i + L - Sq (bottom-right) */
  float scale;        /* softmax scale; 0 means 1/sqrt(D) */
  int32_t num_splits; /* 0: the plan chooses; 1 to 256 (1: no split; docs/serving.md on batch invariance) */
} cujit_kv_options;

/* Per-run arguments; NULL means all fields NULL. */
typedef struct {
  void* stream;    /* a CUstream / cudaStream_t; NULL is the default stream */
  float* lse;      /* NULL, or float32 contiguous [B, Hq, Sq] on the device */
  void* workspace; /* NULL (the plan's own), or cujit_kv_plan_workspace_bytes of device memory, 16-byte aligned */
} cujit_kv_run_options;

/* q and out [B, Hq, Sq, D]. Plans on the first call for a shape and keeps
 * the plan; asynchronous on run->stream. */
CUJIT_C_API cujit_status cujit_attention_with_kvcache(const cujit_tensor* q, const cujit_kv_cache* cache,
                                                      const cujit_tensor* out, const cujit_kv_options* options,
                                                      const cujit_kv_run_options* run);

/* A plan made once per batch composition and run for every layer: run never
 * allocates, synchronizes or tunes, so it can be captured in a CUDA graph. */
typedef struct cujit_kv_plan cujit_kv_plan;

/* Tunes (on the first call per shape class, on `stream`), compiles and loads
 * the kernels and allocates the plan's workspace. *plan is NULL on failure. */
CUJIT_C_API cujit_status cujit_kv_plan_create(const cujit_kv_shape* shape, const cujit_kv_options* options,
                                              void* stream, cujit_kv_plan** plan);
/* q and out [B, Hq, Sq, D] of the plan's shape, the cache as the plan was
 * made for (paged or not, lengths or not): checked, then enqueued on
 * run->stream. */
CUJIT_C_API cujit_status cujit_kv_plan_run(const cujit_kv_plan* plan, const cujit_tensor* q,
                                           const cujit_kv_cache* cache, const cujit_tensor* out,
                                           const cujit_kv_run_options* run);
/* Device memory a run needs (0 when nothing is split, or when the splits merge within their cluster: two on sm_90). */
CUJIT_C_API cujit_status cujit_kv_plan_workspace_bytes(const cujit_kv_plan* plan, size_t* bytes);
CUJIT_C_API cujit_status cujit_kv_plan_num_splits(const cujit_kv_plan* plan, int* splits);
/* "family/variant" into buffer (truncated to size - 1). */
CUJIT_C_API cujit_status cujit_kv_plan_describe(const cujit_kv_plan* plan, char* buffer, size_t size);
/* Frees the plan and its workspace; NULL is a no-op. */
CUJIT_C_API void cujit_kv_plan_destroy(cujit_kv_plan* plan);

#ifdef __cplusplus
}
#endif

#endif /* CUJIT_C_H */
