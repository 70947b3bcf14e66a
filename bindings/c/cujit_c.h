/* cujit's C interface: jit::attention behind a stable ABI, for callers that
 * are not C++ (the Python binding in bindings/python loads it with ctypes).
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

/* Bumped when a struct below changes layout; callers check it. */
#define CUJIT_C_ABI_VERSION 1
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

typedef enum { CUJIT_F16 = 0, CUJIT_BF16 = 1 } cujit_dtype;

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
} cujit_options;

/* out = softmax(scale * q k^T [+ mask]) v. Asynchronous on options->stream
 * (the first call for a new shape class compiles and tunes first). */
CUJIT_C_API cujit_status cujit_attention(const cujit_tensor* q, const cujit_tensor* k, const cujit_tensor* v,
                                         const cujit_tensor* out, const cujit_options* options);

/* The variant cujit_attention would launch for these arguments (tuning it if
 * needed), as "family/variant", into buffer (truncated to size - 1). */
CUJIT_C_API cujit_status cujit_plan(const cujit_tensor* q, const cujit_tensor* k, const cujit_tensor* v,
                                    const cujit_tensor* out, const cujit_options* options, char* buffer, size_t size);

/* The message of this thread's last failed call ("" after a success). */
CUJIT_C_API const char* cujit_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* CUJIT_C_H */
