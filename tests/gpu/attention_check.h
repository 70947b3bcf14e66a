// One attention problem run on the GPU and checked against the float64
// reference: shared by the GPU suites.
#pragma once
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "jit/attention.h"
#include "reference_attention.h"

namespace cujit_test {

/// Relative L2 error allowed in O, for fp16 and bf16 alike.
constexpr double kRelL2Tolerance = 1e-2;
/// LSE: |got - ref| <= kLseTolerance * max(1, |ref|). The LSE is computed in
/// fp32 from exact products of the inputs, so it is far more accurate than O
/// (errors of about 2e-5 were seen on an H100).
constexpr double kLseTolerance = 1e-3;

enum class Mask { none, top_left, bottom_right };
/// "full", "causalTL", "causalBR": as test names spell the mask.
const char* mask_name(Mask mask);

struct AttnCase {
  jit::DType dtype = jit::DType::f16;
  std::int64_t batch = 1, heads_q = 1, heads_kv = 1, seq_q = 1, seq_k = 1, head_dim = 64;
  Mask mask = Mask::none;
  Layout q_layout = Layout::bhsd;
  Layout kv_layout = Layout::bhsd;
  Layout out_layout = Layout::bhsd;
  std::optional<float> scale;  ///< nullopt: the library's default, 1/sqrt(D)
  bool lse = true;             ///< also request and check the LSE
};

/// A gtest-safe name ([A-Za-z0-9_]) that says everything about the case.
std::string case_name(const AttnCase& c);
/// For gtest's printing of parameters.
void PrintTo(const AttnCase& c, std::ostream* os);

jit::AttentionOptions options_for(const AttnCase& c, float* lse);
/// The reference's view of the case; `scale` is the float the library uses.
ReferenceProblem reference_problem(const AttnCase& c);
/// One sequence of a ragged batch (batch 1, the default scale), its causal
/// diagonal per `mask`.
ReferenceProblem sequence_problem(std::int64_t heads_q, std::int64_t heads_kv, std::int64_t seq_q, std::int64_t seq_k,
                                  std::int64_t head_dim, Mask mask);

/// Host inputs (logical order, already rounded to the dtype) and their
/// device copies in the case's layouts.
struct AttnInputs {
  std::vector<float> q, k, v;
  TestTensor dq, dk, dv;
};
AttnInputs make_inputs(const AttnCase& c, TestRng& rng);

/// Checks O (logical order, as read back) against the reference: no
/// non-finite element, rows that see no key exactly zero, relative L2 error
/// below `tolerance`. Reports through gtest (EXPECT).
void expect_output_matches(const std::vector<float>& got, const ReferenceResult& ref, const ReferenceProblem& p,
                           double tolerance = kRelL2Tolerance);
/// Checks the LSE ([B, Hq, Sq] as read back) against the reference:
/// |got - ref| <= tolerance * max(1, |ref|).
void expect_lse_matches(const std::vector<float>& got, const ReferenceResult& ref,
                        double tolerance = kLseTolerance);

/// The whole check for one case: random inputs, poisoned output (and LSE),
/// jit::attention on the default stream, cuCtxSynchronize, read back, compare
/// with the reference, and check that nothing outside the output view was
/// written. Reports through gtest; call it from a test body.
void run_and_check(const AttnCase& c, TestRng& rng);

}  // namespace cujit_test
