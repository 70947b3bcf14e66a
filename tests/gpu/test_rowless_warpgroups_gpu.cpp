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
#include "jit/attention/attention_problem.h"

namespace cujit_test {
namespace {

class RowlessWarpgroups : public ::testing::TestWithParam<Specialization> {};

TEST_P(RowlessWarpgroups, EveryConfigMatchesTheReferenceWhenTheLastTileHasRowlessWarpgroups) {
  CUJIT_REQUIRE_GPU();
  const auto [head_dim, dtype, causal] = GetParam();
  TestRng rng;
  SCOPED_TRACE(rng.describe());
  int configs = 0;
  const std::vector<Mask> masks =
      causal ? std::vector<Mask>{Mask::top_left, Mask::bottom_right} : std::vector<Mask>{Mask::none};
  for (const std::int64_t seq_q : {40, 260}) {
    for (const Mask mask : masks) {
      AttnCase c;
      c.dtype = dtype;
      c.heads_q = 4;
      c.heads_kv = 2;
      c.seq_q = seq_q;
      c.seq_k = 777;
      c.head_dim = head_dim;
      c.mask = mask;
      SCOPED_TRACE(case_name(c));
      const AttnInputs in = make_inputs(c, rng);
      TestTensor out = make_tensor(Layout::bhsd, dtype, {c.batch, c.heads_q, c.seq_q, c.head_dim});
      jit::DeviceBuffer lse(std::size_t(c.batch * c.heads_q * c.seq_q) * sizeof(float));
      const jit::detail::AttnProblem problem =
          jit::detail::validate_attention(in.dq.view, in.dk.view, in.dv.view, out.view, options_for(c, nullptr));
      const ReferenceProblem reference = reference_problem(c);
      configs += expect_every_config_matches(problem, in.dq, in.dk, in.dv, out, lse, reference,
                                             reference_attention(reference, in.q, in.k, in.v));
    }
  }
  // D = 256 has only the sm90 family.
  if (configs == 0) GTEST_SKIP() << "no family serves head dim " << head_dim << " on " << jit::current_target().arch;
}

INSTANTIATE_TEST_SUITE_P(Specializations, RowlessWarpgroups, every_specialization(), specialization_name);

}  // namespace
}  // namespace cujit_test
