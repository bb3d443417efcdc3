// Argument checks shared by the CPU and the device-generic kernels, and the
// thread setting.
#include <algorithm>
#include <climits>
#include <cstdlib>
#include <string>
#include <thread>

#include "bp_common/threads.h"
#include "spconv.h"

namespace bp_spconv {

namespace {
int readThreadSetting() { return bp_common::threadSetting(); }  // the CPU plugin warns about a bad value

void checkInt32(const char* op, const bp::Tensor& t, const char* name, const char* shape) {
  BP_PLUGIN_CHECK(t.defined(), op, ": ", name, " is undefined");
  BP_PLUGIN_CHECK(t.dtype() == bp::ScalarType::Int32, op, ": ", name, " must have dtype int32 (", shape,
                  ", as spconv::get_indice_pairs returns it), got ", t.dtype());
}
std::array<int64_t, 3> triple(bp::IntList l, const char* name, const char* meaning) {
  BP_PLUGIN_CHECK(l.size() == 3, kGetIndicePairs, ": ", name, " must have 3 values (", meaning, "), got ", l);
  return {l[0], l[1], l[2]};
}
// a * b, or false when it overflows int64.
bool mulFits(int64_t a, int64_t b, int64_t& out) { return !__builtin_mul_overflow(a, b, &out); }
}  // namespace

std::string listString(const std::array<int64_t, 3>& v) {
  return bp::detail::concat('[', v[0], ", ", v[1], ", ", v[2], ']');
}

ConvGeometry checkGeometry(int64_t batch_size, bp::IntList spatial_shape, bp::IntList kernel_size, bp::IntList stride,
                           bp::IntList padding, bp::IntList dilation, bool subm) {
  ConvGeometry g;
  g.batch_size = batch_size;
  g.subm = subm;
  g.in_shape = triple(spatial_shape, "spatial_shape", "D, H, W");
  g.kernel = triple(kernel_size, "kernel_size", "kD, kH, kW");
  g.stride = triple(stride, "stride", "D, H, W");
  g.padding = triple(padding, "padding", "D, H, W");
  g.dilation = triple(dilation, "dilation", "D, H, W");
  BP_PLUGIN_CHECK(batch_size >= 1, kGetIndicePairs, ": batch_size must be >= 1, got ", batch_size);
  for (int d = 0; d < 3; ++d) {
    BP_PLUGIN_CHECK(g.in_shape[d] >= 1 && g.in_shape[d] <= INT32_MAX, kGetIndicePairs,
                    ": spatial_shape values must be in [1, 2^31 - 1], got ", listString(g.in_shape));
    BP_PLUGIN_CHECK(g.kernel[d] >= 1 && g.kernel[d] <= 64, kGetIndicePairs,
                    ": kernel_size values must be in [1, 64], got ", listString(g.kernel));
    BP_PLUGIN_CHECK(g.stride[d] >= 1, kGetIndicePairs, ": stride values must be >= 1, got ", listString(g.stride));
    BP_PLUGIN_CHECK(g.padding[d] >= 0 && g.padding[d] <= INT32_MAX, kGetIndicePairs,
                    ": padding values must be in [0, 2^31 - 1], got ", listString(g.padding));
    BP_PLUGIN_CHECK(g.dilation[d] >= 1 && g.dilation[d] <= INT32_MAX, kGetIndicePairs,
                    ": dilation values must be in [1, 2^31 - 1], got ", listString(g.dilation));
  }
  if (subm) {
    for (int d = 0; d < 3; ++d) {
      BP_PLUGIN_CHECK(g.kernel[d] % 2 == 1, kGetIndicePairs,
                      ": a submanifold convolution centres its kernel on each site, so ",
                      "kernel sizes must be odd, got ", listString(g.kernel),
                      "; use a regular convolution (subm=False) for even kernels");
      BP_PLUGIN_CHECK(g.stride[d] == 1, kGetIndicePairs,
                      ": a submanifold convolution keeps every site in place, so stride ", "must be 1, got ",
                      listString(g.stride), "; use a regular convolution (subm=False) to downsample");
    }
    g.out_shape = g.in_shape;
  } else {
    for (int d = 0; d < 3; ++d) {
      const int64_t span = g.in_shape[d] + 2 * g.padding[d] - g.dilation[d] * (g.kernel[d] - 1) - 1;
      BP_PLUGIN_CHECK(span >= 0, kGetIndicePairs, ": the kernel does not fit: in dimension ", kDimNames[d],
                      ", spatial size ", g.in_shape[d], " + 2 x padding ", g.padding[d], " is smaller than the ",
                      "dilated kernel ", g.dilation[d] * (g.kernel[d] - 1) + 1,
                      "; add padding or use a smaller kernel or dilation");
      g.out_shape[d] = span / g.stride[d] + 1;
    }
  }
  return g;
}

namespace {
std::string siteString(const Site& s) { return bp::detail::concat('(', s[0], ", ", s[1], ", ", s[2], ", ", s[3], ')'); }
}  // namespace

void failSiteOutside(const ConvGeometry& g, int64_t row, const Site& s) {
  const int64_t b = s[0];
  BP_PLUGIN_CHECK(b >= 0, kGetIndicePairs, ": indices row ", row, " = ", siteString(s), ": batch index ", b,
                  " is negative; indices columns are (batch, z, y, x)");
  BP_PLUGIN_CHECK(b < g.batch_size, kGetIndicePairs, ": indices row ", row, " = ", siteString(s), ": batch index ", b,
                  " is >= batch_size ", g.batch_size, "; pass the number of samples as batch_size");
  for (int d = 0; d < 3; ++d) {
    const int64_t c = s[d + 1];
    BP_PLUGIN_CHECK(c >= 0 && c < g.in_shape[d], kGetIndicePairs, ": indices row ", row, " = ", siteString(s), ": ",
                    kDimNames[d], " = ", c, c < 0 ? " is negative" : " is outside spatial_shape ",
                    c < 0 ? std::string() : listString(g.in_shape), " (valid: 0 to ", g.in_shape[d] - 1,
                    "); clip or drop the points outside the grid before voxelising");
  }
  bp::fail(BP_INTERNAL, bp::detail::concat(kGetIndicePairs, ": indices row ", row, " = ", siteString(s),
                                           " was reported outside the grid but is inside it"));
}

void failDuplicateSite(int64_t first, int64_t row, const Site& s) {
  bp::fail(
      BP_INVALID_ARGUMENT,
      bp::detail::concat(kGetIndicePairs, ": indices rows ", first, " and ", row, " both hold site ", siteString(s),
                         "; every active site must appear once (merge duplicate voxels, e.g. by averaging "
                         "their features, before building the rulebook)"));
}

bool checkIndices(const bp::Tensor& indices, const ConvGeometry& g) {
  BP_PLUGIN_CHECK(indices.dtype() == bp::ScalarType::Int32, kGetIndicePairs,
                  ": indices must have dtype int32 (columns batch, z, y, x), got ", indices.dtype(),
                  "; convert with .to(int32)");
  BP_PLUGIN_CHECK(indices.dim() == 2 && indices.size(1) == 4, kGetIndicePairs,
                  ": indices must have shape [N, 4] (batch, z, y, x), got ", indices.sizes());
  const int64_t n = indices.size(0);
  BP_PLUGIN_CHECK(n <= INT32_MAX, kGetIndicePairs, ": ", n, " active sites are more than int32 rows can number");
  int64_t in_sites = 0, out_sites = 0, in_volume = 0, out_volume = 0;
  const bool fits = mulFits(g.in_shape[0], g.in_shape[1], in_volume) && mulFits(in_volume, g.in_shape[2], in_volume) &&
                    mulFits(in_volume, g.batch_size, in_sites) && mulFits(g.out_shape[0], g.out_shape[1], out_volume) &&
                    mulFits(out_volume, g.out_shape[2], out_volume) && mulFits(out_volume, g.batch_size, out_sites);
  BP_PLUGIN_CHECK(fits && std::max(in_sites, out_sites) < (int64_t{1} << 62), kGetIndicePairs, ": batch_size ",
                  g.batch_size, " x the volume of spatial_shape ", listString(g.in_shape),
                  " exceeds 2^62 sites, more than coordinate keys can hold");
  return std::max(in_sites, out_sites) >= (int64_t{1} << 31);
}

int numThreads() {
  static const int n = readThreadSetting();
  return n;
}

int threadsFor(int64_t work) {
  constexpr int64_t kMinWorkToShare = 65536;
  return work < kMinWorkToShare ? 1 : numThreads();
}

RulebookShape checkRulebook(const char* op, const bp::Tensor& indice_pairs, const bp::Tensor& indice_pair_num,
                            int64_t kernel_volume) {
  checkInt32(op, indice_pairs, "indice_pairs", "[K, 2, N]");
  checkInt32(op, indice_pair_num, "indice_pair_num", "[K]");
  BP_PLUGIN_CHECK(indice_pairs.dim() == 3 && indice_pairs.size(1) == 2, op,
                  ": indice_pairs must have shape [K, 2, N] (K kernel offsets; input row, output row), got ",
                  indice_pairs.sizes());
  const int64_t K = indice_pairs.size(0);
  BP_PLUGIN_CHECK(kernel_volume < 0 || K == kernel_volume, op, ": indice_pairs has ", K,
                  " kernel offsets but the filters have ", kernel_volume,
                  " (kD x kH x kW); use the rulebook built with the filters' kernel_size");
  BP_PLUGIN_CHECK(indice_pair_num.dim() == 1 && indice_pair_num.size(0) == K, op, ": indice_pair_num must have shape [",
                  K, "] (one count per kernel offset), got ", indice_pair_num.sizes());
  BP_PLUGIN_CHECK(indice_pair_num.device() == indice_pairs.device(), op,
                  ": indice_pairs and indice_pair_num must be on one device, got ", indice_pairs.device(), " and ",
                  indice_pair_num.device());
  return RulebookShape{K, indice_pairs.size(2)};
}

ConvShape checkConv(const char* op, const bp::Tensor& features, const bp::Tensor& filters,
                    const bp::Tensor& indice_pairs, const bp::Tensor& indice_pair_num, int64_t num_out, bool subm) {
  BP_PLUGIN_CHECK(features.defined() && filters.defined(), op, ": features and filters must be defined");
  BP_PLUGIN_CHECK(features.dim() == 2, op, ": features must have shape [N, Cin], got ", features.sizes());
  BP_PLUGIN_CHECK(filters.dim() == 5, op, ": filters must have shape [kD, kH, kW, Cin, Cout], got ", filters.sizes());
  BP_PLUGIN_CHECK(filters.dtype() == features.dtype(), op, ": filters have dtype ", filters.dtype(), " but features ",
                  features.dtype(), "; they must match");
  BP_PLUGIN_CHECK(filters.size(3) == features.size(1), op, ": filters [kD, kH, kW, Cin, Cout] = ", filters.sizes(),
                  " take Cin = ", filters.size(3), " channels but features have ", features.size(1));
  BP_PLUGIN_CHECK(filters.device() == features.device() && indice_pairs.device() == features.device(), op,
                  ": features, filters and indice_pairs must be on one device, got ", features.device(), ", ",
                  filters.device(), " and ", indice_pairs.device());
  BP_PLUGIN_CHECK(num_out >= 0, op, ": num_out must be >= 0, got ", num_out);
  ConvShape s;
  s.rulebook = checkRulebook(op, indice_pairs, indice_pair_num, filters.size(0) * filters.size(1) * filters.size(2));
  s.num_in = features.size(0);
  s.num_out = num_out;
  s.cin = filters.size(3);
  s.cout = filters.size(4);
  if (subm) {
    BP_PLUGIN_CHECK(s.rulebook.kernel_volume % 2 == 1, op,
                    ": subm=True needs an odd kernel (its centre pairs every site with itself), got filters ",
                    filters.sizes());
    BP_PLUGIN_CHECK(num_out == s.num_in, op, ": subm=True keeps the sites, so num_out must equal the ", s.num_in,
                    " input rows, got ", num_out);
  }
  return s;
}

std::vector<int64_t> pairCounts(const char* op, const bp::Tensor& indice_pair_num, int64_t capacity) {
  static const bp::Operator to_device = bp::Operator::find("bp::to.device");
  const bp::Tensor host = indice_pair_num.device().type == kCpu
                              ? indice_pair_num
                              : to_device.call(indice_pair_num, kCpuDevice, bp::ScalarType::Int32);
  const int64_t K = host.size(0);
  const int32_t* p = K == 0 ? nullptr : host.data_ptr<const int32_t>();
  std::vector<int64_t> counts(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k) {
    counts[k] = p[k * host.stride(0)];
    BP_PLUGIN_CHECK(counts[k] >= 0 && counts[k] <= capacity, op, ": indice_pair_num[", k, "] = ", counts[k],
                    " is outside [0, ", capacity, "] (the room indice_pairs has per offset)");
  }
  return counts;
}

bp::Tensor contiguous(const bp::Tensor& t) {
  if (t.is_contiguous()) return t;
  static const bp::Operator copy = bp::Operator::find("bp::copy_");
  bp::Tensor out = bp::Tensor::empty(t.sizes(), t.dtype(), t.device());
  copy.call(out, t);
  return out;
}

}  // namespace bp_spconv
