// Benchmarks of the CUDA plugin (scripts/bench.sh), each against what the
// CUDA runtime or cuBLAS does when called directly, in pairs:
//
//   BM_Cuda_Add_64M_f32          add.out of two 64M-element (256 MiB) float32 cuda tensors into a
//                                preallocated out, through the dispatcher; cuda::synchronize per
//                                iteration, so the time is the kernel's plus one dispatch
//   BM_Cuda_Memcpy_D2D_64M_f32   its baseline: a device-to-device cudaMemcpyAsync moving the same
//                                bytes (Note [Same bytes moved]) and a stream synchronize
//   BM_Cuda_Matmul_4096          mm.out of two 4096x4096 float32 cuda tensors through the
//                                dispatcher (TF32 off), synchronized per iteration
//   BM_Cublas_Sgemm_4096         its baseline: cublasSgemm on the same shapes, default math mode
//                                (no TF32: the plugin's CUBLAS_COMPUTE_32F), synchronized
//   BM_Cuda_Softmax_16Kx4K_f32   softmax.int_out over the last dim of a [16384, 4096] float32 cuda
//                                tensor (256 MiB) into a preallocated out; rows fit the one-pass
//                                row cache (Note [One-pass rows]), so it moves 2 x 256 MiB; compare
//                                its bytes_per_second with BM_Cuda_Memcpy_D2D_64M_f32's
//   BM_Cuda_Sum_16M_f32          sum.IntList_out of 16M float32 to one value: a split reduction
//                                (Note [Split reductions]) reading 64 MiB; compare likewise
//   BM_Cuda_Add_Tiny_EndToEnd    add.Tensor of two 1-element cuda tensors: dispatch, meta rule,
//                                output allocation (the caching allocator) and the kernel launch;
//                                not synchronized per iteration (Note [Timing launches])
//   BM_Cuda_EmptyKernelLaunch    its baseline: the launch of an empty kernel, timed the same way
//   BM_Cuda_EncoderLayer_f32     samples/encoder's BERT-base layer (batch 8 x 128, hidden 768, 12
//                                heads), float32, TF32 off, no profiler; synchronized per layer.
//                                PyTorch eager runs the same layer in scripts/gpu-check's
//                                torch_baseline.py (0.61 ms on an H100; target <= 0.55 ms)
//   BM_Cuda_EncoderLayer_Graph_f32  the same layer captured once as a graph (backplane::Graph,
//                                Note [Graphs in the application API]) on a side stream and
//                                replayed, the stream synchronized per layer: the host's launch
//                                cost gone (target <= 0.6x PyTorch eager's time for the layer)
//   BM_Cuda_EncoderLayer_ForwardBackward_f32  the layer's block (the embedded tokens, a leaf
//                                requiring grad, through attention and feed-forward) forward
//                                recording its graph, then backward into every weight's and the
//                                input's grad; synchronized per iteration. PyTorch eager runs
//                                the same in torch_baseline.py (target: <= 1.0x its time). Its
//                                counter fallback_calls: the calls of one more, profiled step
//                                that fell back to the CPU (0 expected)
//   BM_Cuda_ResNetBlock_f32      a ResNet basic block (conv3x3, batch_norm, relu, conv3x3,
//                                batch_norm, the identity added, relu) on [32, 64, 56, 56] float32,
//                                batch_norm in evaluation mode, TF32 off, synchronized per block;
//                                PyTorch eager runs the same block (cuDNN) in torch_baseline.py
//                                (target >= 0.9x its speed)
//   BM_Cuda_SubmConv3x3x3_C64    spconv::indice_conv of a submanifold 3x3x3 convolution, 64 -> 64
//                                channels, on the synthetic KITTI scan of bench/spconv (about 32k
//                                voxels), rulebook built beforehand on the device; synchronized
//   BM_Cublas_Sgemm_SubmConv3x3x3_C64  its baseline: the same GEMM work, [pairs, 64] @ [64, 64],
//                                in one cublasSgemm (no gather, no scatter); target >= 0.5x of it
//   BM_Cuda_SparseConv3x3x3_Stride2_C32 / BM_Cublas_Sgemm_SparseConv3x3x3_Stride2_C32  the same
//                                for a strided 3x3x3 convolution, 32 -> 32 channels
//   BM_Cuda_RulebookSubm_40k     spconv::get_indice_pairs of a submanifold 3x3x3 convolution on
//                                the denser 40k-voxel scan, built on the device (target <= 0.5 ms)
//   BM_Cuda_LidarBackbone        samples/sparse_lidar's VoxelBackBone8x forward pass on the KITTI
//                                scan, rulebooks included, synchronized (target <= 8 ms)
//   BM_Cuda_Softmax_LayerNorm    the layer's attention softmax ([8, 12, 128, 128], last dim) and
//                                one of its layer_norms ([8, 128, 768]) into preallocated outputs;
//                                bytes_per_second over what they read and write, to compare with
//                                BM_Cuda_Memcpy_D2D_64M_f32's (the memory system's speed)
//   BM_Cuda_AllReduce/N          comm::all_reduce_ (sum) of N float32 elements of a cuda tensor in a
//                                world of one, through the plugin's NCCL engine (Note [NCCL engine]);
//                                synchronized per iteration; N = 2 (8 B) and 16M (64 MiB)
//   BM_Nccl_AllReduce/N          its baseline: ncclAllReduce called directly on a one-rank
//                                communicator, in place, on the same sizes, stream-synchronized
//                                (target: the dispatcher's >= 0.95x of its speed)
//
// Without a CUDA device (or driver, or plugin) every benchmark skips with
// "no CUDA device: <reason>" and the program exits 0, so scripts/bench.sh
// runs it on any machine.
//
// Note [Same bytes moved]
// add reads a and b and writes out: 3 x 256 MiB = 768 MiB of device memory
// traffic per call. A device-to-device copy of N bytes reads N and writes N,
// so the copy that moves the same 768 MiB is of 384 MiB (1.5 x one tensor).
// Both report bytes_per_second over those 768 MiB, and their time ratio is
// the fraction of the copy's bandwidth the add kernel reaches.
//
// Note [Timing launches]
// The two launch benchmarks queue work without waiting for it: a launch
// returns once the kernel is queued, and when the device's launch queue is
// full the next launch blocks until a slot frees, so the loop settles at the
// rate launches are accepted. They synchronize once, after the timed loop;
// what is still queued then (at most the queue's depth, about a thousand
// kernels) is a fraction of a percent of the iterations benchmark runs.
#include <benchmark/benchmark.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#ifdef BACKPLANE_BENCH_NCCL
#include <nccl.h>
#endif

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backbone.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/ops.h"
#include "backplane/runtime/collectives.h"
#include "backplane/runtime/profiler.h"
#include "backplane/runtime/runtime.h"
#include "backplane/runtime/stream.h"
#include "empty_kernel.h"
#include "encoder.h"
#include "lidar_synth.h"
#include "sparse_conv.h"

namespace backplane {
namespace {

constexpr int64_t kAddElements = int64_t{64} << 20;                       // 64M float32: 256 MiB per tensor
constexpr int64_t kAddBytes = 3 * kAddElements * int64_t{sizeof(float)};  // Note [Same bytes moved]
constexpr int64_t kMatmulN = 4096;

// The CPU and CUDA plugins, loaded once, and the device the dispatcher
// benchmarks use: cuda:0, or why there is none.
struct CudaPlugin {
  CudaPlugin() : runtime(options()) {
    for (const PluginStatus& p : runtime.plugins()) {
      if (!p.loaded) skip_reason = "plugin " + p.path + " failed to load: " + p.error;
    }
    if (!skip_reason.empty()) return;
    for (const DeviceInfo& d : runtime.devices()) {
      if (d.device.str() == "cuda:0") device = d.device;
    }
    if (device) return;
    skip_reason = "the cuda plugin reports no device";
    for (const UnavailableDeviceType& u : runtime.unavailable()) {
      if (u.name == "cuda") skip_reason = u.reason;
    }
  }
  static RuntimeOptions options() {
    RuntimeOptions o;
    o.plugin_paths = {BACKPLANE_CPU_PLUGIN_PATH, BACKPLANE_CUDA_PLUGIN_PATH, BACKPLANE_SPCONV_PLUGIN_PATH};
    o.load_default_plugins = false;
    return o;
  }

  Runtime runtime;
  std::optional<Device> device;
  std::string skip_reason;
};

// cuda:0 through the plugin, or nullopt after marking the benchmark skipped.
std::optional<Device> cudaDevice(benchmark::State& state) {
  static CudaPlugin plugin;
  if (!plugin.device) state.SkipWithError(("no CUDA device: " + plugin.skip_reason).c_str());
  return plugin.device;
}

// Marks the benchmark skipped unless `e` is cudaSuccess; a failure to find
// a device (no driver, no GPU) reads like the plugin's.
bool cudaOk(benchmark::State& state, cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  const bool no_device = e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver;
  const std::string why = std::string(what) + " failed: " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
  state.SkipWithError(((no_device ? "no CUDA device: " : "") + why).c_str());
  return false;
}

bool cublasOk(benchmark::State& state, cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return true;
  const std::string why = std::string(what) + " failed: " + cublasGetStatusName(s) + ": " + cublasGetStatusString(s);
  state.SkipWithError(why.c_str());
  return false;
}

// Device 0 made current for the baselines, which call the runtime directly.
bool cudaDeviceReady(benchmark::State& state) {
  int count = 0;
  if (!cudaOk(state, cudaGetDeviceCount(&count), "cudaGetDeviceCount")) return false;
  if (count == 0) {
    state.SkipWithError("no CUDA device: cudaGetDeviceCount reports 0 devices");
    return false;
  }
  return cudaOk(state, cudaSetDevice(0), "cudaSetDevice");
}

// Device memory and a stream for the baselines, released on every path out.
struct DeviceBuffer {
  ~DeviceBuffer() { cudaFree(ptr); }
  void* ptr = nullptr;
};
struct RawStream {
  ~RawStream() {
    if (s != nullptr) cudaStreamDestroy(s);
  }
  cudaStream_t s = nullptr;
};

void synchronize() {
  static auto op = Dispatcher::singleton().findOpOrThrow("cuda::synchronize").typed<void(int64_t)>();
  op.call(0);
}

void BM_Cuda_Add_64M_f32(benchmark::State& state) {
  const std::optional<Device> dev = cudaDevice(state);
  if (!dev) return;
  auto add_out = Dispatcher::singleton()
                     .findOpOrThrow("bp::add.out")
                     .typed<Tensor(const Tensor&, const Tensor&, const Scalar&, const Tensor&)>();
  const TensorOptions opts{.dtype = ScalarType::Float32, .device = *dev};
  Tensor a = full({kAddElements}, Scalar(1.5), opts), b = full({kAddElements}, Scalar(2.5), opts);
  Tensor out = empty({kAddElements}, opts);
  const Scalar one(int64_t{1});
  add_out.call(a, b, one, out);  // warm-up: module load, first launch
  synchronize();
  for (auto _ : state) {
    Tensor r = add_out.call(a, b, one, out);
    benchmark::DoNotOptimize(r);
    synchronize();
  }
  state.SetBytesProcessed(state.iterations() * kAddBytes);
  state.SetItemsProcessed(state.iterations() * kAddElements);
}
BENCHMARK(BM_Cuda_Add_64M_f32)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_Cuda_Memcpy_D2D_64M_f32(benchmark::State& state) {
  if (!cudaDeviceReady(state)) return;
  const size_t bytes = static_cast<size_t>(kAddBytes / 2);  // read + written = add's (Note [Same bytes moved])
  DeviceBuffer src, dst;
  RawStream stream;
  if (!cudaOk(state, cudaMalloc(&src.ptr, bytes), "cudaMalloc") ||
      !cudaOk(state, cudaMalloc(&dst.ptr, bytes), "cudaMalloc") ||
      !cudaOk(state, cudaMemset(src.ptr, 1, bytes), "cudaMemset") ||
      !cudaOk(state, cudaStreamCreateWithFlags(&stream.s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags")) {
    return;
  }
  for (auto _ : state) {
    if (!cudaOk(state, cudaMemcpyAsync(dst.ptr, src.ptr, bytes, cudaMemcpyDeviceToDevice, stream.s),
                "cudaMemcpyAsync") ||
        !cudaOk(state, cudaStreamSynchronize(stream.s), "cudaStreamSynchronize")) {
      break;
    }
  }
  state.SetBytesProcessed(state.iterations() * kAddBytes);
  state.SetItemsProcessed(state.iterations() * kAddElements);
}
BENCHMARK(BM_Cuda_Memcpy_D2D_64M_f32)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_Cuda_Softmax_16Kx4K_f32(benchmark::State& state) {
  const std::optional<Device> dev = cudaDevice(state);
  if (!dev) return;
  auto softmax_out = Dispatcher::singleton()
                         .findOpOrThrow("bp::softmax.int_out")
                         .typed<Tensor(const Tensor&, int64_t, std::optional<ScalarType>, const Tensor&)>();
  constexpr int64_t kRows = 16384, kCols = 4096;
  const TensorOptions opts{.dtype = ScalarType::Float32, .device = *dev};
  Tensor x = randn({kRows, kCols}, opts), out = empty({kRows, kCols}, opts);
  softmax_out.call(x, 1, std::nullopt, out);  // warm-up
  synchronize();
  for (auto _ : state) {
    Tensor r = softmax_out.call(x, 1, std::nullopt, out);
    benchmark::DoNotOptimize(r);
    synchronize();
  }
  state.SetBytesProcessed(state.iterations() * 2 * kRows * kCols * int64_t{sizeof(float)});  // read + written once
  state.SetItemsProcessed(state.iterations() * kRows * kCols);
}
BENCHMARK(BM_Cuda_Softmax_16Kx4K_f32)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_Cuda_Sum_16M_f32(benchmark::State& state) {
  const std::optional<Device> dev = cudaDevice(state);
  if (!dev) return;
  auto sum_out =
      Dispatcher::singleton()
          .findOpOrThrow("bp::sum.IntList_out")
          .typed<Tensor(const Tensor&, std::optional<IntArrayRef>, bool, std::optional<ScalarType>, const Tensor&)>();
  constexpr int64_t kElements = int64_t{16} << 20;
  const TensorOptions opts{.dtype = ScalarType::Float32, .device = *dev};
  Tensor x = randn({kElements}, opts), out = empty({}, opts);
  sum_out.call(x, std::nullopt, false, std::nullopt, out);  // warm-up
  synchronize();
  for (auto _ : state) {
    Tensor r = sum_out.call(x, std::nullopt, false, std::nullopt, out);
    benchmark::DoNotOptimize(r);
    synchronize();
  }
  state.SetBytesProcessed(state.iterations() * kElements * int64_t{sizeof(float)});
  state.SetItemsProcessed(state.iterations() * kElements);
}
BENCHMARK(BM_Cuda_Sum_16M_f32)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_Cuda_Matmul_4096(benchmark::State& state) {
  const std::optional<Device> dev = cudaDevice(state);
  if (!dev) return;
  Dispatcher::singleton().findOpOrThrow("cuda::set_allow_tf32").typed<void(bool)>().call(false);
  auto mm_out =
      Dispatcher::singleton().findOpOrThrow("bp::mm.out").typed<Tensor(const Tensor&, const Tensor&, const Tensor&)>();
  const TensorOptions opts{.dtype = ScalarType::Float32, .device = *dev};
  Tensor a = randn({kMatmulN, kMatmulN}, opts), b = randn({kMatmulN, kMatmulN}, opts);
  Tensor out = empty({kMatmulN, kMatmulN}, opts);
  mm_out.call(a, b, out);  // warm-up: cuBLAS handle creation
  synchronize();
  for (auto _ : state) {
    Tensor r = mm_out.call(a, b, out);
    benchmark::DoNotOptimize(r);
    synchronize();
  }
  state.SetItemsProcessed(state.iterations() * 2 * kMatmulN * kMatmulN * kMatmulN);  // flops
}
BENCHMARK(BM_Cuda_Matmul_4096)->Unit(benchmark::kMillisecond)->UseRealTime();

// Row-major [m, k] @ [k, n] in one cublasSgemm on device buffers, per
// iteration synchronized; items processed are flops. The baseline of every
// GEMM-shaped benchmark here.
void runCublasSgemm(benchmark::State& state, int64_t m, int64_t k, int64_t n) {
  if (!cudaDeviceReady(state)) return;
  const auto bytes = [](int64_t rows, int64_t cols) { return static_cast<size_t>(rows * cols) * sizeof(float); };
  DeviceBuffer a, b, c;
  RawStream stream;
  if (!cudaOk(state, cudaMalloc(&a.ptr, bytes(m, k)), "cudaMalloc") ||
      !cudaOk(state, cudaMalloc(&b.ptr, bytes(k, n)), "cudaMalloc") ||
      !cudaOk(state, cudaMalloc(&c.ptr, bytes(m, n)), "cudaMalloc") ||
      // Any finite values: a GEMM's time does not depend on them (0x3c3c3c3c is about 0.0115).
      !cudaOk(state, cudaMemset(a.ptr, 0x3c, bytes(m, k)), "cudaMemset") ||
      !cudaOk(state, cudaMemset(b.ptr, 0x3c, bytes(k, n)), "cudaMemset") ||
      !cudaOk(state, cudaStreamCreateWithFlags(&stream.s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags")) {
    return;
  }
  cublasHandle_t handle = nullptr;
  if (!cublasOk(state, cublasCreate(&handle), "cublasCreate")) return;
  const float alpha = 1.0f, beta = 0.0f;
  const auto* pa = static_cast<const float*>(a.ptr);
  const auto* pb = static_cast<const float*>(b.ptr);
  auto* pc = static_cast<float*>(c.ptr);
  // Row-major C = A B computed as column-major C^T = B^T A^T, as the plugin
  // does (Note [cuBLAS products]); CUBLAS_DEFAULT_MATH keeps float32 (no TF32).
  const int im = static_cast<int>(m), ik = static_cast<int>(k), in = static_cast<int>(n);
  const auto sgemm = [&] {
    return cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, in, im, ik, &alpha, pb, in, pa, ik, &beta, pc, in);
  };
  if (cublasOk(state, cublasSetStream(handle, stream.s), "cublasSetStream") &&
      cublasOk(state, cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH), "cublasSetMathMode") &&
      cublasOk(state, sgemm(), "cublasSgemm") &&  // warm-up: kernel selection
      cudaOk(state, cudaStreamSynchronize(stream.s), "cudaStreamSynchronize")) {
    for (auto _ : state) {
      if (!cublasOk(state, sgemm(), "cublasSgemm") ||
          !cudaOk(state, cudaStreamSynchronize(stream.s), "cudaStreamSynchronize")) {
        break;
      }
    }
    state.SetItemsProcessed(state.iterations() * 2 * m * k * n);  // flops
  }
  cublasDestroy(handle);
}

void BM_Cublas_Sgemm_4096(benchmark::State& state) { runCublasSgemm(state, kMatmulN, kMatmulN, kMatmulN); }
BENCHMARK(BM_Cublas_Sgemm_4096)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Cuda_Add_Tiny_EndToEnd(benchmark::State& state) {
  const std::optional<Device> dev = cudaDevice(state);
  if (!dev) return;
  auto add = Dispatcher::singleton()
                 .findOpOrThrow("bp::add.Tensor")
                 .typed<Tensor(const Tensor&, const Tensor&, const Scalar&)>();
  const TensorOptions opts{.dtype = ScalarType::Float32, .device = *dev};
  Tensor a = full({1}, Scalar(1.5), opts), b = full({1}, Scalar(2.5), opts);
  const Scalar one(int64_t{1});
  add.call(a, b, one);  // warm-up
  synchronize();
  for (auto _ : state) {  // Note [Timing launches]
    Tensor r = add.call(a, b, one);
    benchmark::DoNotOptimize(r);
  }
  synchronize();
  state.SetItemsProcessed(state.iterations());  // calls
}
BENCHMARK(BM_Cuda_Add_Tiny_EndToEnd)->UseRealTime();

void BM_Cuda_EmptyKernelLaunch(benchmark::State& state) {
  if (!cudaDeviceReady(state)) return;
  RawStream stream;
  if (!cudaOk(state, cudaStreamCreateWithFlags(&stream.s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags") ||
      !cudaOk(state, bench::launchEmptyKernel(stream.s), "launchEmptyKernel") ||  // warm-up: module load
      !cudaOk(state, cudaStreamSynchronize(stream.s), "cudaStreamSynchronize")) {
    return;
  }
  for (auto _ : state) {  // Note [Timing launches]
    if (!cudaOk(state, bench::launchEmptyKernel(stream.s), "launchEmptyKernel")) break;
  }
  cudaOk(state, cudaStreamSynchronize(stream.s), "cudaStreamSynchronize");
  state.SetItemsProcessed(state.iterations());  // launches
}
BENCHMARK(BM_Cuda_EmptyKernelLaunch)->UseRealTime();

void BM_Cuda_EncoderLayer_f32(benchmark::State& state) {
  const std::optional<Device> dev = cudaDevice(state);
  if (!dev) return;
  Dispatcher::singleton().findOpOrThrow("cuda::set_allow_tf32").typed<void(bool)>().call(false);
  const encoder::EncoderConfig config;  // BERT-base, batch 8 x 128
  const encoder::EncoderWeights weights = encoder::EncoderWeights::random(config, 0).to(*dev);
  const encoder::EncoderBatch batch = encoder::EncoderBatch::random(config, 0).to(*dev);
  encoder::encoderLayer(weights, batch);  // warm-up: the caching allocator, cuBLAS
  synchronize();
  for (auto _ : state) {
    Tensor out = encoder::encoderLayer(weights, batch);
    benchmark::DoNotOptimize(out);
    synchronize();
  }
  state.SetItemsProcessed(state.iterations() * config.batch * config.seq);  // tokens
}
BENCHMARK(BM_Cuda_EncoderLayer_f32)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_Cuda_EncoderLayer_Graph_f32(benchmark::State& state) {
  const std::optional<Device> dev = cudaDevice(state);
  if (!dev) return;
  Dispatcher::singleton().findOpOrThrow("cuda::set_allow_tf32").typed<void(bool)>().call(false);
  const encoder::EncoderConfig config;
  const encoder::EncoderWeights weights = encoder::EncoderWeights::random(config, 0).to(*dev);
  const encoder::EncoderBatch batch = encoder::EncoderBatch::random(config, 0).to(*dev);
  encoder::encoderLayer(weights, batch);  // warm-up: the caching allocator, cuBLAS's handle and workspace
  synchronize();
  const Stream side = Stream::create(*dev);
  Tensor out;
  const Graph layer = Graph::capture(side, [&] { out = encoder::encoderLayer(weights, batch); });
  layer.replay();
  side.synchronize();
  for (auto _ : state) {
    layer.replay();
    side.synchronize();
  }
  benchmark::DoNotOptimize(out);
  state.SetItemsProcessed(state.iterations() * config.batch * config.seq);
}
BENCHMARK(BM_Cuda_EncoderLayer_Graph_f32)->Unit(benchmark::kMicrosecond)->UseRealTime();

// The layer's forward recording its graph, then backward into the input's and
// every weight's grad (bench/autograd_bench.cc's BM_EncoderLayer_ForwardBackward
// on cuda:0); synchronized per iteration. The grads are reset each iteration,
// so every backward writes them fresh rather than accumulating.
void BM_Cuda_EncoderLayer_ForwardBackward_f32(benchmark::State& state) {
  const std::optional<Device> dev = cudaDevice(state);
  if (!dev) return;
  Dispatcher::singleton().findOpOrThrow("cuda::set_allow_tf32").typed<void(bool)>().call(false);
  const encoder::EncoderConfig config;
  const encoder::BlockGradients block(encoder::EncoderWeights::random(config, 7).to(*dev),
                                      encoder::EncoderBatch::random(config, 7).to(*dev), 1.0 / 1024);
  block.step();  // warm-up: the caching allocator, cuBLAS's handle and workspace
  synchronize();
  for (auto _ : state) {
    block.step();
    synchronize();
  }
  state.SetItemsProcessed(state.iterations() * config.batch * config.seq);
  // One more step, each op synchronized: where the time goes (printed once, on
  // stderr) and how many calls fell back to the CPU (the counter; 0 expected).
  Profiler profiler({.synchronize_device = true});
  block.step();
  profiler.stop();
  const OpReport report = profiler.report();
  uint64_t fallbacks = 0;
  for (const OpStats& op : report.ops) fallbacks += op.fallbackCalls();
  state.counters["fallback_calls"] = static_cast<double>(fallbacks);
  static bool printed = false;
  if (!std::exchange(printed, true)) std::fprintf(stderr, "%s\n", report.table().c_str());
}
BENCHMARK(BM_Cuda_EncoderLayer_ForwardBackward_f32)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_Cuda_ResNetBlock_f32(benchmark::State& state) {
  const std::optional<Device> dev = cudaDevice(state);
  if (!dev) return;
  Dispatcher::singleton().findOpOrThrow("cuda::set_allow_tf32").typed<void(bool)>().call(false);
  using BatchNormSig = Tensor(const Tensor&, const std::optional<Tensor>&, const std::optional<Tensor>&,
                              const std::optional<Tensor>&, const std::optional<Tensor>&, bool, double, double, bool);
  auto batch_norm = Dispatcher::singleton().findOpOrThrow("bp::batch_norm").typed<BatchNormSig>();
  constexpr int64_t kN = 32, kC = 64, kHW = 56;
  const TensorOptions opts{.dtype = ScalarType::Float32, .device = *dev};
  const Tensor x = randn({kN, kC, kHW, kHW}, opts);
  const Tensor w1 = randn({kC, kC, 3, 3}, opts).mul(0.05), w2 = randn({kC, kC, 3, 3}, opts).mul(0.05);
  struct Norm {
    std::optional<Tensor> weight, bias, mean, var;
  };
  auto norm = [&] { return Norm{randn({kC}, opts), randn({kC}, opts), randn({kC}, opts), rand({kC}, opts).add(0.5)}; };
  const Norm bn1 = norm(), bn2 = norm();
  const std::vector<int64_t> one{1, 1};
  auto block = [&] {
    Tensor y = conv2d(x, w1, std::nullopt, one, one, one, 1);
    y = relu(batch_norm.call(y, bn1.weight, bn1.bias, bn1.mean, bn1.var, false, 0.1, 1e-5, true));
    y = conv2d(y, w2, std::nullopt, one, one, one, 1);
    y = batch_norm.call(y, bn2.weight, bn2.bias, bn2.mean, bn2.var, false, 0.1, 1e-5, true);
    return relu(y.add(x));
  };
  block();  // warm-up
  synchronize();
  for (auto _ : state) {
    Tensor y = block();
    benchmark::DoNotOptimize(y);
    synchronize();
  }
  // Two convolutions' multiply-adds, 2 flops each.
  state.SetItemsProcessed(state.iterations() * 2 * 2 * kN * kC * kC * 9 * kHW * kHW);
}
BENCHMARK(BM_Cuda_ResNetBlock_f32)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_Cuda_Softmax_LayerNorm(benchmark::State& state) {
  const std::optional<Device> dev = cudaDevice(state);
  if (!dev) return;
  using SoftmaxOutSig = Tensor(const Tensor&, int64_t, std::optional<ScalarType>, const Tensor&);
  auto softmax_out = Dispatcher::singleton().findOpOrThrow("bp::softmax.int_out").typed<SoftmaxOutSig>();
  const TensorOptions opts{.dtype = ScalarType::Float32, .device = *dev};
  Tensor scores = randn({8, 12, 128, 128}, opts), probs = empty({8, 12, 128, 128}, opts);
  Tensor x = randn({8, 128, 768}, opts), gamma = randn({768}, opts), beta = randn({768}, opts);
  softmax_out.call(scores, -1, std::nullopt, probs);  // warm-up
  layer_norm(x, {768}, gamma, beta, 1e-12);
  synchronize();
  for (auto _ : state) {
    Tensor p = softmax_out.call(scores, -1, std::nullopt, probs);
    Tensor y = layer_norm(x, {768}, gamma, beta, 1e-12);
    benchmark::DoNotOptimize(p);
    benchmark::DoNotOptimize(y);
    synchronize();
  }
  // Each reads its input once and writes its output once (the parameters are negligible).
  state.SetBytesProcessed(state.iterations() * 2 * (scores.nbytes() + x.nbytes()));
}
BENCHMARK(BM_Cuda_Softmax_LayerNorm)->Unit(benchmark::kMicrosecond)->UseRealTime();

// ------------------------------------------------------- sparse convolution

// The scans of bench/spconv (the same seed and settings), so the CPU and
// CUDA figures are of the same work.
const sparse_lidar::VoxelScan& kittiScan() {
  static const sparse_lidar::VoxelScan scan = sparse_lidar::syntheticKittiScan(0);
  return scan;
}
const sparse_lidar::VoxelScan& denseScan() {
  static const sparse_lidar::VoxelScan scan = sparse_lidar::syntheticKittiScan(0, 1, {.azimuth_step_deg = 0.14});
  return scan;
}

// One sparse convolution on kittiScan() on cuda:0: input, filters and the
// rulebook (built on the device), and its GEMM work.
struct SparseConvCase {
  SparseConvCase(Device dev, int64_t cin, int64_t cout, sparse_lidar::ConvGeometry g, bool subm) {
    const sparse_lidar::VoxelScan& scan = kittiScan();
    input = sparse_lidar::SparseTensor::fromScan(scan, dev);
    const TensorOptions opts{.dtype = ScalarType::Float32, .device = dev};
    input.features = randn({scan.numVoxels(), cin}, opts);
    filters = randn({3, 3, 3, cin, cout}, opts);
    rulebook = sparse_lidar::buildRulebook(input, g, subm);
    pairs = rulebook.totalPairs();
    in_channels = cin;
    out_channels = cout;
  }
  sparse_lidar::SparseTensor input;
  Tensor filters;
  sparse_lidar::Rulebook rulebook;
  int64_t pairs = 0, in_channels = 0, out_channels = 0;
};

const sparse_lidar::ConvGeometry kSubm3{.padding = {1, 1, 1}};
const sparse_lidar::ConvGeometry kStride2{.stride = {2, 2, 2}, .padding = {1, 1, 1}};

void runSparseConv(benchmark::State& state, int64_t cin, int64_t cout, const sparse_lidar::ConvGeometry& g, bool subm) {
  const std::optional<Device> dev = cudaDevice(state);
  if (!dev) return;
  const SparseConvCase c(*dev, cin, cout, g, subm);
  benchmark::DoNotOptimize(sparse_lidar::applyConv(c.input, c.filters, c.rulebook));  // warm-up
  synchronize();
  for (auto _ : state) {
    sparse_lidar::SparseTensor out = sparse_lidar::applyConv(c.input, c.filters, c.rulebook);
    benchmark::DoNotOptimize(out);
    synchronize();
  }
  state.SetItemsProcessed(state.iterations() * 2 * c.pairs * cin * cout);  // flops of the GEMM work
  state.counters["pairs"] = static_cast<double>(c.pairs);
}

// The baseline: the same GEMM work as that convolution in one cublasSgemm.
void runSparseConvGemmWork(benchmark::State& state, int64_t cin, int64_t cout, const sparse_lidar::ConvGeometry& g,
                           bool subm) {
  const std::optional<Device> dev = cudaDevice(state);
  if (!dev) return;
  const int64_t pairs = SparseConvCase(*dev, cin, cout, g, subm).pairs;
  runCublasSgemm(state, pairs, cin, cout);
  state.counters["pairs"] = static_cast<double>(pairs);
}

void BM_Cuda_SubmConv3x3x3_C64(benchmark::State& state) { runSparseConv(state, 64, 64, kSubm3, true); }
void BM_Cublas_Sgemm_SubmConv3x3x3_C64(benchmark::State& state) { runSparseConvGemmWork(state, 64, 64, kSubm3, true); }
void BM_Cuda_SparseConv3x3x3_Stride2_C32(benchmark::State& state) { runSparseConv(state, 32, 32, kStride2, false); }
void BM_Cublas_Sgemm_SparseConv3x3x3_Stride2_C32(benchmark::State& state) {
  runSparseConvGemmWork(state, 32, 32, kStride2, false);
}
BENCHMARK(BM_Cuda_SubmConv3x3x3_C64)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Cublas_Sgemm_SubmConv3x3x3_C64)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Cuda_SparseConv3x3x3_Stride2_C32)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Cublas_Sgemm_SparseConv3x3x3_Stride2_C32)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_Cuda_RulebookSubm_40k(benchmark::State& state) {
  const std::optional<Device> dev = cudaDevice(state);
  if (!dev) return;
  const sparse_lidar::SparseTensor input = sparse_lidar::SparseTensor::fromScan(denseScan(), *dev);
  benchmark::DoNotOptimize(sparse_lidar::buildRulebook(input, kSubm3, true));  // warm-up
  synchronize();
  for (auto _ : state) {
    sparse_lidar::Rulebook r = sparse_lidar::buildRulebook(input, kSubm3, true);
    benchmark::DoNotOptimize(r);
    synchronize();
  }
  state.counters["voxels"] = static_cast<double>(input.numVoxels());
}
BENCHMARK(BM_Cuda_RulebookSubm_40k)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_Cuda_LidarBackbone(benchmark::State& state) {
  const std::optional<Device> dev = cudaDevice(state);
  if (!dev) return;
  const sparse_lidar::VoxelScan& scan = kittiScan();
  const sparse_lidar::BackboneWeights weights =
      sparse_lidar::BackboneWeights::random(sparse_lidar::voxelBackBone8x(scan.channels), 0).to(*dev);
  const sparse_lidar::SparseTensor input = sparse_lidar::SparseTensor::fromScan(scan, *dev);
  benchmark::DoNotOptimize(sparse_lidar::runBackbone(weights, input));  // warm-up
  synchronize();
  for (auto _ : state) {
    sparse_lidar::SparseTensor out = sparse_lidar::runBackbone(weights, input);
    benchmark::DoNotOptimize(out);
    synchronize();
  }
  state.counters["voxels"] = static_cast<double>(scan.numVoxels());
}
BENCHMARK(BM_Cuda_LidarBackbone)->Unit(benchmark::kMillisecond)->UseRealTime();

#ifdef BACKPLANE_BENCH_NCCL
void BM_Cuda_AllReduce(benchmark::State& state) {
  const std::optional<Device> dev = cudaDevice(state);
  if (!dev) return;
  Tensor t = full({state.range(0)}, Scalar(1.0), {.dtype = ScalarType::Float32, .device = *dev});
  try {
    comm::allReduce_(t);  // warm-up: NCCL opened, the communicator made
  } catch (const Error& e) {
    state.SkipWithError(("no NCCL engine: " + std::string(e.what())).c_str());
    return;
  }
  synchronize();
  for (auto _ : state) {
    comm::allReduce_(t);
    synchronize();
  }
  state.SetBytesProcessed(state.iterations() * state.range(0) * 4);
}
BENCHMARK(BM_Cuda_AllReduce)->Arg(2)->Arg(16 << 20)->UseRealTime();

// NCCL opened as the plugin opens it (BACKPLANE_NCCL_LIBRARY, else libnccl.so.2).
template <class F>
F ncclSymbol(void* lib, const char* name) {
  return reinterpret_cast<F>(dlsym(lib, name));
}

void BM_Nccl_AllReduce(benchmark::State& state) {
  if (!cudaDeviceReady(state)) return;
  const char* env = std::getenv("BACKPLANE_NCCL_LIBRARY");
  void* lib = dlopen(env != nullptr && *env ? env : "libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    state.SkipWithError((std::string("NCCL could not be opened: ") + dlerror()).c_str());
    return;
  }
  auto get_id = ncclSymbol<decltype(&ncclGetUniqueId)>(lib, "ncclGetUniqueId");
  auto init = ncclSymbol<decltype(&ncclCommInitRank)>(lib, "ncclCommInitRank");
  auto all_reduce = ncclSymbol<decltype(&ncclAllReduce)>(lib, "ncclAllReduce");
  auto destroy = ncclSymbol<decltype(&ncclCommDestroy)>(lib, "ncclCommDestroy");
  const size_t n = static_cast<size_t>(state.range(0));
  DeviceBuffer buf;
  RawStream stream;
  ncclUniqueId id;
  ncclComm_t comm = nullptr;
  if (!cudaOk(state, cudaMalloc(&buf.ptr, n * sizeof(float)), "cudaMalloc") ||
      !cudaOk(state, cudaStreamCreateWithFlags(&stream.s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags"))
    return;
  if (get_id(&id) != ncclSuccess || init(&comm, 1, id, 0) != ncclSuccess) {
    state.SkipWithError("ncclCommInitRank failed");
    return;
  }
  for (auto _ : state) {
    if (all_reduce(buf.ptr, buf.ptr, n, ncclFloat32, ncclSum, comm, stream.s) != ncclSuccess ||
        !cudaOk(state, cudaStreamSynchronize(stream.s), "cudaStreamSynchronize")) {
      state.SkipWithError("ncclAllReduce failed");
      break;
    }
  }
  destroy(comm);
  state.SetBytesProcessed(state.iterations() * state.range(0) * 4);
}
BENCHMARK(BM_Nccl_AllReduce)->Arg(2)->Arg(16 << 20)->UseRealTime();
#endif

}  // namespace
}  // namespace backplane

BENCHMARK_MAIN();
