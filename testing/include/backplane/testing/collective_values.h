#pragma once
// The values collective tests exchange, and what each reduction of them
// gives, shared by the tests of every engine (plugins/mpi/tests on the CPU,
// plugins/gpu/tests through NCCL), so that each engine is held to the same
// expectations, computed here in double from the inputs alone.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backplane/ops/tensor.h"
#include "backplane/runtime/collectives.h"

namespace backplane::testing {

// Rank r's element i: distinct across ranks, small enough to be exact in
// every dtype the tests use.
inline float rankValue(int r, int64_t i) { return static_cast<float>((r + 1) * 10 + i % 7); }

// Rank r's tensor of `shape` (rankValue(r, i) at flat index i), on the CPU.
inline Tensor rankTensor(int r, const std::vector<int64_t>& shape, ScalarType dtype = ScalarType::Float32) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = rankValue(r, i);
  return Tensor(tensorFromVector(v, shape)).to(dtype);
}

// What all_reduce with `op` over `world` ranks' rankTensor gives at flat
// index i.
inline double reducedValue(comm::ReduceOp op, int world, int64_t i) {
  double want = op == comm::ReduceOp::Product ? 1
                : op == comm::ReduceOp::Min   ? 1e30
                : op == comm::ReduceOp::Max   ? -1e30
                                              : 0;
  for (int r = 0; r < world; ++r) {
    const double x = rankValue(r, i);
    if (op == comm::ReduceOp::Sum || op == comm::ReduceOp::Avg) want += x;
    if (op == comm::ReduceOp::Product) want *= x;
    if (op == comm::ReduceOp::Min) want = std::min(want, x);
    if (op == comm::ReduceOp::Max) want = std::max(want, x);
  }
  return op == comm::ReduceOp::Avg ? want / world : want;
}

}  // namespace backplane::testing
