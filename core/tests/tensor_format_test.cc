// TensorBase::format(): the values of small tensors, summaries of large ones.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "backplane/core/tensor_base.h"
#include "test_device.h"

namespace backplane {
namespace {

using ::testing::HasSubstr;

TEST(TensorFormat, MatrixOfFloatsIsAlignedWithFourDecimals) {
  TensorBase t = tensorFromVector<float>({1, -2.5f, 3.25f, 40}, {2, 2});
  EXPECT_EQ(t.format(),
            "tensor([[ 1.0000, -2.5000],\n"
            "        [ 3.2500, 40.0000]], float32, cpu)");
}

TEST(TensorFormat, WholeNumbersIntegersAndBools) {
  EXPECT_EQ(tensorFromVector<double>({1, 2, -3}, {3}).format(), "tensor([ 1.,  2., -3.], float64, cpu)");
  EXPECT_EQ(tensorFromVector<int32_t>({7, -12, 0}, {3}).format(), "tensor([  7, -12,   0], int32, cpu)");
  EXPECT_EQ(tensorFromVector<bool>({true, false}, {2}).format(), "tensor([ True, False], bool, cpu)");
  // int64 values print exactly, not through a double.
  int64_t big = (int64_t{1} << 62) + 1;
  EXPECT_EQ(tensorFromVector<int64_t>({big}, {1}).format(), "tensor([4611686018427387905], int64, cpu)");
}

TEST(TensorFormat, ZeroDimEmptyAndUndefined) {
  EXPECT_EQ(tensorFromVector<float>({0.5f}, {}).format(), "tensor(0.5000, float32, cpu)");
  EXPECT_EQ(emptyTensor({0, 3}).format(), "tensor([], size=[0, 3], float32, cpu)");
  EXPECT_EQ(TensorBase().format(), "tensor(undefined)");
}

TEST(TensorFormat, LargeAndTinyMagnitudesSwitchToScientific) {
  EXPECT_EQ(tensorFromVector<float>({1e9f, 1}, {2}).format(), "tensor([1.0000e+09, 1.0000e+00], float32, cpu)");
  EXPECT_EQ(tensorFromVector<double>({1e-6, 0.5}, {2}).format(), "tensor([1.0000e-06, 5.0000e-01], float64, cpu)");
}

TEST(TensorFormat, NanAndInfinitiesDoNotDecideTheNotation) {
  float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(tensorFromVector<float>({std::nanf(""), inf, -inf, 2}, {4}).format(),
            "tensor([ nan,  inf, -inf,   2.], float32, cpu)");
}

TEST(TensorFormat, ThreeDimensionsLeaveABlankLineBetweenMatrices) {
  std::vector<int64_t> v(8);
  std::iota(v.begin(), v.end(), 0);
  EXPECT_EQ(tensorFromVector<int64_t>(v, {2, 2, 2}).format(),
            "tensor([[[0, 1],\n"
            "         [2, 3]],\n"
            "\n"
            "        [[4, 5],\n"
            "         [6, 7]]], int64, cpu)");
}

TEST(TensorFormat, ViewsPrintTheirOwnElements) {
  std::vector<float> v(6);
  std::iota(v.begin(), v.end(), 0.f);
  TensorBase t = tensorFromVector<float>(v, {2, 3});
  EXPECT_EQ(t.t().format(),
            "tensor([[0., 3.],\n"
            "        [1., 4.],\n"
            "        [2., 5.]], float32, cpu)");
  EXPECT_EQ(t.slice(1, 0, 3, 2).format(),
            "tensor([[0., 2.],\n"
            "        [3., 5.]], float32, cpu)");
}

TEST(TensorFormat, LargeTensorsAreSummarisedAtEachEnd) {
  std::vector<int32_t> v(100 * 100);
  std::iota(v.begin(), v.end(), 0);
  std::string text = tensorFromVector<int32_t>(v, {100, 100}).format();
  EXPECT_EQ(text,
            "tensor([[   0,    1,    2, ...,   97,   98,   99],\n"
            "        [ 100,  101,  102, ...,  197,  198,  199],\n"
            "        [ 200,  201,  202, ...,  297,  298,  299],\n"
            "        ...,\n"
            "        [9700, 9701, 9702, ..., 9797, 9798, 9799],\n"
            "        [9800, 9801, 9802, ..., 9897, 9898, 9899],\n"
            "        [9900, 9901, 9902, ..., 9997, 9998, 9999]], int32, cpu)");
  // Options: a higher threshold prints everything; fewer edge items and digits.
  TensorBase small = tensorFromVector<float>({0.123456f, 1, 2, 3, 4}, {5});
  EXPECT_EQ(small.format({.threshold = 2, .edge_items = 1, .precision = 2}), "tensor([0.12, ..., 4.00], float32, cpu)");
  std::string whole = tensorFromVector<int32_t>(v, {100, 100}).format({.threshold = 10000});
  EXPECT_THAT(whole, ::testing::Not(HasSubstr("...")));
  EXPECT_THAT(whole, HasSubstr("[9900, 9901, 9902, 9903,"));
}

TEST(TensorFormat, BadOptionsAreRefused) {
  TensorBase t = tensorFromVector<float>({1}, {1});
  try {
    (void)t.format({.threshold = 10, .edge_items = 0});
    ADD_FAILURE() << "edge_items = 0 accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), HasSubstr("edge_items >= 1"));
  }
}

TEST(TensorFormat, DeviceTensorsAreReadThroughTheDeviceCopies) {
  auto& dev = testing::TestDevice::install("fmtdev", 1);
  TensorBase t = tensorFromVector<float>({1.5f, -2}, {2}, dev.device(0));
  EXPECT_EQ(t.format(), "tensor([ 1.5000, -2.0000], float32, fmtdev:0)");
  // A summarised device tensor copies only the elements it shows.
  std::vector<float> v(5000, 1.f);
  TensorBase big = tensorFromVector<float>(v, {5000}, dev.device(0));
  dev.resetCounters();
  EXPECT_EQ(big.format(), "tensor([1., 1., 1., ..., 1., 1., 1.], float32, fmtdev:0)");
  EXPECT_EQ(dev.bytesToHost(), 6 * sizeof(float));
}

}  // namespace
}  // namespace backplane
