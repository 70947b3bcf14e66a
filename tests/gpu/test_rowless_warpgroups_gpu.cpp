// Query lengths that leave whole consumer warpgroups of a tile without a row
// in the problem: 40 rows (one tile; every warpgroup but the first is
// rowless at BM = 128 and 192) and 260 (the last tile's second warpgroup at
// BM = 128, its third at BM = 192, and a partly filled one before it). Those
// warpgroups run on Q rows the TMA zero-filled, and the store must clip all
// they produce; the others' rows must come out right. The default configs
// meet such lengths in the attention tests; this runs every config of every
// family, as the tuner would time them. O and the LSE against the float64
// reference, causal with both alignments.
#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "attention_check.h"
#include "family_configs.h"
#include "gpu_test_support.h"
#include "jit/attention_problem.h"

namespace cujit_test {
namespace {

class RowlessWarpgroups : public ::testing::TestWithParam<Specialization> {};

TEST_P(RowlessWarpgroups, EveryConfigMatchesTheReferenceWhenTheLastTileHasRowlessWarpgroups) {
  CUJIT_REQUIRE_GPU();
  const auto [head_dim, dtype, causal] = GetParam();
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  int configs = 0;
  for (const std::int64_t seq_q : {40, 260}) {
    const Dims4 q_dims{1, 4, seq_q, head_dim};
    const Dims4 kv_dims{1, 2, 777, head_dim};
    const std::vector<float> q = rng.normal_vector(std::size_t(count(q_dims)), dtype);
    const std::vector<float> k = rng.normal_vector(std::size_t(count(kv_dims)), dtype);
    const std::vector<float> v = rng.normal_vector(std::size_t(count(kv_dims)), dtype);
    TestTensor dq = make_tensor(Layout::bhsd, dtype, q_dims, &q);
    TestTensor dk = make_tensor(Layout::bhsd, dtype, kv_dims, &k);
    TestTensor dv = make_tensor(Layout::bhsd, dtype, kv_dims, &v);
    TestTensor out = make_tensor(Layout::bhsd, dtype, q_dims);
    jit::DeviceBuffer lse(std::size_t(count(q_dims) / head_dim) * sizeof(float));

    std::vector<jit::CausalAlign> aligns{jit::CausalAlign::TopLeft};
    if (causal) aligns.push_back(jit::CausalAlign::BottomRight);
    for (const jit::CausalAlign align : aligns) {
      SCOPED_TRACE(::testing::Message() << "seq_q " << seq_q
                                        << (align == jit::CausalAlign::TopLeft ? " top-left" : " bottom-right"));
      jit::AttentionOptions options;
      options.causal = causal;
      options.align = align;
      const jit::detail::AttnProblem problem =
          jit::detail::validate_attention(dq.view, dk.view, dv.view, out.view, options);
      const std::int64_t offset = align == jit::CausalAlign::BottomRight ? kv_dims[2] - q_dims[2] : 0;
      const ReferenceProblem reference{q_dims[0], q_dims[1], kv_dims[1], q_dims[2], kv_dims[2],
                                       head_dim,  causal,    offset,     double(problem.scale)};
      const ReferenceResult expected = reference_attention(reference, q, k, v);
      configs += expect_every_config_matches(problem, dq, dk, dv, out, lse, reference, expected);
    }
  }
  // D = 256 has only the sm90 family.
  if (configs == 0) GTEST_SKIP() << "no family serves head dim " << head_dim << " on " << jit::current_target().arch;
}

INSTANTIATE_TEST_SUITE_P(Specializations, RowlessWarpgroups, every_specialization(), specialization_name);

}  // namespace
}  // namespace cujit_test
