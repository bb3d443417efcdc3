// The SIMT simulator (plugins/gpu/sim) on its own: kernels written as for
// CUDA, launched through gpu_port.h's bp_gpu::launch, checked on the host.
// Compiled with BP_GPU_SIM, like the gpusim plugin, but without the host:
// this is the semantics every kernel of the plugins relies on in CI.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "float16_test_cases.h"  // plugin_sdk/tests
#include "gpu/gpu_port.h"

#if defined(BP_GPU_SIM_ASAN)  // sim/simt.h, through gpu_port.h
#include <sanitizer/asan_interface.h>
#endif

namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// Block-wide sum in static shared memory: thread 0 of each block writes the
// sum of the block's inputs. Needs the barrier to order writes and reads.
template <int kThreads>
__global__ void blockSum(const int* in, int* out, int n) {
  __shared__ int partial[kThreads];
  const unsigned t = threadIdx.x;
  const unsigned i = blockIdx.x * blockDim.x + t;
  partial[t] = i < static_cast<unsigned>(n) ? in[i] : 0;
  __syncthreads();
  for (unsigned stride = kThreads / 2; stride > 0; stride /= 2) {
    if (t < stride) partial[t] += partial[t + stride];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = partial[0];
}

TEST(Simt, SharedMemoryBarrierReduction) {
  constexpr int kThreads = 128;
  const int n = 1000;
  std::vector<int> in(n);
  std::iota(in.begin(), in.end(), 1);
  const int blocks = (n + kThreads - 1) / kThreads;
  std::vector<int> out(blocks, -1);
  bp_gpu::launch(&blockSum<kThreads>, blocks, kThreads, 0, nullptr, in.data(), out.data(), n);
  for (int b = 0; b < blocks; ++b) {
    int want = 0;
    for (int i = b * kThreads; i < std::min(n, (b + 1) * kThreads); ++i) want += in[i];
    EXPECT_EQ(out[b], want) << "block " << b;
  }
}

// Reverses each block's slice through dynamic shared memory.
__global__ void reverseInBlock(const float* in, float* out) {
  float* tile = bp_gpu::dynamicShared<float>();
  const unsigned t = threadIdx.x;
  const unsigned base = blockIdx.x * blockDim.x;
  tile[t] = in[base + t];
  __syncthreads();
  out[base + t] = tile[blockDim.x - 1 - t];
}

TEST(Simt, DynamicSharedMemory) {
  const int threads = 64, blocks = 3;
  std::vector<float> in(threads * blocks), out(in.size());
  std::iota(in.begin(), in.end(), 0.0f);
  bp_gpu::launch(&reverseInBlock, blocks, threads, threads * sizeof(float), nullptr, in.data(), out.data());
  for (int b = 0; b < blocks; ++b) {
    for (int t = 0; t < threads; ++t) EXPECT_EQ(out[b * threads + t], in[b * threads + threads - 1 - t]);
  }
}

// Every thread of every block adds into the same counters.
__global__ void countThreads(unsigned long long* count, float* fsum, int* imax) {
  const unsigned linear = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  const unsigned block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  atomicAdd(count, 1ull);
  atomicAdd(fsum, 0.5f);
  atomicMax(imax, static_cast<int>(block * 1000 + linear));
}

TEST(Simt, AtomicsAndThreeDimensionalIndices) {
  unsigned long long count = 0;
  float fsum = 0;
  int imax = -1;
  const dim3 grid(2, 3, 2), block(4, 2, 3);
  bp_gpu::launch(&countThreads, grid, block, 0, nullptr, &count, &fsum, &imax);
  EXPECT_EQ(count, 12u * 24u);
  EXPECT_EQ(fsum, 0.5f * 12 * 24);
  EXPECT_EQ(imax, 11 * 1000 + 23);
}

__global__ void barrierInBranch(int* out) {
  if (threadIdx.x < 16) {
    __syncthreads();
  }
  out[threadIdx.x] = 1;
}

__global__ void twoBarrierSites(int* out) {
  if (threadIdx.x % 2 == 0) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1;
}

__global__ void barrierSkippedByThreadZero(int* out) {
  if (threadIdx.x > 0) __syncthreads();
  out[threadIdx.x] = 1;
}

TEST(Simt, DivergentBarrierIsAnErrorNamingKernelBlockAndThread) {
  std::vector<int> out(32);
  try {
    bp_gpu::launch(&barrierInBranch, 2, 32, 0, nullptr, out.data());
    FAIL() << "a barrier only half the block reaches must be reported";
  } catch (const bp::Error& e) {
    EXPECT_THAT(e.message(),
                AllOf(HasSubstr("divergent barrier"), HasSubstr("barrierInBranch"), HasSubstr("block (0,0,0)"),
                      HasSubstr("thread (16,0,0) exited"), HasSubstr("simt_test.cc")));
  }
  try {
    bp_gpu::launch(&twoBarrierSites, 1, 8, 0, nullptr, out.data());
    FAIL() << "threads waiting at two different barriers must be reported";
  } catch (const bp::Error& e) {
    EXPECT_THAT(e.message(), AllOf(HasSubstr("divergent barrier"), HasSubstr("thread (1,0,0) waits at")));
  }
  // Thread 0 skips the barrier, so the other threads run on the host stack
  // (Note [Blocks without barriers]); the first that reaches it is reported
  // the same way, and no thread after it runs.
  std::fill(out.begin(), out.end(), 0);
  try {
    bp_gpu::launch(&barrierSkippedByThreadZero, 1, 8, 0, nullptr, out.data());
    FAIL() << "a barrier thread 0 skips must be reported";
  } catch (const bp::Error& e) {
    EXPECT_THAT(e.message(),
                AllOf(HasSubstr("divergent barrier"), HasSubstr("barrierSkippedByThreadZero"),
                      HasSubstr("thread (1,0,0) waits at"), HasSubstr("thread (0,0,0) exited without reaching it")));
  }
  EXPECT_EQ(out[0], 1);
  EXPECT_EQ(std::count(out.begin() + 1, out.end(), 1), 0);
  // The simulator recovers: the next launch on this thread runs normally.
  std::vector<int> in(128, 1), sums(1);
  bp_gpu::launch(&blockSum<128>, 1, 128, 0, nullptr, in.data(), sums.data(), 128);
  EXPECT_EQ(sums[0], 128);
}

__global__ void noop(int*) {}

TEST(Simt, LaunchLimitsAreEnforced) {
  // The kernel is named by its type, nothing after it (GCC's __PRETTY_FUNCTION__ appends typedefs).
  EXPECT_THAT([] { bp_gpu::launch(&noop, 1, 1025, 0, nullptr, nullptr); },
              ::testing::ThrowsMessage<bp::Error>(AllOf(HasSubstr("gpusim: kernel void (*)(int*) launched with block"),
                                                        HasSubstr("1025 threads"), HasSubstr("at most 1024"))));
  EXPECT_THAT([] { bp_gpu::launch(&noop, 1, dim3(32, 32, 2), 0, nullptr, nullptr); },
              ::testing::ThrowsMessage<bp::Error>(HasSubstr("2048 threads")));
  EXPECT_THAT([] { bp_gpu::launch(&noop, 1, 32, 64 * 1024, nullptr, nullptr); },
              ::testing::ThrowsMessage<bp::Error>(HasSubstr("dynamic shared memory")));
  // An empty grid launches nothing (CUDA would refuse it).
  bp_gpu::launch(&noop, 0, 32, 0, nullptr, nullptr);
}

// Blocks run one after another: 1024-thread blocks with several barriers
// over many blocks, the largest configuration kernels use.
__global__ void prefixInBlock(int* data) {
  __shared__ int buf[1024];
  const unsigned t = threadIdx.x;
  buf[t] = data[blockIdx.x * 1024 + t];
  __syncthreads();
  for (unsigned offset = 1; offset < 1024; offset *= 2) {
    const int add = t >= offset ? buf[t - offset] : 0;
    __syncthreads();
    buf[t] += add;
    __syncthreads();
  }
  data[blockIdx.x * 1024 + t] = buf[t];
}

TEST(Simt, FullBlocksWithManyBarriers) {
  const int blocks = 4;
  std::vector<int> data(blocks * 1024, 1);
  bp_gpu::launch(&prefixInBlock, blocks, 1024, 0, nullptr, data.data());
  for (int b = 0; b < blocks; ++b) {
    EXPECT_EQ(data[b * 1024], 1);
    EXPECT_EQ(data[b * 1024 + 1023], 1024);
  }
}

// A host thread's fibers (their stacks mmap'd) are unmapped when it exits.
// Their last frames are still poisoned for AddressSanitizer then, and
// munmap leaves shadow memory as it is, so memory mapped there later (the
// sanitizer's own symbolizer buffers at exit, in one CI run) reported a
// stack-buffer-underflow on first use. The thread's exit must leave no
// poisoned shadow behind: the stacks' addresses are taken again by fresh
// mappings, made with the raw system call as the sanitizer's own are (a
// runtime that intercepts mmap would clear the shadow of its callers'), in
// chunks smaller than a stack, none of which may read as poisoned.
TEST(Simt, AHostThreadThatLaunchedLeavesNoPoisonedMemoryWhenItExits) {
#if !defined(BP_GPU_SIM_ASAN)
  GTEST_SKIP() << "checks AddressSanitizer's shadow memory; this build has none";
#else
  constexpr int kThreads = 1024;
  std::vector<int> in(kThreads, 1), out(1, -1);
  std::thread([&] {
    bp_gpu::launch(&blockSum<kThreads>, 1, kThreads, 0, nullptr, in.data(), out.data(), kThreads);
  }).join();
  ASSERT_EQ(out[0], kThreads);
  constexpr size_t kChunk = 64 * 1024;        // divides every fiber stack size
  constexpr size_t kCover = size_t{1} << 30;  // twice the 1024 stacks of 512 KiB an ASan build maps
  std::vector<void*> maps;
  for (size_t mapped = 0; mapped < kCover; mapped += kChunk) {
    const long p =
        syscall(SYS_mmap, nullptr, kChunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    ASSERT_NE(reinterpret_cast<void*>(p), MAP_FAILED);
    maps.push_back(reinterpret_cast<void*>(p));
  }
  size_t poisoned = 0;
  for (void* p : maps) {
    if (__asan_region_is_poisoned(p, kChunk) != nullptr) ++poisoned;
    syscall(SYS_munmap, p, kChunk);
  }
  EXPECT_EQ(poisoned, 0u) << "of " << maps.size() << " fresh mappings of " << kChunk << " bytes";
#endif
}

// Note [Deferred streams in the simulator]: a deferred stream's work runs
// only when forced, in order; an event wait orders it across streams.
__global__ void addTo(int* data, int n, int value) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) data[i] += value;
}

TEST(SimStreams, DeferredWorkRunsWhenForcedAndInOrder) {
  gpuStream_t s = nullptr;
  ASSERT_EQ(gpuStreamCreateWithFlags(&s, gpuStreamNonBlocking | gpusimStreamDeferred), gpuSuccess);
  std::vector<int> data(100, 1);
  bp_gpu::launch(&addTo, 1, 128, 0, s, data.data(), 100, 2);
  ASSERT_EQ(gpuMemsetAsync(data.data(), 0, sizeof(int), s), gpuSuccess);
  bp_gpu::launch(&addTo, 1, 128, 0, s, data.data(), 100, 10);
  EXPECT_EQ(data[0], 1) << "queued work ran before it was forced";
  gpuEvent_t e = nullptr;
  ASSERT_EQ(gpuEventCreateWithFlags(&e, gpuEventDisableTiming), gpuSuccess);
  ASSERT_EQ(gpuEventRecord(e, s), gpuSuccess);
  EXPECT_EQ(gpuEventQuery(e), gpuErrorNotReady);
  ASSERT_EQ(gpuEventSynchronize(e), gpuSuccess);
  EXPECT_EQ(gpuEventQuery(e), gpuSuccess);
  EXPECT_EQ(data[0], 10);  // +2, zeroed, +10: in order
  EXPECT_EQ(data[99], 13);
  EXPECT_EQ(gpuEventDestroy(e), gpuSuccess);
  EXPECT_EQ(gpuStreamDestroy(s), gpuSuccess);
}

TEST(SimStreams, AWaitingStreamRunsTheWorkBeforeTheEventFirst) {
  gpuStream_t producer = nullptr, consumer = nullptr, sync_stream = nullptr;
  ASSERT_EQ(gpuStreamCreateWithFlags(&producer, gpusimStreamDeferred), gpuSuccess);
  ASSERT_EQ(gpuStreamCreateWithFlags(&consumer, gpusimStreamDeferred), gpuSuccess);
  ASSERT_EQ(gpuStreamCreateWithFlags(&sync_stream, gpuStreamNonBlocking), gpuSuccess);
  std::vector<int> a(10, 0), b(10, 0);
  gpuEvent_t e = nullptr;
  ASSERT_EQ(gpuEventCreateWithFlags(&e, 0), gpuSuccess);
  bp_gpu::launch(&addTo, 1, 32, 0, producer, a.data(), 10, 5);
  ASSERT_EQ(gpuEventRecord(e, producer), gpuSuccess);
  bp_gpu::launch(&addTo, 1, 32, 0, producer, a.data(), 10, 100);  // after the event: not waited for
  ASSERT_EQ(gpuStreamWaitEvent(consumer, e, 0), gpuSuccess);
  ASSERT_EQ(gpuMemcpyAsync(b.data(), a.data(), 10 * sizeof(int), gpuMemcpyDeviceToDevice, consumer), gpuSuccess);
  EXPECT_EQ(gpuEventDestroy(e), gpuSuccess) << "a wait keeps the point it was queued for";
  ASSERT_EQ(gpuStreamSynchronize(consumer), gpuSuccess);
  EXPECT_EQ(b[0], 5) << "the consumer copied before the producer's first kernel, or after its second";
  EXPECT_EQ(a[0], 5);
  // A synchronous stream is never deferred; its wait runs the rest now.
  bp_gpu::launch(&addTo, 1, 32, 0, sync_stream, b.data(), 10, 1);
  EXPECT_EQ(b[0], 6);
  ASSERT_EQ(gpuDeviceSynchronize(), gpuSuccess);
  EXPECT_EQ(a[0], 105);
  for (gpuStream_t s : {producer, consumer, sync_stream}) EXPECT_EQ(gpuStreamDestroy(s), gpuSuccess);
}

TEST(SimStreams, AKernelErrorSurfacesFromTheCallThatRunsIt) {
  gpuStream_t s = nullptr;
  ASSERT_EQ(gpuStreamCreateWithFlags(&s, gpusimStreamDeferred), gpuSuccess);
  std::vector<int> out(64);
  bp_gpu::launch(&barrierInBranch, 1, 32, 0, s, out.data());  // queued: no error yet
  EXPECT_THAT([&] { (void)gpuStreamSynchronize(s); },
              ::testing::ThrowsMessage<bp::Error>(HasSubstr("divergent barrier")));
  EXPECT_EQ(gpuStreamSynchronize(s), gpuSuccess) << "reported once";
  EXPECT_EQ(gpuStreamDestroy(s), gpuSuccess);
}

// The 16-bit conversions in kernels: out[i] = fromFloat<T>(in[i]) and
// out[i] = toFloat(in[i]), as the plugins' cast and elementwise kernels do.
template <class T>
__global__ void fromFloatKernel(const float* in, T* out, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = bp_gpu::fromFloat<T>(in[i]);
}
template <class T>
__global__ void toFloatKernel(const T* in, float* out, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = bp_gpu::toFloat(in[i]);
}

// Runs fromFloatKernel<T> over float bit patterns; the 16-bit results' bits.
template <class T>
std::vector<uint16_t> fromFloatOnTheSimulator(const std::vector<uint32_t>& float_bits) {
  const int n = static_cast<int>(float_bits.size());
  std::vector<float> in(float_bits.size());
  std::memcpy(in.data(), float_bits.data(), in.size() * sizeof(float));
  std::vector<T> out(in.size(), T{0xdead});
  bp_gpu::launch(&fromFloatKernel<T>, (n + 255) / 256, 256, 0, nullptr, in.data(), out.data(), n);
  std::vector<uint16_t> bits;
  for (T v : out) bits.push_back(v.bits);
  return bits;
}
template <class T>
std::vector<uint32_t> toFloatOnTheSimulator(const std::vector<uint16_t>& bits) {
  const int n = static_cast<int>(bits.size());
  std::vector<T> in;
  for (uint16_t b : bits) in.push_back(T{b});
  std::vector<float> out(in.size(), -1.0f);
  bp_gpu::launch(&toFloatKernel<T>, (n + 255) / 256, 256, 0, nullptr, in.data(), out.data(), n);
  std::vector<uint32_t> float_bits(out.size());
  std::memcpy(float_bits.data(), out.data(), out.size() * sizeof(float));
  return float_bits;
}

TEST(Simt, HalfAndBFloat16InKernelsFollowTheRuleEveryLayerShares) {
  // The same cases and sweeps as core's and the SDK's types meet (Note
  // [16-bit float conversions]): what a kernel converts, the host reads back
  // unchanged.
  float16_test::Float16Conversions c;
  c.half_from_float = &fromFloatOnTheSimulator<bp_gpu::Half>;
  c.bfloat16_from_float = &fromFloatOnTheSimulator<bp_gpu::BFloat16>;
  c.float_from_half = &toFloatOnTheSimulator<bp_gpu::Half>;
  c.float_from_bfloat16 = &toFloatOnTheSimulator<bp_gpu::BFloat16>;
  float16_test::expectFloat16ConversionsFollowTheRule(c);
}

TEST(Simt, HalfAndBFloat16GiveTheSdkTypesBits) {
  for (const float16_test::FromFloatCase& k : float16_test::kFromFloatCases) {
    float f;
    std::memcpy(&f, &k.float_bits, sizeof f);
    EXPECT_EQ(bp_gpu::fromFloat<bp_gpu::Half>(f).bits, bp::Half(f).bits) << k.what;
    EXPECT_EQ(bp_gpu::fromFloat<bp_gpu::BFloat16>(f).bits, bp::BFloat16(f).bits) << k.what;
  }
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    uint32_t gpu, sdk;
    float f = bp_gpu::toFloat(bp_gpu::Half{h});
    std::memcpy(&gpu, &f, sizeof gpu);
    f = bp::Half::fromBits(h);
    std::memcpy(&sdk, &f, sizeof sdk);
    ASSERT_EQ(gpu, sdk) << "float16 " << std::hex << b;
    f = bp_gpu::toFloat(bp_gpu::BFloat16{h});
    std::memcpy(&gpu, &f, sizeof gpu);
    f = bp::BFloat16::fromBits(h);
    std::memcpy(&sdk, &f, sizeof sdk);
    ASSERT_EQ(gpu, sdk) << "bfloat16 " << std::hex << b;
  }
}

}  // namespace
