// The encoder layer on the CPU against its plain double-precision reference,
// and on a device whose every op falls back to the CPU against the CPU.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "backplane/core/error.h"
#include "backplane/runtime/profiler.h"
#include "backplane/runtime/runtime.h"
#include "encoder.h"
#include "reference.h"
#include "test_config.h"
#include "test_device.h"

namespace encoder {
namespace {

using namespace backplane;

constexpr uint64_t kSeed = 7;

// float32 against double at this size: the largest error seen is ~1e-6.
constexpr double kTightTolerance = 1e-5;

class EncoderTest : public ::testing::Test {
 protected:
  // The CPU kernels come from the CPU plugin, which the default plugin
  // directories find in the build tree.
  static void SetUpTestSuite() { static const Runtime runtime; }

  void SetUp() override {
    weights_ = EncoderWeights::random(smallConfig(), kSeed);
    batch_ = EncoderBatch::random(smallConfig(), kSeed);
    lengths_ = batch_.lengths.toVector<int64_t>();
    // What the tests below rely on: one unpadded and one padded sequence.
    ASSERT_EQ(lengths_[0], smallConfig().seq);
    ASSERT_LT(lengths_[1], smallConfig().seq);
  }

  EncoderWeights weights_;
  EncoderBatch batch_;
  std::vector<int64_t> lengths_;
};

TEST_F(EncoderTest, CpuMatchesPlainReferenceAtEveryPositionIncludingPadding) {
  const Tensor out = encoderLayer(weights_, batch_);
  EXPECT_EQ(out.str(), "Tensor[2, 16, 64] float32 cpu");
  const Difference d =
      compareResults(out.toVector<double>(), referenceEncoderLayer(weights_, batch_, smallConfig().batch));
  EXPECT_LE(d.max_abs, kTightTolerance) << "at element " << d.index;
}

TEST_F(EncoderTest, PaddedTokensDoNotChangeTheOutputsOfRealTokens) {
  // Padded keys are masked, so whatever tokens the padding holds, the rows
  // of the real tokens stay the same (padded rows themselves may change).
  const EncoderConfig c = smallConfig();
  std::vector<int64_t> ids = batch_.token_ids.toVector<int64_t>();
  for (int64_t s = lengths_[1]; s < c.seq; ++s) ids[c.seq + s] = 1 + s;
  const EncoderBatch other{tensorFromVector(ids, {c.batch, c.seq}), batch_.lengths};

  const Tensor a = encoderLayer(weights_, batch_).select(0, 1).narrow(0, 0, lengths_[1]);
  const Tensor b = encoderLayer(weights_, other).select(0, 1).narrow(0, 0, lengths_[1]);
  EXPECT_EQ(compareResults(a.toVector<double>(), b.toVector<double>()).max_abs, 0.0);
}

TEST_F(EncoderTest, ComparisonCatchesOneWrongWeight) {
  EncoderWeights wrong = weights_;
  wrong.intermediate.weight = weights_.intermediate.weight.clone();
  wrong.intermediate.weight.data_ptr<float>()[5] += 0.1f;

  const std::vector<double> expected = referenceEncoderLayer(weights_, batch_, smallConfig().batch);
  const Difference d = compareResults(encoderLayer(wrong, batch_).toVector<double>(), expected);
  EXPECT_GT(d.max_abs, kOutputTolerance);
}

TEST_F(EncoderTest, ComparisonFailsOnNaN) {
  std::vector<double> actual = {1.0, 2.0, 3.0};
  actual[1] = std::numeric_limits<double>::quiet_NaN();
  const Difference d = compareResults(actual, {1.0, 2.0, 3.0});
  EXPECT_GT(d.max_abs, kOutputTolerance);
  EXPECT_EQ(d.index, 1);
}

TEST_F(EncoderTest, SameSeedSameLayerOtherSeedOtherLayer) {
  const std::vector<double> out = encoderLayer(weights_, batch_).toVector<double>();
  const EncoderWeights again = EncoderWeights::random(smallConfig(), kSeed);
  EXPECT_EQ(encoderLayer(again, EncoderBatch::random(smallConfig(), kSeed)).toVector<double>(), out);
  const EncoderWeights other = EncoderWeights::random(smallConfig(), kSeed + 1);
  EXPECT_NE(encoderLayer(other, batch_).toVector<double>(), out);
}

TEST_F(EncoderTest, TestDeviceFallsBackToTheCpuAndMatchesIt) {
  // The test device has no kernels: every op runs through the CPU fallback,
  // on memory the host can only reach through the device's copy functions.
  const Device dev = backplane::testing::TestDevice::install("testdev").device(0);
  const std::vector<double> on_cpu = encoderLayer(weights_, batch_).toVector<double>();

  Profiler profiler;
  const Tensor out = encoderLayer(weights_.to(dev), batch_.to(dev));
  profiler.stop();
  EXPECT_EQ(out.device(), dev);
  // The same CPU kernels ran on copies of the same values: the results may
  // differ only where a kernel's rounding depends on its buffers' alignment.
  EXPECT_LE(compareResults(out.toVector<double>(), on_cpu).max_abs, 1e-6);

  const OpReport report = profiler.report();
  const OpStats* matmul = report.find("bp::mm.out", backendKey(dev.type));
  ASSERT_NE(matmul, nullptr) << report.table();
  EXPECT_GT(matmul->fallbackCalls(), 0u);
  EXPECT_GT(matmul->fallback_bytes, 0u);
  for (const OpStats& row : report.ops) {
    EXPECT_EQ(row.native_calls, 0u) << row.op << " ran natively on " << dispatchKeyName(row.backend);
    EXPECT_EQ(row.failed_calls, 0u) << row.op;
  }
}

TEST(EncoderConfigTest, HeadsMustDivideHidden) {
  EncoderConfig c = smallConfig();
  c.heads = 5;
  try {
    c.validate();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "EncoderConfig: hidden (64) must be a multiple of heads (5): each head takes hidden / heads features");
  }
}

}  // namespace
}  // namespace encoder
