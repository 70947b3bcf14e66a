// Decode inputs and caches on the device (kv_cache_buffers.h).
#include "tools/kv_cache_buffers.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "tools/cuda_runtime_check.h"
#include "tools/shuffled_block_table.h"

namespace serving_bench {
namespace {

// The random pattern made on the host and repeated over a buffer: the
// values only need to be finite and varied; more would only slow the run.
constexpr std::size_t kPatternBytes = std::size_t(8) << 20;

jit::DeviceBuffer random_buffer(std::size_t bytes, jit::DType dtype, std::uint64_t seed) {
  jit::DeviceBuffer buffer(bytes);
  fill_random(buffer, dtype, seed);
  return buffer;
}

// `count` float32 factors of 1 (timing does not depend on their values).
jit::DeviceBuffer unit_factors(std::int64_t count) {
  const std::vector<float> ones(static_cast<std::size_t>(count), 1.f);
  jit::DeviceBuffer buffer(ones.size() * sizeof(float));
  buffer.upload(ones.data(), buffer.size());
  return buffer;
}

jit::DeviceBuffer upload_ints(const std::vector<std::int32_t>& values) {
  jit::DeviceBuffer buffer(values.size() * sizeof(std::int32_t));
  buffer.upload(values.data(), buffer.size());
  return buffer;
}

void set_descales(jit::KvCache& cache, const DecodeInputs& inputs) {
  if (inputs.descale.size() == 0) return;
  cache.k_descale = cache.v_descale = static_cast<const float*>(inputs.descale.data());
}

}  // namespace

void fill_random(jit::DeviceBuffer& buffer, jit::DType dtype, std::uint64_t seed) {
  const std::size_t bytes = buffer.size();
  const std::size_t element = jit::element_size(dtype);
  const std::size_t pattern_bytes = std::min(bytes, kPatternBytes) / element * element;
  std::vector<std::uint8_t> pattern(pattern_bytes);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (std::size_t i = 0; i < pattern_bytes; i += element) {
    const std::uint16_t bits = jit::float_to_bits(uniform(rng), dtype);
    std::memcpy(pattern.data() + i, &bits, element);  // little-endian: the low byte first
  }
  buffer.upload(pattern.data(), pattern_bytes);
  // Double the filled prefix until the buffer is full.
  auto* base = static_cast<char*>(buffer.data());
  for (std::size_t filled = pattern_bytes; filled < bytes;) {
    const std::size_t n = std::min(filled, bytes - filled);
    SERVING_CUDA_CHECK(cudaMemcpy(base + filled, base, n, cudaMemcpyDeviceToDevice));
    filled += n;
  }
}

DecodeInputs decode_inputs(const DecodeShape& s) {
  DecodeInputs in;
  const std::size_t q_bytes = std::size_t(s.batch * s.heads_q * s.head_dim) * jit::element_size(s.dtype);
  in.q_buffer = random_buffer(q_bytes, s.dtype, 1);
  in.out_buffer = jit::DeviceBuffer(q_bytes);
  in.q = jit::TensorView::bhsd(in.q_buffer.data(), s.dtype, s.batch, s.heads_q, 1, s.head_dim);
  in.out = jit::TensorView::bhsd(in.out_buffer.data(), s.dtype, s.batch, s.heads_q, 1, s.head_dim);
  in.seq_lens = upload_ints(std::vector<std::int32_t>(std::size_t(s.batch), std::int32_t(s.seq_k)));
  if (s.fp8_kv) in.descale = unit_factors(s.batch * s.heads_kv);
  return in;
}

namespace {

// [outer, rows, Hkv, D] storage (head-major: [outer, Hkv, rows, D]), viewed
// as [outer, Hkv, rows, D].
jit::TensorView cache_view(jit::DeviceBuffer& buffer, const DecodeShape& s, std::int64_t outer, std::int64_t rows,
                           const CacheLayout& layout) {
  return layout.head_major ? jit::TensorView::bhsd(buffer.data(), kv_dtype(s), outer, s.heads_kv, rows, s.head_dim)
                           : jit::TensorView::bshd(buffer.data(), kv_dtype(s), outer, rows, s.heads_kv, s.head_dim);
}

}  // namespace

ContiguousCache contiguous_cache(const DecodeShape& s, const DecodeInputs& inputs, const CacheLayout& layout) {
  ContiguousCache c;
  const std::size_t bytes = std::size_t(kv_bytes(s) / 2);
  c.k = random_buffer(bytes, kv_dtype(s), 2);
  c.v = random_buffer(bytes, kv_dtype(s), 3);
  c.cache.k = cache_view(c.k, s, s.batch, s.seq_k, layout);
  c.cache.v = cache_view(c.v, s, s.batch, s.seq_k, layout);
  c.cache.seq_lens = static_cast<const std::int32_t*>(inputs.seq_lens.data());
  set_descales(c.cache, inputs);
  return c;
}

PagedCache paged_cache(const DecodeShape& s, std::int64_t page_size, const DecodeInputs& inputs,
                       const CacheLayout& layout) {
  PagedCache p;
  const std::int64_t pages_per_seq = (s.seq_k + page_size - 1) / page_size;
  const std::int64_t num_pages = s.batch * pages_per_seq;
  const std::size_t bytes =
      std::size_t(num_pages * page_size * s.heads_kv * s.head_dim) * jit::element_size(kv_dtype(s));
  p.k = random_buffer(bytes, kv_dtype(s), 4);
  p.v = random_buffer(bytes, kv_dtype(s), 5);
  std::vector<std::int32_t> table = shuffled_block_table(s.batch, pages_per_seq, 6);
  if (layout.order == PageOrder::in_order) std::sort(table.begin(), table.end());
  p.block_table = upload_ints(table);
  p.cache.k = cache_view(p.k, s, num_pages, page_size, layout);
  p.cache.v = cache_view(p.v, s, num_pages, page_size, layout);
  if (s.fp8_kv && layout.descale_per_page) {
    p.page_descale = unit_factors(num_pages * s.heads_kv);
    p.cache.k_descale = p.cache.v_descale = static_cast<const float*>(p.page_descale.data());
    p.cache.descale_per_page = true;
  } else {
    set_descales(p.cache, inputs);
  }
  p.cache.block_table = static_cast<const std::int32_t*>(p.block_table.data());
  p.cache.pages_per_seq = pages_per_seq;
  p.cache.seq_lens = static_cast<const std::int32_t*>(inputs.seq_lens.data());
  return p;
}

jit::KvAttentionShape kv_attention_shape(const DecodeShape& s, std::int64_t page_size, const CacheLayout& layout) {
  jit::KvAttentionShape shape;
  shape.batch = s.batch;
  shape.heads_q = s.heads_q;
  shape.heads_kv = s.heads_kv;
  shape.head_dim = s.head_dim;
  shape.dtype = s.dtype;
  if (s.fp8_kv) shape.kv_dtype = *s.fp8_kv;
  shape.seq_q = 1;
  shape.max_seq_k = s.seq_k;
  shape.page_size = page_size;
  shape.per_sequence_lengths = true;
  shape.token_major = !layout.head_major;
  shape.descale_per_page = s.fp8_kv && page_size > 0 && layout.descale_per_page;
  return shape;
}

}  // namespace serving_bench
