#pragma once
// What the sparse-convolution plugin's files share: the op names, the checks
// of a rulebook's shape, and the CPU kernels that the device-generic path
// reuses on the host (rulebook building). Everything is written against the
// plugin SDK only.

#include <array>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "backplane/plugin.hpp"

namespace bp_spconv {

inline constexpr int32_t kCpu = 0;
inline constexpr bp::Device kCpuDevice{kCpu, 0};

// Threads for the CPU kernels: BACKPLANE_NUM_THREADS (as for the CPU
// plugin), default all cores; read once.
int numThreads();
// The threads worth starting for `work` elementary operations: 1 when it is
// too little to share (a team's start and barriers cost more), else
// numThreads().
int threadsFor(int64_t work);

inline constexpr const char* kGetIndicePairs = "spconv::get_indice_pairs";
// The names of the spatial dimensions, for messages.
inline constexpr const char* kDimNames[3] = {"z", "y", "x"};

// "[a, b, c]", for messages.
std::string listString(const std::array<int64_t, 3>& v);

// The geometry of one sparse convolution, checked (Note [Rulebook]).
struct ConvGeometry {
  int64_t batch_size;
  std::array<int64_t, 3> in_shape, out_shape, kernel, stride, padding, dilation;
  bool subm;
  int64_t kernelVolume() const { return kernel[0] * kernel[1] * kernel[2]; }
};

// Checks the arguments of get_indice_pairs other than `indices` and computes
// the output spatial shape; throws bp::Error naming the bad argument.
ConvGeometry checkGeometry(int64_t batch_size, bp::IntList spatial_shape, bp::IntList kernel_size, bp::IntList stride,
                           bp::IntList padding, bp::IntList dilation, bool subm);

// Checks `indices` (int32 [N, 4], N < 2^31) and that batch_size x the grid
// volume fits coordinate keys, without reading an element (so it holds on
// every device); returns whether keys need 64 bits (Note [Coordinate keys]).
bool checkIndices(const bp::Tensor& indices, const ConvGeometry& g);

// One row of `indices`: (batch, z, y, x).
using Site = std::array<int32_t, 4>;

// Whether `s` lies in the batch and inside spatial_shape (Note [Rulebook]).
inline bool siteInside(const ConvGeometry& g, const Site& s) {
  if (s[0] < 0 || s[0] >= g.batch_size) return false;
  for (int d = 0; d < 3; ++d)
    if (s[d + 1] < 0 || s[d + 1] >= g.in_shape[d]) return false;
  return true;
}
// The errors get_indice_pairs reports for the first offending row of
// `indices`, one text for every device: row `row` holds `s`, which is
// outside the batch or the grid (the first failing check, in the order
// batch, z, y, x); or repeats the site of the earlier row `first`.
[[noreturn]] void failSiteOutside(const ConvGeometry& g, int64_t row, const Site& s);
[[noreturn]] void failDuplicateSite(int64_t first, int64_t row, const Site& s);

// spconv::get_indice_pairs on the CPU: (out_indices, indice_pairs, indice_pair_num).
std::tuple<bp::Tensor, bp::Tensor, bp::Tensor> getIndicePairsCpu(const bp::Tensor& indices, int64_t batch_size,
                                                                 bp::IntList spatial_shape, bp::IntList kernel_size,
                                                                 bp::IntList stride, bp::IntList padding,
                                                                 bp::IntList dilation, bool subm);

// The shape facts of a rulebook and the tensors it is used with, checked
// without reading any element (so they hold on every device).
struct RulebookShape {
  int64_t kernel_volume;  // K
  int64_t capacity;       // P: pairs per offset that indice_pairs has room for
};

// Checks indice_pairs (int32 [K, 2, P]) and indice_pair_num (int32 [K]);
// `kernel_volume` is the K the other arguments imply (-1: take the rulebook's).
RulebookShape checkRulebook(const char* op, const bp::Tensor& indice_pairs, const bp::Tensor& indice_pair_num,
                            int64_t kernel_volume);

// The shapes of an indice_conv / indice_conv_backward call, checked.
struct ConvShape {
  RulebookShape rulebook;
  int64_t num_in, num_out, cin, cout;
};
ConvShape checkConv(const char* op, const bp::Tensor& features, const bp::Tensor& filters,
                    const bp::Tensor& indice_pairs, const bp::Tensor& indice_pair_num, int64_t num_out, bool subm);

// The counts of indice_pair_num on the host (copied from the device when
// it lives elsewhere), each checked to lie in [0, capacity].
std::vector<int64_t> pairCounts(const char* op, const bp::Tensor& indice_pair_num, int64_t capacity);

// `t` itself when contiguous, else a contiguous copy on its own device
// (through the dispatcher's empty + copy_).
bp::Tensor contiguous(const bp::Tensor& t);

// Registration, one per kernel family.
void registerCpuKernels(bp::Library& m);
void registerGenericKernels(bp::Library& m, int32_t device_type);

}  // namespace bp_spconv
