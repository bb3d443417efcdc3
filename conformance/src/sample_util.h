#pragma once
// Helpers the specs of index-driven ops share (specs_data_movement.cc,
// specs_indexing.cc): index and small-integer tensors, row-major
// coordinates, and a spec with one result.

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "backplane/conformance/spec.h"

namespace backplane::conformance {

// A host index tensor holding `values` (int64 unless said otherwise).
inline Tensor indexTensor(const std::vector<double>& values, std::vector<int64_t> sizes,
                          ScalarType dtype = ScalarType::Int64) {
  return hostTensor(values, std::move(sizes), dtype);
}

// Small integers in every dtype (0/1 for bool, 0..4 for uint8): sums of them
// are exact, so every order of adding gives the reference's result.
inline Tensor integerTensor(Rng& rng, std::vector<int64_t> sizes, ScalarType dtype) {
  std::vector<double> v(static_cast<size_t>(numelOf(sizes)));
  for (double& x : v) {
    x = dtype == ScalarType::Bool ? static_cast<double>(rng.integer(0, 1))
                                  : static_cast<double>(rng.integer(dtype == ScalarType::UInt8 ? 0 : -4, 4));
  }
  return hostTensor(v, std::move(sizes), dtype);
}

// A 0-d tensor's shape as [1] (gather and scatter treat it so).
inline std::vector<int64_t> atLeast1d(const Tensor& t) { return t.dim() == 0 ? std::vector<int64_t>{1} : sizesOf(t); }

// The coordinates of row-major element `linear` of a tensor of `sizes`.
inline void unravel(int64_t linear, const std::vector<int64_t>& sizes, std::vector<int64_t>& coords) {
  coords.assign(sizes.size(), 0);
  for (size_t d = sizes.size(); d-- > 0;) {
    if (sizes[d] == 0) continue;
    coords[d] = linear % sizes[d];
    linear /= sizes[d];
  }
}

inline int64_t ravel(const std::vector<int64_t>& coords, const std::vector<int64_t>& sizes) {
  int64_t linear = 0;
  for (size_t d = 0; d < sizes.size(); ++d) linear = linear * sizes[d] + coords[d];
  return linear;
}

// What an op returns: `values` as its dtype holds them.
inline Expected expected(std::vector<int64_t> sizes, ScalarType dtype, std::vector<double> values) {
  for (double& v : values) v = roundTo(dtype, v);
  return Expected{std::move(sizes), dtype, std::move(values)};
}

// A spec of `family` whose reference returns one result.
inline void addOneResultSpec(std::vector<OpSpec>& specs, std::string family, std::string op,
                             std::function<std::vector<Sample>()> samples,
                             std::function<Expected(const Sample&)> reference, std::string inplace = "",
                             std::string out = "") {
  OpSpec spec;
  spec.op = std::move(op);
  spec.family = std::move(family);
  spec.samples = std::move(samples);
  spec.reference = [reference = std::move(reference)](const Sample& s) { return std::vector<Expected>{reference(s)}; };
  spec.inplace = std::move(inplace);
  spec.out = std::move(out);
  specs.push_back(std::move(spec));
}

}  // namespace backplane::conformance
