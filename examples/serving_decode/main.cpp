// serving_decode: a two-layer decode loop over a paged KV cache, as a serving
// engine runs it (docs/serving.md walks through it). Each step appends every
// sequence's new token's K and V to its cache page (the caller's job: here a
// cudaMemcpyAsync into the page slot), updates the lengths, plans once for
// the step and runs the plan for every layer. Without a GPU it says so and
// exits 77 (skipped, for ctest).
#include <cuda_runtime.h>
#include <jit/cujit.h>
#include <jit/serving.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

constexpr std::int64_t kLayers = 2, kBatch = 4, kHeadsQ = 32, kHeadsKv = 8, kHeadDim = 128;
constexpr std::int64_t kPageSize = 16, kPagesPerSeq = 64;  // room for 1024 keys per sequence
constexpr std::int64_t kNumPages = kBatch * kPagesPerSeq;  // the pool, shared by all sequences
constexpr std::int64_t kSteps = 8;
constexpr jit::DType kDtype = jit::DType::f16;
constexpr std::size_t kTokenBytes = kHeadsKv * kHeadDim * 2;  // one token's K (or V) in one layer

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

// One layer's cache: K and V page pools [num_pages, page_size, Hkv, D]
// (vLLM's layout), filled with random values as if a prompt had been
// prefilled, and the layer's inputs for one step: q [B, 1, Hq, D] and the
// new token's K and V [B, 1, Hkv, D], as the layer's projections write them.
struct Layer {
  jit::DeviceTensor k_pool, v_pool, q, k_new, v_new;
  explicit Layer(std::uint64_t seed)
      : k_pool(jit::random_tensor(kDtype, kNumPages, kPageSize, kHeadsKv, kHeadDim, seed)),
        v_pool(jit::random_tensor(kDtype, kNumPages, kPageSize, kHeadsKv, kHeadDim, seed + 1)),
        q(jit::random_tensor(kDtype, kBatch, 1, kHeadsQ, kHeadDim, seed + 2)),
        k_new(jit::random_tensor(kDtype, kBatch, 1, kHeadsKv, kHeadDim, seed + 3)),
        v_new(jit::random_tensor(kDtype, kBatch, 1, kHeadsKv, kHeadDim, seed + 4)) {}
};

// Where token `pos` of sequence `b` lives in a pool: page table[b][pos / page_size], slot pos % page_size.
char* token_slot(const jit::DeviceTensor& pool, const std::vector<std::int32_t>& table, std::int64_t b,
                 std::int64_t pos) {
  const std::int64_t page = table[std::size_t(b * kPagesPerSeq + pos / kPageSize)];
  return static_cast<char*>(pool.buffer.data()) + (page * kPageSize + pos % kPageSize) * std::int64_t(kTokenBytes);
}

}  // namespace

int main() try {
  if (!jit::gpu_present()) {
    std::printf("serving_decode: Skipped\nno GPU: nothing to run\n");  // the form scripts/ctest_summary.py reads
    return 77;
  }
  cudaStream_t stream = nullptr;
  check(cudaStreamCreate(&stream), "cudaStreamCreate");

  // The block table: each sequence's pages, handed out from the pool in a
  // shuffled order (a sequence's pages need not be adjacent or in order).
  std::vector<std::int32_t> table(static_cast<std::size_t>(kNumPages));
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), std::mt19937(1));
  std::vector<std::int32_t> lengths = {100, 37, 500, 1};  // keys already cached per sequence
  jit::DeviceBuffer table_mem(table.size() * sizeof(std::int32_t)), lengths_mem(lengths.size() * sizeof(std::int32_t));
  table_mem.upload(table.data(), table_mem.size());

  std::vector<Layer> layers;
  for (std::int64_t l = 0; l < kLayers; ++l) layers.emplace_back(std::uint64_t(10 * l + 1));
  jit::DeviceBuffer out_mem(std::size_t(kBatch * kHeadsQ * kHeadDim * 2));
  const jit::TensorView out = jit::TensorView::bshd(out_mem.data(), kDtype, kBatch, 1, kHeadsQ, kHeadDim);

  jit::KvAttentionShape shape;
  shape.batch = kBatch;
  shape.heads_q = kHeadsQ;
  shape.heads_kv = kHeadsKv;
  shape.head_dim = kHeadDim;
  shape.dtype = kDtype;
  shape.seq_q = 1;
  shape.page_size = kPageSize;
  shape.per_sequence_lengths = true;

  for (std::int64_t step = 0; step < kSteps; ++step) {
    // 1. Append: the new token is key number lengths[b] of sequence b, in every layer.
    for (const Layer& layer : layers) {
      for (std::int64_t b = 0; b < kBatch; ++b) {
        const char* k_src = static_cast<const char*>(layer.k_new.buffer.data()) + b * std::int64_t(kTokenBytes);
        const char* v_src = static_cast<const char*>(layer.v_new.buffer.data()) + b * std::int64_t(kTokenBytes);
        check(cudaMemcpyAsync(token_slot(layer.k_pool, table, b, lengths[std::size_t(b)]), k_src, kTokenBytes,
                              cudaMemcpyDeviceToDevice, stream), "append K");
        check(cudaMemcpyAsync(token_slot(layer.v_pool, table, b, lengths[std::size_t(b)]), v_src, kTokenBytes,
                              cudaMemcpyDeviceToDevice, stream), "append V");
      }
    }
    for (std::int32_t& length : lengths) ++length;  // the lengths count the new token
    check(cudaMemcpyAsync(lengths_mem.data(), lengths.data(), lengths_mem.size(), cudaMemcpyHostToDevice, stream),
          "upload lengths");

    // 2. Plan once for this step's batch: the longest sequence bounds the keys.
    shape.max_seq_k = *std::max_element(lengths.begin(), lengths.end());
    const jit::KvAttentionPlan plan = jit::plan_kv_attention(shape, {}, stream);

    // 3. Run it for every layer: no allocation, no synchronization, no tuning.
    for (const Layer& layer : layers) {
      jit::KvCache cache;
      cache.k = jit::TensorView::bshd(layer.k_pool.buffer.data(), kDtype, kNumPages, kPageSize, kHeadsKv, kHeadDim);
      cache.v = jit::TensorView::bshd(layer.v_pool.buffer.data(), kDtype, kNumPages, kPageSize, kHeadsKv, kHeadDim);
      cache.block_table = static_cast<const std::int32_t*>(table_mem.data());
      cache.pages_per_seq = kPagesPerSeq;
      cache.seq_lens = static_cast<const std::int32_t*>(lengths_mem.data());
      const jit::TensorView q = jit::TensorView::bshd(layer.q.buffer.data(), kDtype, kBatch, 1, kHeadsQ, kHeadDim);
      plan.run(q, cache, out, {stream});
      // ... the layer's output projection and MLP would follow here, on the same stream.
    }
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");  // the plan's workspace is freed next
    if (step == 0 || step == kSteps - 1) {
      std::printf("serving_decode: step %lld, max_seq_k %lld: %s, %d split(s), workspace %zu bytes\n",
                  static_cast<long long>(step), static_cast<long long>(shape.max_seq_k), plan.variant().c_str(),
                  plan.num_splits(), plan.workspace_bytes());
    }
  }

  std::vector<std::uint16_t> host(out_mem.size() / 2);
  out_mem.download(host.data(), out_mem.size());
  for (std::uint16_t bits : host) {
    if (!std::isfinite(jit::bits_to_float(bits, kDtype))) throw std::runtime_error("non-finite output");
  }
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  std::printf("serving_decode: %lld steps of %lld layers over a paged cache: ok\n", static_cast<long long>(kSteps),
              static_cast<long long>(kLayers));
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "serving_decode: %s\n", e.what());
  return 1;
}
