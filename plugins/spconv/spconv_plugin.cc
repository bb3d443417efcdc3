// The sparse-convolution plugin: spconv-style ops for LiDAR / 3-D detection
// networks (features [N, C] + indices [N, 4] = (batch, z, y, x) in a
// spatial_shape [D, H, W]), in two stages as in spconv 1.x: build the
// rulebook (Note [Rulebook]), then gather-GEMM-scatter per kernel offset.
// It defines the `spconv` namespace and implements it for the CPU (Note
// [CPU gather-GEMM-scatter]) and, through the standard ops of the device,
// for the types listed in BACKPLANE_SPCONV_GENERIC_DEVICES (Note
// [Device-generic sparse convolution]). The GPU plugins (cuda, hip, gpusim)
// bring their own kernels for these ops (plugins/spconv/gpu, Note [Sparse
// convolution on the GPU]); other devices run the CPU kernels through the
// CPU fallback. plugins/spconv/README.md is the user's
// guide.
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "spconv.h"

namespace {

// The fixed schemas (the plugin's public interface).
constexpr const char* kSchemas[] = {
    "spconv::get_indice_pairs(Tensor indices, int batch_size, int[] spatial_shape, int[] kernel_size, int[] stride, "
    "int[] padding, int[] dilation, bool subm) -> (Tensor out_indices, Tensor indice_pairs, Tensor indice_pair_num)",
    "spconv::indice_conv(Tensor features, Tensor filters, Tensor indice_pairs, Tensor indice_pair_num, int num_out, "
    "bool inverse=False, bool subm=False) -> Tensor",
    "spconv::indice_conv_backward(Tensor features, Tensor filters, Tensor out_grad, Tensor indice_pairs, "
    "Tensor indice_pair_num, bool inverse=False, bool subm=False) -> (Tensor input_grad, Tensor filters_grad)",
    "spconv::indice_maxpool(Tensor features, Tensor indice_pairs, Tensor indice_pair_num, int num_out) -> Tensor",
    "spconv::indice_maxpool_backward(Tensor features, Tensor out_features, Tensor out_grad, Tensor indice_pairs, "
    "Tensor indice_pair_num) -> Tensor",
};

// The device types of the generic path: each comma-separated name in
// BACKPLANE_SPCONV_GENERIC_DEVICES (a vendor's device whose plugin has the
// standard ops but no spconv kernels). An unknown name is logged and skipped:
// the env var is read here, at plugin load, so the device's plugin (or the
// program's in-process device) must be registered before this plugin loads.
void registerGenericDevices(bp::Library& m) {
  std::vector<std::string> names;
  if (const char* env = std::getenv("BACKPLANE_SPCONV_GENERIC_DEVICES")) {
    std::string_view rest(env);
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      std::string_view name = rest.substr(0, comma);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      if (!name.empty() && name != "cpu") names.emplace_back(name);
    }
  }
  for (size_t i = 0; i < names.size(); ++i) {
    int32_t type;
    try {
      type = m.findDeviceType(names[i].c_str());
    } catch (const bp::Error& e) {
      m.log(BP_LOG_WARNING, "BACKPLANE_SPCONV_GENERIC_DEVICES names device type '" + names[i] +
                                "', which is not registered (" + e.message() +
                                "); its sparse convolutions will run through the CPU fallback. Load the device's "
                                "plugin before this one, or fix the name.");
      continue;
    }
    bool repeated = false;
    for (size_t j = 0; j < i; ++j) repeated = repeated || names[j] == names[i];
    if (repeated) continue;
    try {
      bp_spconv::registerGenericKernels(m, type);
    } catch (const bp::Error& e) {
      // The device's plugin brings its own spconv kernels (the GPU plugins
      // do, registered before this plugin loads): they stay.
      if (e.code() != BP_ALREADY_EXISTS) throw;
      m.log(BP_LOG_WARNING, "BACKPLANE_SPCONV_GENERIC_DEVICES names device type '" + names[i] +
                                "', whose plugin already implements the spconv ops (" + e.message() +
                                "); its own kernels stay and the generic path is not registered there");
    }
  }
}

// How each op differentiates (BP_HostApi.derivative, ABI 1.6): the
// forward ops' gradients come from the backward ops, whose own second
// derivatives are not written; the rulebook is integer bookkeeping.
constexpr const char* kDerivatives[][2] = {
    {"spconv::get_indice_pairs", "non_differentiable"},
    {"spconv::indice_conv",
     "spconv::indice_conv_backward(features, filters, grad, indice_pairs, indice_pair_num, inverse, subm) "
     "-> (features, filters)"},
    {"spconv::indice_conv_backward", "not_implemented"},
    {"spconv::indice_maxpool",
     "spconv::indice_maxpool_backward(features, result, grad, indice_pairs, indice_pair_num) -> features"},
    {"spconv::indice_maxpool_backward", "not_implemented"},
};

void init(bp::Library& m) {
  for (const char* schema : kSchemas) m.def(schema);
  for (const auto& [op, declaration] : kDerivatives) m.derivative(op, declaration);
  bp_spconv::registerCpuKernels(m);
  registerGenericDevices(m);
}

}  // namespace

BACKPLANE_PLUGIN("spconv", "0.1.0", init)
