// CUJIT_CHECK=1: the KV cache's device-side contents that the host cannot see
// cheaply, checked before a run. One thread per (sequence, page slot); the
// first bad entry in (sequence, slot) order wins through an atomic min, so
// the report does not depend on scheduling.
#include "attention/decode/decode_params.h"

namespace cujit::decode {

__global__ void check_kv(const __grid_constant__ CheckKvParams p) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long per_sequence = (long long)p.pages_per_seq + 1;
  if (i >= per_sequence * p.batch) return;
  const int b = int(i / per_sequence);
  const int slot = int(i - b * per_sequence);
  const int len = p.seq_lens != nullptr ? p.seq_lens[b] : p.max_seq_k;
  bool bad;
  if (slot == p.pages_per_seq) {
    bad = len < 0 || len > p.max_seq_k;
  } else {
    // Only the pages the sequence's keys fall in are read.
    const int used = len <= 0 ? 0 : (min(len, p.max_seq_k) + p.page_size - 1) / p.page_size;
    if (p.block_table == nullptr || slot >= used) return;
    const int page = p.block_table[b * p.table_stride + slot];
    bad = page < 0 || page >= p.num_pages;
  }
  if (bad) atomicMin(p.first_bad, int(i));
}

}  // namespace cujit::decode
