// The sparse-convolution pool kernels on the GPU: spconv::indice_maxpool and
// spconv::indice_maxpool_backward.
//
// Note [Sparse max pooling on the GPU]
// The semantics are the CPU's (Note [Sparse max pooling] in conv_cpu.cc):
// the true maximum over an output's pairs, 0 for a row no pair reaches, NaN
// propagating; the backward routes out_grad[o, c] to the first pair, in
// offset order, whose value equals out_features[o, c]. Everything runs on
// the device without the host waiting, deterministic in every mode (Note
// [Deterministic mode]): no atomics.
// - Forward, output stationary: the offset map [K, num_out] (Note [Offset
//   maps]) names each output's input per offset; a thread per (o, c) walks
//   k = 0 .. K-1 and keeps the first value and every later one that takes
//   over, as the CPU does, and stores the winner's bits unchanged.
// - Backward: a thread per (o, c) finds the routing offset (the first k
//   whose input holds the maximum; -1 if none), then a thread per (i, c),
//   input stationary over the map of the other direction [K, num_in], adds
//   out_grad[o, c] for every offset k whose pair (i, o) is the routing pair
//   of (o, c), in offset order, so float32 gives the CPU's bits.
// Like the convolutions (Note [Sparse convolution kernels on the GPU]), the
// rulebook's contents are trusted, except that pairs outside the tensors
// are recorded (raised at the next synchronization) and left out of the
// maps.
#include <cstdint>

#include "spconv_device.cuh"
#include "spconv_gpu.h"

namespace bp_spconv_gpu {

namespace {

using bp::ScalarType;
using bp::Tensor;

// candidate > current, or candidate NaN where current is not (takesOver in conv_cpu.cc).
BP_GPU_HD inline bool takesOver(float candidate, float current) {
  return candidate > current || (candidate != candidate && current == current);
}
BP_GPU_HD inline bool takesOver(double candidate, double current) {
  return candidate > current || (candidate != candidate && current == current);
}
// value equals max, NaN equal to NaN (isMax in conv_cpu.cc).
template <class A>
BP_GPU_HD inline bool isMax(A value, A max) {
  return value == max || (value != value && max != max);
}

template <class T>
__global__ void maxpoolKernel(const T* x, const int32_t* map, int64_t K, int64_t num_out, int64_t C, T* y) {
  const int64_t total = num_out * C;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = e / C, c = e % C;
    bool reached = false;
    T best = bp_gpu::store<T>(0);
    for (int64_t k = 0; k < K; ++k) {
      const int64_t i = map[k * num_out + o];
      if (i < 0) continue;
      const T v = x[i * C + c];
      if (!reached || takesOver(bp_gpu::load(v), bp_gpu::load(best))) best = v;
      reached = true;
    }
    y[e] = best;  // the winner's bits; 0 when no pair reaches o
  }
}

// route[o, c] = the first offset whose input holds y[o, c], or -1.
template <class T>
__global__ void maxpoolRouteKernel(const T* x, const T* y, const int32_t* map, int64_t K, int64_t num_out, int64_t C,
                                   int32_t* route) {
  const int64_t total = num_out * C;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = e / C, c = e % C;
    const auto max = bp_gpu::load(y[e]);
    int32_t first = -1;
    for (int64_t k = 0; k < K && first < 0; ++k) {
      const int64_t i = map[k * num_out + o];
      if (i >= 0 && isMax(bp_gpu::load(x[i * C + c]), max)) first = static_cast<int32_t>(k);
    }
    route[e] = first;
  }
}

// dx[i, c] = the sum, in offset order, of g[o, c] over the offsets k whose
// pair (i, o) routes (o, c); inverse_map is [K, num_in] (input -> output).
template <class T>
__global__ void maxpoolBackwardKernel(const T* g, const int32_t* route, const int32_t* inverse_map, int64_t K,
                                      int64_t num_in, int64_t C, T* dx) {
  const int64_t total = num_in * C;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e / C, c = e % C;
    bp_gpu::opmath_t<T> sum = 0;
    for (int64_t k = 0; k < K; ++k) {
      const int64_t o = inverse_map[k * num_in + i];
      if (o >= 0 && route[o * C + c] == k) sum += bp_gpu::load(g[o * C + c]);
    }
    dx[e] = bp_gpu::store<T>(sum);
  }
}

// Blocks of kMapThreads for a grid-stride loop over `n` elements.
dim3 elementwiseGrid(int64_t n) {
  const int64_t blocks = (n + kMapThreads - 1) / kMapThreads;
  return dim3(static_cast<unsigned>(blocks < (int64_t{1} << 20) ? blocks : (int64_t{1} << 20)));
}

// As the CPU kernels' feature check, on this device: [rows, C] of a
// floating dtype on `device` (channels < 0: any C).
void checkPoolFeatures(const char* op, const Tensor& t, const char* name, int64_t channels, bp::Device device) {
  BP_PLUGIN_CHECK(t.defined() && t.dim() == 2, op, ": ", name, " must have shape [rows, C]");
  checkOnCallDevice(op, t, name, device);
  checkFloat(op, t, name);
  BP_PLUGIN_CHECK(channels < 0 || t.size(1) == channels, op, ": ", name, " has ", t.size(1), " channels, expected ",
                  channels);
}

// The device of a pooling call: that of features, which must be this plugin's.
bp::Device poolDevice(const char* op, const Tensor& features) {
  BP_PLUGIN_CHECK(features.defined() && features.dim() == 2, op, ": features must have shape [rows, C]");
  return bp_gpu::callDevice(op, features, "features");
}

Tensor indiceMaxpool(const Tensor& features, const Tensor& indice_pairs, const Tensor& indice_pair_num,
                     int64_t num_out) {
  constexpr const char* op = "spconv::indice_maxpool";
  const CallContext call(poolDevice(op, features));
  checkPoolFeatures(op, features, "features", -1, call.device);
  BP_PLUGIN_CHECK(num_out >= 0, op, ": num_out must be >= 0, got ", num_out);
  bp_spconv::checkRulebook(op, indice_pairs, indice_pair_num, -1);
  checkOnCallDevice(op, indice_pairs, "indice_pairs", call.device);
  const int64_t C = features.size(1), n_in = features.size(0);
  Tensor out = Tensor::empty({num_out, C}, features.dtype(), call.device);
  if (out.numel() == 0) return out;
  Tensor pairs, counts;
  const DeviceRulebook rb =
      deviceRulebook(kIndiceMaxpoolSites, call.device, indice_pairs, indice_pair_num, pairs, counts);
  const Tensor x = bp_spconv::contiguous(features);
  const Tensor map = offsetMap(op, call, rb, 0, n_in, num_out);
  const int32_t* m = map.numel() == 0 ? nullptr : map.device_ptr<const int32_t>();
  visitFloat(features.dtype(), [&](auto tag) {
    using T = decltype(tag);
    bp_gpu::launch(&maxpoolKernel<T>, elementwiseGrid(out.numel()), dim3(kMapThreads), 0, call.stream,
                   static_cast<const T*>(x.data_ptr()), m, rb.K, num_out, C, static_cast<T*>(out.data_ptr()));
  });
  return out;
}

Tensor indiceMaxpoolBackward(const Tensor& features, const Tensor& out_features, const Tensor& out_grad,
                             const Tensor& indice_pairs, const Tensor& indice_pair_num) {
  constexpr const char* op = "spconv::indice_maxpool_backward";
  const CallContext call(poolDevice(op, features));
  checkPoolFeatures(op, features, "features", -1, call.device);
  const int64_t C = features.size(1), n_in = features.size(0);
  checkPoolFeatures(op, out_features, "out_features", C, call.device);
  checkPoolFeatures(op, out_grad, "out_grad", C, call.device);
  BP_PLUGIN_CHECK(out_grad.size(0) == out_features.size(0) && out_grad.dtype() == features.dtype() &&
                      out_features.dtype() == features.dtype(),
                  op, ": out_grad ", out_grad.dtype(), " ", out_grad.sizes(), " must match out_features ",
                  out_features.dtype(), " ", out_features.sizes(), " and features' dtype ", features.dtype());
  const int64_t num_out = out_features.size(0);
  bp_spconv::checkRulebook(op, indice_pairs, indice_pair_num, -1);
  checkOnCallDevice(op, indice_pairs, "indice_pairs", call.device);
  Tensor input_grad = Tensor::empty({n_in, C}, features.dtype(), call.device);
  if (input_grad.numel() == 0) return input_grad;
  Tensor pairs, counts;
  const DeviceRulebook rb =
      deviceRulebook(kIndiceMaxpoolBackwardSites, call.device, indice_pairs, indice_pair_num, pairs, counts);
  const Tensor x = bp_spconv::contiguous(features), y = bp_spconv::contiguous(out_features),
               g = bp_spconv::contiguous(out_grad);
  const Tensor map = offsetMap(op, call, rb, 0, n_in, num_out);          // output -> input
  const Tensor inverse_map = offsetMap(op, call, rb, 1, num_out, n_in);  // input -> output
  const Tensor route = Tensor::empty({num_out, C}, ScalarType::Int32, call.device);
  const int32_t* m = map.numel() == 0 ? nullptr : map.device_ptr<const int32_t>();
  const int32_t* im = inverse_map.numel() == 0 ? nullptr : inverse_map.device_ptr<const int32_t>();
  int32_t* r = route.numel() == 0 ? nullptr : route.device_ptr<int32_t>();
  visitFloat(features.dtype(), [&](auto tag) {
    using T = decltype(tag);
    bp_gpu::launch(&maxpoolRouteKernel<T>, elementwiseGrid(route.numel()), dim3(kMapThreads), 0, call.stream,
                   static_cast<const T*>(x.data_ptr()), static_cast<const T*>(y.data_ptr()), m, rb.K, num_out, C, r);
    bp_gpu::launch(&maxpoolBackwardKernel<T>, elementwiseGrid(input_grad.numel()), dim3(kMapThreads), 0, call.stream,
                   static_cast<const T*>(g.data_ptr()), r, im, rb.K, n_in, C, static_cast<T*>(input_grad.data_ptr()));
  });
  return input_grad;
}

}  // namespace

void registerPoolKernels(bp::Library& m, int32_t type) {
  registerKernel(m, "spconv::indice_maxpool", type, bp::kernel<&indiceMaxpool>());
  registerKernel(m, "spconv::indice_maxpool_backward", type, bp::kernel<&indiceMaxpoolBackward>());
}

}  // namespace bp_spconv_gpu
