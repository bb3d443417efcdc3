// TensorBase creation, element access and data movement, on the host and on the
// test device (whose memory the host cannot read: any host dereference of a
// testdev address crashes, so every testdev case below also checks Note [The
// host never dereferences device memory]).

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "backplane/core/checked_math.h"
#include "backplane/core/device.h"
#include "backplane/core/error.h"
#include "backplane/core/tensor_base.h"
#include "backplane/testing/errors.h"
#include "test_device.h"

namespace backplane {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

const Device kCpu(DeviceType::CPU);

testing::TestDevice& testDevice() { return testing::TestDevice::install("testdev", 2); }

// The backplane::Error `f` throws, or nullopt.
template <typename F>
std::optional<Error> thrownError(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  return std::nullopt;
}

// 0, 1, ..., numel-1 as int64 in a contiguous tensor of `sizes` on `device`.
TensorBase iota(std::vector<int64_t> sizes, Device device = kCpu) {
  std::vector<int64_t> values(static_cast<size_t>(checkedNumel(sizes)));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<int64_t>(i);
  return tensorFromVector(values, sizes, device);
}

std::vector<int64_t> values(const TensorBase& t) { return t.toVector<int64_t>(); }
std::vector<int64_t> sizesOf(const TensorBase& t) { return t.sizes().vec(); }
std::vector<int64_t> stridesOf(const TensorBase& t) { return t.strides().vec(); }
uintptr_t address(const TensorBase& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()); }

// --------------------------------------------------------------- emptyTensor

TEST(EmptyTensorTest, ContiguousLayout) {
  TensorBase t = emptyTensor({2, 3, 4}, ScalarType::Float64);
  ASSERT_TRUE(t.defined());
  EXPECT_EQ(t.dim(), 3);
  EXPECT_THAT(sizesOf(t), ElementsAre(2, 3, 4));
  EXPECT_THAT(stridesOf(t), ElementsAre(12, 4, 1));
  EXPECT_EQ(t.size(1), 3);
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_EQ(t.stride(0), 12);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.itemsize(), 8u);
  EXPECT_EQ(t.nbytes(), 192u);
  EXPECT_EQ(t.storage().nbytes(), 192u);
  EXPECT_EQ(t.storage_offset(), 0);
  EXPECT_EQ(t.dtype(), ScalarType::Float64);
  EXPECT_EQ(t.scalar_type(), ScalarType::Float64);
  EXPECT_EQ(t.device(), kCpu);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.str(), "Tensor[2, 3, 4] float64 cpu");
}

TEST(EmptyTensorTest, DefaultsToFloat32OnCpu) {
  TensorBase t = emptyTensor({5});
  EXPECT_EQ(t.dtype(), ScalarType::Float32);
  EXPECT_EQ(t.device(), kCpu);
  EXPECT_EQ(t.nbytes(), 20u);
}

TEST(EmptyTensorTest, OnTestDeviceResolvesDefaultIndex) {
  testing::TestDevice& dev = testDevice();
  TensorBase t = emptyTensor({3, 2}, ScalarType::Int8, Device(dev.type()));
  EXPECT_EQ(t.device(), dev.device(0));  // index -1 -> 0
  EXPECT_THAT(stridesOf(t), ElementsAre(2, 1));
  EXPECT_EQ(t.nbytes(), 6u);
  TensorBase t1 = emptyTensor({3, 2}, ScalarType::Int8, dev.device(1));
  EXPECT_EQ(t1.device(), dev.device(1));
  EXPECT_EQ(t1.str(), "Tensor[3, 2] int8 testdev:1");
}

TEST(EmptyTensorTest, ZeroDimTensorHasOneElement) {
  TensorBase t = emptyTensor({}, ScalarType::Int32);
  EXPECT_EQ(t.dim(), 0);
  EXPECT_TRUE(t.sizes().empty());
  EXPECT_TRUE(t.strides().empty());
  EXPECT_EQ(t.numel(), 1);
  EXPECT_EQ(t.nbytes(), 4u);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.str(), "Tensor[] int32 cpu");
}

TEST(EmptyTensorTest, ZeroSizedDimHasNoElements) {
  for (Device d : {kCpu, testDevice().device(1)}) {
    TensorBase t = emptyTensor({2, 0, 3}, ScalarType::Float32, d);
    EXPECT_EQ(t.numel(), 0);
    EXPECT_EQ(t.nbytes(), 0u);
    EXPECT_THAT(sizesOf(t), ElementsAre(2, 0, 3));
    EXPECT_THAT(stridesOf(t), ElementsAre(3, 3, 1));  // as torch.empty(2, 0, 3).stride()
    EXPECT_TRUE(t.is_contiguous());
    EXPECT_TRUE(t.toVector<float>().empty());
  }
}

TEST(EmptyTensorTest, NegativeSizeThrows) {
  std::optional<Error> e = thrownError([] { emptyTensor({2, -1}); });
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(e->message(), HasSubstr("negative size -1"));
}

TEST(EmptyTensorTest, OverflowingShapeThrowsWithoutAllocating) {
  testing::TestDevice& dev = testDevice();
  const size_t live = dev.liveAllocations();
  const int64_t big = int64_t{1} << 40;
  for (Device d : {kCpu, dev.device(0)}) {
    // The element count overflows.
    std::optional<Error> e = thrownError([&] { emptyTensor({big, big}, ScalarType::Float32, d); });
    ASSERT_TRUE(e.has_value()) << d;
    EXPECT_EQ(e->code(), absl::StatusCode::kOutOfRange);
    EXPECT_THAT(e->message(), HasSubstr("overflows int64"));
    // The element count fits, the byte count does not.
    e = thrownError([&] { emptyTensor({int64_t{1} << 61}, ScalarType::Int64, d); });
    ASSERT_TRUE(e.has_value()) << d;
    EXPECT_EQ(e->code(), absl::StatusCode::kOutOfRange);
  }
  EXPECT_EQ(dev.liveAllocations(), live);
}

// Note [Rank limit]
TEST(EmptyTensorTest, RankLimitIs64) {
  testing::TestDevice& dev = testDevice();
  const std::vector<int64_t> ones64(64, 1), ones65(65, 1);
  for (Device d : {kCpu, dev.device(0)}) {
    TensorBase t = emptyTensor(ones64, ScalarType::Float32, d);
    EXPECT_EQ(t.dim(), 64) << d;
    EXPECT_EQ(t.numel(), 1) << d;
    EXPECT_EQ(emptyStridedTensor(ones64, ones64, ScalarType::Int8, d).dim(), 64) << d;
    const char* limit = "a tensor has at most 64 dimensions; got 65";
    testing::expectError([&] { emptyTensor(ones65, ScalarType::Float32, d); }, absl::StatusCode::kInvalidArgument,
                         {limit});
    testing::expectError([&] { emptyStridedTensor(ones65, ones65, ScalarType::Float32, d); }, {limit});
    // An empty tensor given storage of a new shape (an out= argument).
    TensorBase empty = emptyTensor({0}, ScalarType::Float32, d);
    testing::expectError([&] { empty.unsafeGetImpl()->resizeEmpty(ones65); }, {limit});
    empty.unsafeGetImpl()->resizeEmpty(ones64);
    EXPECT_EQ(empty.dim(), 64);
    // A corrupt length (a plugin's ndim) is refused before the sizes are read.
    const int64_t one = 1;
    testing::expectError([&] { emptyTensor(IntArrayRef(&one, size_t{1} << 40), ScalarType::Float32, d); },
                         {"a tensor has at most 64 dimensions; got 1099511627776"});
  }
}

// Note [Long lists in messages]
TEST(ArrayRefTest, LongListsPrintElided) {
  std::vector<int64_t> v(64);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>(i);
  const std::string whole = strCat(IntArrayRef(v));  // every shape a tensor can have prints whole
  EXPECT_EQ(whole.find("..."), std::string::npos) << whole;
  EXPECT_EQ(whole.substr(whole.size() - 11), "61, 62, 63]");
  v.push_back(64);
  EXPECT_EQ(strCat(IntArrayRef(v)), "[0, 1, 2, 3, 4, 5, 6, 7, ..., 57, 58, 59, 60, 61, 62, 63, 64] (65 entries)");
  EXPECT_EQ(strCat(IntArrayRef()), "[]");
  EXPECT_EQ(strCat(IntArrayRef({3})), "[3]");
}

TEST(EmptyTensorTest, ZeroSizedShapeWithOverflowingStridesThrows) {
  // Regression: the element count is 0, so only the stride computation
  // (2^80 for dim 0) can overflow; it must raise kOutOfRange, not wrap (UB).
  // A child process, so that a sanitizer abort fails only this test.
  EXPECT_EXIT(
      {
        const int64_t big = int64_t{1} << 40;
        std::optional<Error> e = thrownError([&] { emptyTensor({0, big, big}); });
        if (!e) {
          std::fprintf(stderr, "no backplane::Error thrown\n");
          _exit(1);
        }
        _exit(e->code() == absl::StatusCode::kOutOfRange ? 0 : 2);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(TensorTest, UndefinedTensor) {
  TensorBase t;
  EXPECT_FALSE(t.defined());
  EXPECT_EQ(t.use_count(), 0u);
  EXPECT_EQ(t.str(), "Tensor[undefined]");
  std::optional<Error> e = thrownError([&] { (void)t.numel(); });
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(e->message(), HasSubstr("undefined"));
  EXPECT_THAT(testing::errorOf([&] { (void)t.sizes(); }), HasSubstr("check defined()"));
}

// ---------------------------------------------- tensorFromVector / toVector

// Six values per dtype, including the extremes.
template <typename T>
std::vector<T> sampleValues() {
  using L = std::numeric_limits<T>;
  if constexpr (std::is_same_v<T, bool>) {
    return {true, false, false, true, true, false};
  } else if constexpr (std::is_same_v<T, Half>) {
    // 65504 is the largest half; 0x0001 the smallest subnormal; 0x8000 is -0.0.
    return {Half(1.0f),        Half(-2.5f), Half(65504.0f), Half::fromBits(0x0001), Half::fromBits(0x8000),
            Half(0.099975586f)};
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return {
        BFloat16(1.0f),    BFloat16(-2.5f), BFloat16(3.0e38f), BFloat16::fromBits(0x0001), BFloat16::fromBits(0x8000),
        BFloat16(1.0e-30f)};
  } else if constexpr (std::is_floating_point_v<T>) {
    return {T(-1.5), T(0), T(3.25), L::max(), L::lowest(), L::denorm_min()};
  } else {
    return {L::min(), T(L::min() + 1), T(L::max() / 3), T(L::max() / 2), T(L::max() - 1), L::max()};
  }
}

// Element bits, so that -0.0 vs 0.0 and Half/BFloat16 values compare exactly.
template <typename T>
std::vector<uint64_t> bitsOf(const std::vector<T>& v) {
  std::vector<uint64_t> out;
  for (size_t i = 0; i < v.size(); ++i) {
    T x = v[i];
    uint64_t b = 0;
    std::memcpy(&b, &x, sizeof(T));
    out.push_back(b);
  }
  return out;
}

template <typename T>
class RoundTripTest : public ::testing::Test {};
using AllElementTypes = ::testing::Types<bool, uint8_t, int8_t, int32_t, int64_t, Half, BFloat16, float, double>;
TYPED_TEST_SUITE(RoundTripTest, AllElementTypes);

TYPED_TEST(RoundTripTest, FromVectorToVectorOnEveryDevice) {
  using T = TypeParam;
  const std::vector<T> in = sampleValues<T>();
  testing::TestDevice& dev = testDevice();
  for (Device d : {kCpu, dev.device(0), dev.device(1)}) {
    SCOPED_TRACE(d.str());
    TensorBase t = tensorFromVector(in, {2, 3}, d);
    EXPECT_EQ(t.dtype(), CppTypeToScalarType<T>::value);
    EXPECT_EQ(t.device(), d);
    EXPECT_THAT(sizesOf(t), ElementsAre(2, 3));
    EXPECT_EQ(t.nbytes(), 6 * sizeof(T));
    std::vector<T> out = t.toVector<T>();
    ASSERT_EQ(out.size(), in.size());
    EXPECT_EQ(bitsOf(out), bitsOf(in));
    // Strided read of the same values: column 1 of the 2x3.
    std::vector<T> col = t.select(1, 1).template toVector<T>();
    ASSERT_EQ(col.size(), 2u);
    EXPECT_EQ(bitsOf(col), bitsOf(std::vector<T>{in[1], in[4]}));
    // One element at a time, as the same type.
    EXPECT_EQ(bitsOf(std::vector<T>{t.select(0, 1).select(0, 2).template item<T>()}), bitsOf(std::vector<T>{in[5]}));
  }
}

TEST(ToVectorTest, ConvertsLikeStaticCast) {
  for (Device d : {kCpu, testDevice().device(1)}) {
    SCOPED_TRACE(d.str());
    EXPECT_THAT(tensorFromVector<float>({1.75f, -2.5f, 0.0f}, {3}, d).toVector<int64_t>(), ElementsAre(1, -2, 0));
    EXPECT_THAT(tensorFromVector<int32_t>({-3, 0, 7}, {3}, d).toVector<double>(), ElementsAre(-3.0, 0.0, 7.0));
    EXPECT_THAT(tensorFromVector<int32_t>({-3, 0, 7}, {3}, d).toVector<bool>(), ElementsAre(true, false, true));
    EXPECT_THAT(tensorFromVector<Half>({Half(0.5f), Half(-8.0f)}, {2}, d).toVector<float>(), ElementsAre(0.5f, -8.0f));
    EXPECT_THAT(tensorFromVector<double>({1.0 / 3.0}, {1}, d).toVector<BFloat16>()[0].bits,
                BFloat16(static_cast<float>(1.0 / 3.0)).bits);
  }
}

TEST(ItemTest, ConvertsToRequestedType) {
  for (Device d : {kCpu, testDevice().device(0)}) {
    SCOPED_TRACE(d.str());
    EXPECT_EQ(tensorFromVector<int64_t>({7}, {}, d).item<double>(), 7.0);
    EXPECT_EQ(tensorFromVector<int64_t>({int64_t{1} << 40}, {1, 1}, d).item<int64_t>(), int64_t{1} << 40);
    EXPECT_EQ(tensorFromVector<Half>({Half(1.5f)}, {}, d).item<float>(), 1.5f);
    EXPECT_EQ(tensorFromVector<BFloat16>({BFloat16(-3.0f)}, {1}, d).item<double>(), -3.0);
    EXPECT_EQ(tensorFromVector<float>({2.75f}, {}, d).item<int64_t>(), 2);
    EXPECT_EQ(tensorFromVector<bool>({true}, {}, d).item<int32_t>(), 1);
    EXPECT_EQ(tensorFromVector<uint8_t>({200}, {}, d).item<int64_t>(), 200);
    EXPECT_EQ(tensorFromVector<int8_t>({-5}, {}, d).item<float>(), -5.0f);
    EXPECT_EQ(tensorFromVector<double>({0.5}, {}, d).item<Half>().bits, Half(0.5f).bits);
  }
}

TEST(ItemTest, NeedsExactlyOneElement) {
  for (Device d : {kCpu, testDevice().device(0)}) {
    TensorBase two = tensorFromVector<float>({1, 2}, {2}, d);
    std::optional<Error> e = thrownError([&] { two.item<float>(); });
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(e->message(), HasSubstr("exactly one element, but this one has 2"));
    EXPECT_THAT(e->message(), HasSubstr("sizes [2]"));
    EXPECT_THAT(testing::errorOf([&] { emptyTensor({0}, ScalarType::Float32, d).item<float>(); }),
                HasSubstr("this one has 0"));
  }
}

TEST(TensorFromVectorTest, WrongCountThrows) {
  testing::TestDevice& dev = testDevice();
  for (Device d : {kCpu, dev.device(0)}) {
    std::optional<Error> e = thrownError([&] { tensorFromVector<float>({1, 2, 3}, {2, 2}, d); });
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(e->message(), HasSubstr("3 values do not fill sizes [2, 2] (4 elements)"));
  }
  const size_t live = dev.liveAllocations();
  EXPECT_THROW(tensorFromVector<int64_t>({1, 2, 3, 4, 5}, {2, 2}, dev.device(1)), Error);
  EXPECT_EQ(dev.liveAllocations(), live);  // the half-made tensor is freed
}

// ------------------------------------------------------------------ data_ptr

TEST(DataPtrTest, WrongTypeNamesBothDtypes) {
  TensorBase t = emptyTensor({2}, ScalarType::Float32);
  EXPECT_NE(t.data_ptr<float>(), nullptr);
  EXPECT_NE(t.data_ptr<const float>(), nullptr);
  std::optional<Error> e = thrownError([&] { t.data_ptr<int64_t>(); });
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(e->message(), HasSubstr("data_ptr<int64>() called on a tensor of dtype float32"));
  EXPECT_THAT(testing::errorOf([&] { emptyTensor({1}, ScalarType::Float16).data_ptr<BFloat16>(); }),
              HasSubstr("data_ptr<bfloat16>() called on a tensor of dtype float16"));
}

TEST(DataPtrTest, ViewAddressIsBasePlusOffsetTimesItemsize) {
  for (Device d : {kCpu, testDevice().device(1)}) {
    SCOPED_TRACE(d.str());
    TensorBase x = iota({3, 4}, d);  // int64
    EXPECT_EQ(address(x), reinterpret_cast<uintptr_t>(x.storage().data()));
    TensorBase row = x.select(0, 2);
    EXPECT_EQ(row.storage_offset(), 8);
    EXPECT_EQ(address(row), address(x) + 8 * 8);
    TensorBase v = x.slice(1, 1, 4, 2).select(0, 1);  // x[1, 1::2]
    EXPECT_EQ(v.storage_offset(), 5);
    EXPECT_EQ(address(v), address(x) + 5 * 8);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data_ptr<int64_t>()), address(x) + 40);
    EXPECT_THAT(values(v), ElementsAre(5, 7));
  }
  // On the host the address really is the element.
  TensorBase x = tensorFromVector<int32_t>({10, 11, 12, 13}, {4});
  EXPECT_EQ(*x.slice(0, 3).data_ptr<int32_t>(), 13);
}

// ---------------------------------------------------------------- copyElements

TEST(CopyElementsTest, StridedBetweenCpuAndTestDevice) {
  testing::TestDevice& dev = testDevice();
  // cpu transposed -> testdev:0 contiguous.
  TensorBase src = iota({3, 4}).t();  // [[0,4,8],[1,5,9],[2,6,10],[3,7,11]]
  TensorBase d0 = emptyTensor({4, 3}, ScalarType::Int64, dev.device(0));
  copyElements(d0, src);
  EXPECT_THAT(values(d0), ElementsAre(0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11));

  // testdev:0 sliced with step 3 -> cpu transposed destination.
  TensorBase dev_src = iota({2, 9}, dev.device(0)).slice(1, 0, 9, 3);  // [[0,3,6],[9,12,15]]
  ASSERT_FALSE(dev_src.is_contiguous());
  TensorBase host = tensorFromVector<int64_t>(std::vector<int64_t>(6, -1), {3, 2});
  copyElements(host.t(), dev_src);
  EXPECT_THAT(values(host), ElementsAre(0, 9, 3, 12, 6, 15));
}

TEST(CopyElementsTest, StridedBetweenTwoTestDevices) {
  testing::TestDevice& dev = testDevice();
  TensorBase src = iota({3, 4}, dev.device(0)).t();  // 4x3, strides {1, 4}
  TensorBase dst_base = tensorFromVector<int64_t>(std::vector<int64_t>(24, -1), {4, 6}, dev.device(1));
  TensorBase dst = dst_base.slice(1, 1, 6, 2);  // columns 1, 3, 5
  ASSERT_THAT(stridesOf(dst), ElementsAre(6, 2));
  copyElements(dst, src);
  EXPECT_EQ(dst.device(), dev.device(1));
  EXPECT_THAT(values(dst), ElementsAre(0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11));
  // Only the view's elements changed.
  EXPECT_THAT(values(dst_base), ElementsAre(-1, 0, -1, 4, -1, 8,   //
                                            -1, 1, -1, 5, -1, 9,   //
                                            -1, 2, -1, 6, -1, 10,  //
                                            -1, 3, -1, 7, -1, 11));
  // The source is untouched.
  EXPECT_THAT(values(src.t()), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11));
}

TEST(CopyElementsTest, ContiguousDeviceToDeviceStaysOnTheDevice) {
  testing::TestDevice& dev = testDevice();
  TensorBase src = iota({5}, dev.device(0));
  TensorBase dst = emptyTensor({5}, ScalarType::Int64, dev.device(1));
  const uint64_t to_host = dev.bytesToHost(), from_host = dev.bytesFromHost();
  const uint64_t d2d = dev.bytesDeviceToDevice();
  copyElements(dst, src);
  EXPECT_EQ(dev.bytesDeviceToDevice() - d2d, 40u);
  EXPECT_EQ(dev.bytesToHost(), to_host);
  EXPECT_EQ(dev.bytesFromHost(), from_host);
  EXPECT_THAT(values(dst), ElementsAre(0, 1, 2, 3, 4));
}

TEST(CopyElementsTest, ZeroDimAndEmpty) {
  testing::TestDevice& dev = testDevice();
  TensorBase dst = emptyTensor({}, ScalarType::Float32, dev.device(1));
  copyElements(dst, tensorFromVector<float>({4.5f}, {}));
  EXPECT_EQ(dst.item<float>(), 4.5f);
  TensorBase empty_dst = emptyTensor({0, 3}, ScalarType::Float32, dev.device(0));
  copyElements(empty_dst, emptyTensor({0, 3}, ScalarType::Float32));  // nothing to do
  EXPECT_EQ(empty_dst.numel(), 0);
}

TEST(CopyElementsTest, MismatchesThrow) {
  testing::TestDevice& dev = testDevice();
  TensorBase f = emptyTensor({2, 3}, ScalarType::Float32, dev.device(0));
  TensorBase i = emptyTensor({2, 3}, ScalarType::Int64);
  std::optional<Error> e = thrownError([&] { copyElements(f, i); });
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(e->message(), HasSubstr("dtype mismatch: destination is float32, source is int64"));

  TensorBase g = emptyTensor({3, 2}, ScalarType::Float32);
  EXPECT_THAT(testing::errorOf([&] { copyElements(f, g); }),
              HasSubstr("shape mismatch: destination [2, 3], source [3, 2]"));
  // Same element count is not enough.
  EXPECT_THAT(testing::errorOf([&] { copyElements(f, emptyTensor({6}, ScalarType::Float32)); }),
              HasSubstr("shape mismatch"));
}

// ------------------------------------------------------------ span staging

TEST(SpanStagingTest, StageModifyWriteBack) {
  testing::TestDevice& dev = testDevice();
  TensorBase x = iota({4, 5}, dev.device(1));
  TensorBase v = x.slice(0, 1, 4, 2).slice(1, 1, 5, 2);  // x[1::2, 1::2] = [[6, 8], [16, 18]]
  ASSERT_THAT(sizesOf(v), ElementsAre(2, 2));
  ASSERT_THAT(stridesOf(v), ElementsAre(10, 2));
  ASSERT_EQ(v.storage_offset(), 6);
  // From element 6 to element 18, inclusive.
  EXPECT_EQ(spanBytes(v), 13u * 8u);

  const uint64_t to_host = dev.bytesToHost();
  TensorBase staged = stageSpan(v, kCpu);
  EXPECT_EQ(dev.bytesToHost() - to_host, spanBytes(v));
  EXPECT_EQ(staged.device(), kCpu);
  EXPECT_EQ(staged.dtype(), ScalarType::Int64);
  EXPECT_THAT(sizesOf(staged), ElementsAre(2, 2));
  EXPECT_THAT(stridesOf(staged), ElementsAre(10, 2));
  EXPECT_EQ(staged.storage_offset(), 0);
  EXPECT_EQ(staged.storage().nbytes(), spanBytes(v));
  EXPECT_THAT(values(staged), ElementsAre(6, 8, 16, 18));

  // Modify the view's elements on the host (row-major through the strides).
  int64_t* p = staged.data_ptr<int64_t>();
  p[0] = -60;
  p[2] = -80;
  p[10] = -160;
  p[12] = -180;
  const uint64_t from_host = dev.bytesFromHost();
  writeSpanBack(v, staged);
  EXPECT_EQ(dev.bytesFromHost() - from_host, spanBytes(v));

  EXPECT_THAT(values(v), ElementsAre(-60, -80, -160, -180));
  EXPECT_THAT(values(x), ElementsAre(0, 1, 2, 3, 4,       //
                                     5, -60, 7, -80, 9,   //
                                     10, 11, 12, 13, 14,  //
                                     15, -160, 17, -180, 19));
}

TEST(SpanStagingTest, StageToAnotherTestDevice) {
  testing::TestDevice& dev = testDevice();
  TensorBase x = iota({3, 4}, dev.device(0));
  TensorBase v = x.t().slice(0, 1, 3);  // [[1, 5, 9], [2, 6, 10]], strides {1, 4}, offset 1
  TensorBase staged = stageSpan(v, dev.device(1));
  EXPECT_EQ(staged.device(), dev.device(1));
  EXPECT_THAT(stridesOf(staged), ElementsAre(1, 4));
  EXPECT_THAT(values(staged), ElementsAre(1, 5, 9, 2, 6, 10));
}

TEST(SpanStagingTest, WriteBackRejectsDifferentLayout) {
  TensorBase x = iota({3, 4});
  TensorBase staged = stageSpan(x.t(), kCpu);
  EXPECT_THAT(testing::errorOf([&] { writeSpanBack(x, staged); }), HasSubstr("was not staged from"));
  EXPECT_EQ(spanBytes(emptyTensor({3, 0})), 0u);
  EXPECT_EQ(spanBytes(x.expand({2, 3, 4})), 12u * 8u);  // stride-0 dims add nothing
}

// ---------------------------------------------- no host dereference / counts

TEST(TestDeviceTrafficTest, ContiguousToVectorMovesExactlyNbytes) {
  testing::TestDevice& dev = testDevice();
  std::vector<float> in(100);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i) * 0.5f;
  uint64_t from_host = dev.bytesFromHost();
  TensorBase t = tensorFromVector(in, {10, 10}, dev.device(0));
  EXPECT_EQ(dev.bytesFromHost() - from_host, 400u);

  uint64_t to_host = dev.bytesToHost();
  EXPECT_EQ(t.toVector<float>(), in);
  EXPECT_EQ(dev.bytesToHost() - to_host, t.nbytes());

  // A strided read copies the view's span, not the whole storage.
  to_host = dev.bytesToHost();
  EXPECT_THAT(t.slice(0, 2, 4).select(1, 0).toVector<float>(), ElementsAre(10.0f, 15.0f));
  EXPECT_EQ(dev.bytesToHost() - to_host, 11u * 4u);  // elements 20..30
  to_host = dev.bytesToHost();
  EXPECT_EQ(t.select(0, 9).select(0, 9).item<float>(), 49.5f);
  EXPECT_EQ(dev.bytesToHost() - to_host, 4u);
}

// ----------------------------------------------------------- storage sharing

TEST(StorageSharingTest, ViewsShareStorage) {
  for (Device d : {kCpu, testDevice().device(1)}) {
    SCOPED_TRACE(d.str());
    TensorBase x = iota({2, 3}, d);
    EXPECT_EQ(x.use_count(), 1u);
    EXPECT_EQ(x.storage().useCount(), 1u);
    {
      TensorBase y = x.t();
      TensorBase z = x.view({6}).slice(0, 1);
      EXPECT_TRUE(y.is_alias_of(x));
      EXPECT_TRUE(z.is_alias_of(y));
      EXPECT_EQ(x.storage().useCount(), 3u);
      EXPECT_EQ(x.use_count(), 1u);  // views are new tensors over the same storage
      TensorBase handle = x;         // a copy is the same tensor
      EXPECT_EQ(x.use_count(), 2u);
      EXPECT_EQ(handle.unsafeGetImpl(), x.unsafeGetImpl());
      EXPECT_EQ(x.storage().useCount(), 3u);
    }
    EXPECT_EQ(x.use_count(), 1u);
    EXPECT_EQ(x.storage().useCount(), 1u);
    TensorBase other = iota({2, 3}, d);
    EXPECT_FALSE(other.is_alias_of(x));
  }
}

TEST(StorageSharingTest, ViewKeepsStorageAliveAfterBaseIsGone) {
  TensorBase v;
  {
    TensorBase x = iota({3, 4}, testDevice().device(0));
    v = x.select(0, 2);
  }
  EXPECT_EQ(v.storage().useCount(), 1u);
  EXPECT_THAT(values(v), ElementsAre(8, 9, 10, 11));
}

TEST(StorageSharingTest, NoTestDeviceLeaks) {
  testing::TestDevice& dev = testDevice();
  const size_t before = dev.liveAllocations();
  {
    TensorBase x = iota({4, 6}, dev.device(0));
    EXPECT_EQ(dev.liveAllocations(), before + 1);
    TensorBase views = x.t().slice(0, 1, 5, 2).unsqueeze(0).expand({3, 2, 4});
    EXPECT_EQ(dev.liveAllocations(), before + 1);  // views allocate nothing
    TensorBase c = emptyTensor({6, 4}, ScalarType::Int64, dev.device(0));
    copyElements(c, x.t());  // staged through the host: nothing left behind
    TensorBase other = iota({2, 2}, dev.device(1));
    copyElements(x.slice(0, 0, 2).slice(1, 0, 2), other);
    TensorBase staged = stageSpan(x.t(), dev.device(1));
    std::vector<int64_t> all = values(views);
    EXPECT_EQ(all.size(), 24u);
    EXPECT_EQ(dev.liveAllocations(), before + 4);
    EXPECT_THROW(x.view({5, 5}), Error);
  }
  EXPECT_EQ(dev.liveAllocations(), before);
}

}  // namespace
}  // namespace backplane
