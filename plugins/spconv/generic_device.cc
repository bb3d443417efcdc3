// The device-generic kernels: the sparse-convolution ops on any device that
// implements the standard ops they are made of.
//
// Note [Device-generic sparse convolution]
// Registered for the device types named in BACKPLANE_SPCONV_GENERIC_DEVICES:
// a vendor's device whose plugin has the standard ops but no spconv kernels
// of its own (the GPU plugins have theirs: Note [Sparse convolution on the
// GPU]). Nothing here touches device memory:
// - get_indice_pairs copies the indices to the host, builds the rulebook
//   with the CPU kernel, and copies the three results back (rulebook
//   building is hash-table work, serial by nature; its result is reused by
//   every layer of the same resolution).
// - indice_conv and its backward read only indice_pair_num on the host (K
//   counts) and run, per kernel offset, index_select + mm + scatter_add_
//   through the dispatcher on the tensors' own device, so the GEMMs are the
//   device's own and nothing round-trips through the host. For subm=True the
//   centre offset is one mm over all rows (its pairs are the identity; the
//   CPU kernel checks that, this path trusts the flag).
// - indice_maxpool and its backward are not registered: they run through
//   the CPU fallback.
// Summation order on a device is the device's (scatter_add may use
// atomics), so results can differ from the CPU's in the last bits.
#include "spconv.h"

namespace bp_spconv {

namespace {

using bp::Operator;
using bp::Tensor;

// The standard ops this path calls, found once (thread-safe statics).
struct StandardOps {
  Operator index_select = Operator::find("bp::index_select");
  Operator mm = Operator::find("bp::mm");
  Operator mm_out = Operator::find("bp::mm.out");
  Operator scatter_add_ = Operator::find("bp::scatter_add_");
  Operator zeros = Operator::find("bp::zeros");
  Operator to_dtype = Operator::find("bp::to.dtype");
  Operator to_device = Operator::find("bp::to.device");
};
const StandardOps& ops() {
  static const StandardOps o;
  return o;
}

// The rulebook on its device, with views of one offset's rows.
class DeviceRulebook {
 public:
  DeviceRulebook(const char* op, const Tensor& pairs, const Tensor& pair_num, int64_t capacity, bool inverse)
      : pairs_(pairs),
        pairs64_(ops().to_dtype.call(pairs, bp::ScalarType::Int64)),
        counts_(pairCounts(op, pair_num, capacity)),
        in_row_(inverse ? 1 : 0) {}

  int64_t kernelVolume() const { return static_cast<int64_t>(counts_.size()); }
  int64_t count(int64_t k) const { return counts_[k]; }
  // The used input / output rows of offset k: int32 [n_k], for index_select.
  Tensor in(int64_t k) const { return row(pairs_, k, in_row_); }
  Tensor out(int64_t k) const { return row(pairs_, k, 1 - in_row_); }
  // The same as int64 [n_k, width] with a broadcast column, for scatter_add_.
  Tensor inSpread(int64_t k, int64_t width) const { return spread(k, in_row_, width); }
  Tensor outSpread(int64_t k, int64_t width) const { return spread(k, 1 - in_row_, width); }

 private:
  Tensor row(const Tensor& t, int64_t k, int r) const {
    return t.as_strided({counts_[k]}, {t.stride(2)}, t.storage_offset() + k * t.stride(0) + r * t.stride(1));
  }
  Tensor spread(int64_t k, int r, int64_t width) const {
    const Tensor& t = pairs64_;
    return t.as_strided({counts_[k], width}, {t.stride(2), 0}, t.storage_offset() + k * t.stride(0) + r * t.stride(1));
  }

  Tensor pairs_, pairs64_;
  std::vector<int64_t> counts_;
  int in_row_;
};

// W[k] of contiguous filters [kD, kH, kW, Cin, Cout], as [Cin, Cout] or
// transposed [Cout, Cin].
Tensor weightOf(const Tensor& w, int64_t k, const ConvShape& s, bool transposed) {
  const int64_t offset = w.storage_offset() + k * s.cin * s.cout;
  if (transposed) return w.as_strided({s.cout, s.cin}, {1, s.cout}, offset);
  return w.as_strided({s.cin, s.cout}, {s.cout, 1}, offset);
}

Tensor zeros(const Tensor& like, std::vector<int64_t> sizes) {
  return ops().zeros.call(sizes, like.dtype(), like.device());
}

std::tuple<Tensor, Tensor, Tensor> getIndicePairs(const Tensor& indices, int64_t batch_size, bp::IntList spatial_shape,
                                                  bp::IntList kernel_size, bp::IntList stride, bp::IntList padding,
                                                  bp::IntList dilation, bool subm) {
  const Operator& to = ops().to_device;
  const bp::Device device = indices.device();
  auto [out_indices, pairs, counts] = getIndicePairsCpu(to.call(indices, kCpuDevice, indices.dtype()), batch_size,
                                                        spatial_shape, kernel_size, stride, padding, dilation, subm);
  const bp::ScalarType i32 = bp::ScalarType::Int32;
  return {to.call(out_indices, device, i32), to.call(pairs, device, i32), to.call(counts, device, i32)};
}

Tensor indiceConv(const Tensor& features, const Tensor& filters, const Tensor& indice_pairs,
                  const Tensor& indice_pair_num, int64_t num_out, bool inverse, bool subm) {
  constexpr const char* op = "spconv::indice_conv";
  const ConvShape s = checkConv(op, features, filters, indice_pairs, indice_pair_num, num_out, subm);
  const DeviceRulebook rb(op, indice_pairs, indice_pair_num, s.rulebook.capacity, inverse);
  const Tensor w = contiguous(filters);
  const int64_t centre = rb.kernelVolume() / 2;
  Tensor out = subm ? ops().mm.call(features, weightOf(w, centre, s, false)) : zeros(features, {s.num_out, s.cout});
  for (int64_t k = 0; k < rb.kernelVolume(); ++k) {
    if (rb.count(k) == 0 || (subm && k == centre)) continue;
    const Tensor gathered = ops().index_select.call(features, int64_t{0}, rb.in(k));
    const Tensor product = ops().mm.call(gathered, weightOf(w, k, s, false));
    ops().scatter_add_.call(out, int64_t{0}, rb.outSpread(k, s.cout), product);
  }
  return out;
}

std::tuple<Tensor, Tensor> indiceConvBackward(const Tensor& features, const Tensor& filters, const Tensor& out_grad,
                                              const Tensor& indice_pairs, const Tensor& indice_pair_num, bool inverse,
                                              bool subm) {
  constexpr const char* op = "spconv::indice_conv_backward";
  BP_PLUGIN_CHECK(out_grad.defined() && out_grad.dim() == 2, op, ": out_grad must have shape [num_out, Cout]");
  const ConvShape s = checkConv(op, features, filters, indice_pairs, indice_pair_num, out_grad.size(0), subm);
  BP_PLUGIN_CHECK(out_grad.size(1) == s.cout && out_grad.dtype() == features.dtype(), op, ": out_grad must be ",
                  features.dtype(), " [num_out, ", s.cout, "] (Cout of the filters), got ", out_grad.dtype(), " ",
                  out_grad.sizes());
  const DeviceRulebook rb(op, indice_pairs, indice_pair_num, s.rulebook.capacity, inverse);
  const Tensor w = contiguous(filters);
  const int64_t centre = rb.kernelVolume() / 2;
  Tensor filters_grad = zeros(features, filters.sizes().vec());
  Tensor input_grad;
  if (subm) {
    input_grad = ops().mm.call(out_grad, weightOf(w, centre, s, true));
    const Tensor features_t =
        features.as_strided({s.cin, s.num_in}, {features.stride(1), features.stride(0)}, features.storage_offset());
    ops().mm_out.call(features_t, out_grad, weightOf(filters_grad, centre, s, false));
  } else {
    input_grad = zeros(features, {s.num_in, s.cin});
  }
  for (int64_t k = 0; k < rb.kernelVolume(); ++k) {
    const int64_t n = rb.count(k);
    if (n == 0 || (subm && k == centre)) continue;
    const Tensor grad = ops().index_select.call(out_grad, int64_t{0}, rb.out(k));
    const Tensor input = ops().index_select.call(features, int64_t{0}, rb.in(k));
    ops().scatter_add_.call(input_grad, int64_t{0}, rb.inSpread(k, s.cin),
                            ops().mm.call(grad, weightOf(w, k, s, true)));
    const Tensor input_t = input.as_strided({s.cin, n}, {1, s.cin}, input.storage_offset());
    ops().mm_out.call(input_t, grad, weightOf(filters_grad, k, s, false));
  }
  return {std::move(input_grad), std::move(filters_grad)};
}

}  // namespace

void registerGenericKernels(bp::Library& m, int32_t device_type) {
  m.impl("spconv::get_indice_pairs", device_type, bp::kernel<&getIndicePairs>());
  m.impl("spconv::indice_conv", device_type, bp::kernel<&indiceConv>());
  m.impl("spconv::indice_conv_backward", device_type, bp::kernel<&indiceConvBackward>());
}

}  // namespace bp_spconv
