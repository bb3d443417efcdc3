// Guard bytes in the simulator (Note [Guard bytes in the simulator] in
// sim_runtime.h): a kernel that writes outside its gpuMalloc block fails
// its launch (or the call that runs a deferred stream) with an error naming
// the kernel, the block, its size and the offsets written; a block whose
// guards something else wrote fails its gpuFree; correct kernels pass.
// Compiled as for the simulator, without the host, like simt_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "gpu/gpu_port.h"
#include "gpu/sim/sim_guard.h"

namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// out[i] = i for i in [first, first + count): [0, n) is correct, anything
// else writes outside `out`'s n elements.
__global__ void writeRange(float* out, int first, int count) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < count) out[first + i] = static_cast<float>(first + i);
}

constexpr int kN = 1000;  // 4000 bytes: not a multiple of anything the allocator rounds to

class SimGuardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    was_on_ = bp_gpu::sim::boundsChecking();
    bp_gpu::sim::setBoundsChecking(true);  // also in ASan builds, where it is off by default
    size_t total = 0;
    ASSERT_EQ(gpuMemGetInfo(&free_before_, &total), gpuSuccess);
    ASSERT_EQ(gpuMalloc(reinterpret_cast<void**>(&out_), kN * sizeof(float)), gpuSuccess);
  }
  void TearDown() override {
    if (out_ != nullptr) {
      EXPECT_EQ(gpuFree(out_), gpuSuccess);
    }
    size_t free_after = 0, total = 0;
    EXPECT_EQ(gpuMemGetInfo(&free_after, &total), gpuSuccess);
    EXPECT_EQ(free_after, free_before_) << "a block was not returned";
    bp_gpu::sim::setBoundsChecking(was_on_);
  }
  // The kernel's launch: 1000 threads in blocks of 256.
  static void launch(float* out, int first, int count, gpuStream_t stream = nullptr) {
    bp_gpu::launch(&writeRange, (count + 255) / 256, 256, 0, stream, out, first, count);
  }
  // The message of the bp::Error `f` throws; fails the test if none.
  template <class F>
  static std::string errorOf(F f) {
    try {
      f();
    } catch (const bp::Error& e) {
      EXPECT_EQ(e.code(), BP_INTERNAL) << e.what();
      return e.message();
    }
    ADD_FAILURE() << "no error";
    return {};
  }

  float* out_ = nullptr;
  size_t free_before_ = 0;
  bool was_on_ = false;
};

TEST_F(SimGuardTest, CorrectKernelsPass) {
  launch(out_, 0, kN);
  std::vector<float> v(kN);
  std::memcpy(v.data(), out_, sizeof(float) * kN);  // device memory is host memory
  for (int i = 0; i < kN; ++i) ASSERT_EQ(v[i], static_cast<float>(i)) << i;
}

TEST_F(SimGuardTest, OneElementPastTheEndFailsTheLaunch) {
  const std::string message = errorOf([&] { launch(out_, 0, kN + 1); });
  EXPECT_THAT(message,
              AllOf(HasSubstr("gpusim: kernel void (*)(float*, int, int) wrote outside its memory"),
                    HasSubstr("the 4000-byte device block at "), HasSubstr("at offsets 4000 to 4003 (after its end)"),
                    HasSubstr("guard bytes are restored"), HasSubstr("BACKPLANE_GPUSIM_CHECK_BOUNDS=0")));
  // Reported once: the guards are restored, and the next launch passes.
  launch(out_, 0, kN);
  EXPECT_EQ(gpuFree(out_), gpuSuccess);
  out_ = nullptr;
}

TEST_F(SimGuardTest, OneElementBeforeTheStartFailsTheLaunch) {
  const std::string message = errorOf([&] { launch(out_, -1, kN + 1); });
  EXPECT_THAT(message, AllOf(HasSubstr("4000-byte device block"), HasSubstr("at offsets -4 to -1 (before its start)")));
  EXPECT_THAT(message, ::testing::Not(HasSubstr("after its end")));
}

TEST_F(SimGuardTest, BothSidesAndEveryDamagedBlockAreNamed) {
  EXPECT_THAT(errorOf([&] { launch(out_, -2, kN + 4); }),
              HasSubstr("at offsets -8 to -1 (before its start) and 4000 to 4007 (after its end)"));
  // Two blocks written (here by the host, between kernels): the next kernel
  // to finish reports the first it finds and counts the others.
  float* other = nullptr;
  ASSERT_EQ(gpuMalloc(reinterpret_cast<void**>(&other), 64 * sizeof(float)), gpuSuccess);
  other[64] = 1;
  out_[-1] = 1;
  EXPECT_THAT(errorOf([&] { launch(out_, 0, kN); }), HasSubstr("(and 1 other block(s) likewise)"));
  EXPECT_EQ(gpuFree(other), gpuSuccess);
}

// On a deferred stream the kernel runs when the stream is forced: the
// error comes from that call (as a GPU's from the next synchronizing one).
TEST_F(SimGuardTest, DeferredKernelFailsTheSynchronize) {
  gpuStream_t s = nullptr;
  ASSERT_EQ(gpuStreamCreateWithFlags(&s, gpuStreamNonBlocking | gpusimStreamDeferred), gpuSuccess);
  launch(out_, 0, kN + 1, s);  // queued, not run (unless BACKPLANE_GPUSIM_SYNC_STREAMS=1)
  if (bp_gpu::sim::deferred(s)) {
    EXPECT_THAT(errorOf([&] { (void)gpuStreamSynchronize(s); }), HasSubstr("offsets 4000 to 4003 (after its end)"));
  }
  EXPECT_EQ(gpuStreamDestroy(s), gpuSuccess);
}

// Something other than a kernel (here the host) wrote the guard: found
// when the block is freed; the memory is returned all the same (TearDown).
TEST_F(SimGuardTest, WriteFoundAtFree) {
  reinterpret_cast<unsigned char*>(out_)[4000 + 9] = 0;
  float* out = out_;
  out_ = nullptr;
  EXPECT_THAT(errorOf([&] { (void)gpuFree(out); }),
              AllOf(HasSubstr("found when it was freed"), HasSubstr("4000-byte device block"),
                    HasSubstr("offsets 4009 to 4009 (after its end)")));
}

// Blocks keep the guards they were made with: one made with the mode on is
// checked when freed after it was turned off.
TEST_F(SimGuardTest, TurningTheModeOffKeepsExistingGuards) {
  bp_gpu::sim::setBoundsChecking(false);
  EXPECT_FALSE(bp_gpu::sim::boundsChecking());
  reinterpret_cast<unsigned char*>(out_)[-1] = 0;
  float* out = out_;
  out_ = nullptr;
  EXPECT_THAT(errorOf([&] { (void)gpuFree(out); }), HasSubstr("offsets -1 to -1 (before its start)"));
  // A block made with the mode off is plain memory, freed as such.
  void* plain = nullptr;
  ASSERT_EQ(gpuMalloc(&plain, 100), gpuSuccess);
  launch(static_cast<float*>(plain), 0, 25);
  EXPECT_EQ(gpuFree(plain), gpuSuccess);
}

}  // namespace
