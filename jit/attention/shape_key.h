// The hot path's key: a problem seen before on a context. The whole problem
// (AttnProblem::fields) is the key, so whatever a plan reads from a problem
// tells two plans apart.
#pragma once
#include <cuda.h>

#include <functional>

#include "jit/attention/attention_problem.h"

namespace jit::detail {

struct ShapeKey {
  CUcontext context;
  AttnProblem problem;
  bool operator==(const ShapeKey& other) const = default;
};

struct ShapeKeyHash {
  std::size_t operator()(const ShapeKey& k) const {
    return std::hash<const void*>()(k.context) * 1000003u ^ hash_value(k.problem);
  }
};

}  // namespace jit::detail
