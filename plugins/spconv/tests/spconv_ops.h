#pragma once
// The spconv operators as the tests call them: through the dispatcher by
// name, as an application does (the plugin's README), each found once.
#include <array>
#include <cstdint>
#include <string_view>
#include <tuple>

#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/tensor.h"

namespace backplane::spconv_test {

using Triple = std::array<int64_t, 3>;
using Site = std::array<int32_t, 4>;  // (batch, z, y, x)
using PairsResult = std::tuple<Tensor, Tensor, Tensor>;

inline IntArrayRef ref(const Triple& t) { return IntArrayRef(t.data(), t.size()); }

inline PairsResult getIndicePairs(const Tensor& indices, int64_t batch, const Triple& shape, const Triple& kernel,
                                  const Triple& stride, const Triple& padding, const Triple& dilation, bool subm) {
  static const auto op = Dispatcher::singleton()
                             .findOpOrThrow("spconv::get_indice_pairs")
                             .typed<PairsResult(const Tensor&, int64_t, IntArrayRef, IntArrayRef, IntArrayRef,
                                                IntArrayRef, IntArrayRef, bool)>();
  return op.call(indices, batch, ref(shape), ref(kernel), ref(stride), ref(padding), ref(dilation), subm);
}

inline Tensor indiceConv(const Tensor& f, const Tensor& w, const Tensor& pairs, const Tensor& num, int64_t num_out,
                         bool inverse, bool subm) {
  static const auto op =
      Dispatcher::singleton()
          .findOpOrThrow("spconv::indice_conv")
          .typed<Tensor(const Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t, bool, bool)>();
  return op.call(f, w, pairs, num, num_out, inverse, subm);
}

inline std::tuple<Tensor, Tensor> indiceConvBackward(const Tensor& f, const Tensor& w, const Tensor& g,
                                                     const Tensor& pairs, const Tensor& num, bool inverse, bool subm) {
  static const auto op = Dispatcher::singleton()
                             .findOpOrThrow("spconv::indice_conv_backward")
                             .typed<std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&,
                                                               const Tensor&, const Tensor&, bool, bool)>();
  return op.call(f, w, g, pairs, num, inverse, subm);
}

inline Tensor indiceMaxpool(const Tensor& f, const Tensor& pairs, const Tensor& num, int64_t num_out) {
  static const auto op = Dispatcher::singleton()
                             .findOpOrThrow("spconv::indice_maxpool")
                             .typed<Tensor(const Tensor&, const Tensor&, const Tensor&, int64_t)>();
  return op.call(f, pairs, num, num_out);
}

inline Tensor indiceMaxpoolBackward(const Tensor& f, const Tensor& out, const Tensor& g, const Tensor& pairs,
                                    const Tensor& num) {
  static const auto op =
      Dispatcher::singleton()
          .findOpOrThrow("spconv::indice_maxpool_backward")
          .typed<Tensor(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&)>();
  return op.call(f, out, g, pairs, num);
}

// The GPU simulator's count `name` (Note [Launch counters]).
inline int64_t simActivity(std::string_view name) {
  static const auto op =
      Dispatcher::singleton().findOpOrThrow("gpusim::activity_stat").typed<int64_t(std::string_view)>();
  return op.call(name);
}

}  // namespace backplane::spconv_test
