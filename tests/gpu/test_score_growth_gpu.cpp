// Scores whose row maximum grows from one key block to the next, so the
// online softmax moves its exp2 offsets and rescales O and the row sums block
// after block. Random normal inputs settle a row's maximum within its first
// block and barely reach that code: here the keys' magnitude ramps along the
// sequence, up in one KV head and down in the other, so in either processing
// order some blocks raise the maximum a little, some a lot, and some not at
// all. O and the LSE against the float64 reference, for every config of every
// family, as the tuner would time them.
#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "attention_check.h"
#include "family_configs.h"
#include "gpu_test_support.h"
#include "jit/attention/attention_problem.h"

namespace cujit_test {
namespace {

using jit::DType;

class ScoreGrowth : public ::testing::TestWithParam<Specialization> {};

TEST_P(ScoreGrowth, EveryConfigMatchesTheReferenceWhenRowMaximaGrowAcrossKeyBlocks) {
  CUJIT_REQUIRE_GPU();
  const auto [head_dim, dtype, causal] = GetParam();
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  const Dims4 q_dims{1, 4, 160, head_dim};
  const Dims4 kv_dims{1, 2, 1500, head_dim};
  const std::vector<float> q = rng.normal_vector(std::size_t(count(q_dims)), dtype);
  std::vector<float> k = rng.normal_vector(std::size_t(count(kv_dims)), dtype);
  const std::vector<float> v = rng.normal_vector(std::size_t(count(kv_dims)), dtype);
  // Key j of head 0 is scaled by 0.25 + 16 j / Sk, head 1 the other way
  // round: a block's largest score grows by 2-7 (log2 units) per block of
  // 64-176 keys, up to ~58 over the sequence.
  const std::int64_t seq_k = kv_dims[2];
  for (std::int64_t h = 0; h < kv_dims[1]; ++h)
    for (std::int64_t j = 0; j < seq_k; ++j) {
      const double ramp = double(h == 0 ? j : seq_k - 1 - j) / double(seq_k);
      for (std::int64_t d = 0; d < head_dim; ++d) {
        float& x = k[logical_index(kv_dims, 0, h, j, d)];
        x = round_to(dtype, float(x * (0.25 + 16.0 * ramp)));
      }
    }
  TestTensor dq = make_tensor(Layout::bhsd, dtype, q_dims, &q);
  TestTensor dk = make_tensor(Layout::bhsd, dtype, kv_dims, &k);
  TestTensor dv = make_tensor(Layout::bhsd, dtype, kv_dims, &v);
  TestTensor out = make_tensor(Layout::bhsd, dtype, q_dims);
  jit::DeviceBuffer lse(std::size_t(count(q_dims) / head_dim) * sizeof(float));

  jit::AttentionOptions options;
  options.causal = causal;
  options.align = jit::CausalAlign::BottomRight;
  const jit::detail::AttnProblem problem = jit::detail::validate_attention(dq.view, dk.view, dv.view, out.view, options);
  const ReferenceProblem reference{q_dims[0], q_dims[1],  kv_dims[1],          q_dims[2], kv_dims[2],
                                   head_dim,  causal,     seq_k - q_dims[2], double(problem.scale)};
  const ReferenceResult expected = reference_attention(reference, q, k, v);

  const int configs = expect_every_config_matches(problem, dq, dk, dv, out, lse, reference, expected);
  // D = 256 has only the sm90 family.
  if (configs == 0) GTEST_SKIP() << "no family serves head dim " << head_dim << " on " << jit::current_target().arch;
}

INSTANTIATE_TEST_SUITE_P(Specializations, ScoreGrowth, every_specialization(), specialization_name);

}  // namespace
}  // namespace cujit_test
