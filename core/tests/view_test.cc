// Views: metadata-only tensors over the same storage (Note [Views live in the
// core]). Every test runs on the host and on the test device, whose memory
// the host cannot read; expected sizes, strides, offsets and values are what
// PyTorch gives for the same expression, worked out by hand.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
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
using ::testing::HasSubstr;

std::vector<int64_t> sizesOf(const TensorBase& t) { return t.sizes().vec(); }
std::vector<int64_t> stridesOf(const TensorBase& t) { return t.strides().vec(); }
std::vector<int64_t> values(const TensorBase& t) { return t.toVector<int64_t>(); }

class ViewTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    testing::TestDevice::install("testdev", 2);
    device_ = Device::fromString(GetParam());
  }

  // torch.arange(numel).view(sizes) as int64 on the device under test.
  TensorBase iota(std::vector<int64_t> sizes) const {
    std::vector<int64_t> v(static_cast<size_t>(checkedNumel(sizes)));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>(i);
    return tensorFromVector(v, sizes, device_);
  }
  // A view over the same storage as `base`, on the same device.
  void expectView(const TensorBase& v, const TensorBase& base) const {
    EXPECT_TRUE(v.is_alias_of(base));
    EXPECT_EQ(v.device(), device_);
  }

  Device device_;
};

INSTANTIATE_TEST_SUITE_P(Devices, ViewTest, ::testing::Values("cpu", "testdev:1"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param == "cpu" ? std::string("Cpu") : std::string("TestDev");
                         });

// x = arange(12).view(3, 4):
//   [[0, 1,  2,  3],
//    [4, 5,  6,  7],
//    [8, 9, 10, 11]]
// y = arange(24).view(2, 3, 4): y[i][j][k] = 12i + 4j + k.

// ---------------------------------------------------------------------- view

TEST_P(ViewTest, ViewInfersMinusOne) {
  TensorBase x = iota({3, 4});
  TensorBase v = x.view({2, -1});
  expectView(v, x);
  EXPECT_THAT(sizesOf(v), ElementsAre(2, 6));
  EXPECT_THAT(stridesOf(v), ElementsAre(6, 1));
  EXPECT_EQ(v.storage_offset(), 0);
  EXPECT_TRUE(v.is_contiguous());
  EXPECT_THAT(values(v), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11));

  TensorBase flat = x.view({-1});
  EXPECT_THAT(sizesOf(flat), ElementsAre(12));
  TensorBase four = x.view({-1, 2, 2});
  EXPECT_THAT(sizesOf(four), ElementsAre(3, 2, 2));
  EXPECT_THAT(stridesOf(four), ElementsAre(4, 2, 1));
  TensorBase scalar = iota({1, 1}).view({});
  EXPECT_EQ(scalar.dim(), 0);
  EXPECT_EQ(scalar.item<int64_t>(), 0);

  EXPECT_THAT(testing::errorOf([&] { x.view({-1, -1}); }), HasSubstr("only one dimension can be -1"));
  EXPECT_THAT(testing::errorOf([&] {
                x.view({5, -1});
              }),
              HasSubstr("shape [5, -1] is invalid for a tensor of 12 elements"));
  EXPECT_THAT(testing::errorOf([&] {
                x.view({5, 2});
              }),
              HasSubstr("shape [5, 2] is invalid for a tensor of 12 elements"));
  EXPECT_THAT(testing::errorOf([&] { x.view({-2, 6}); }), HasSubstr("invalid size -2"));
}

TEST_P(ViewTest, ViewOfStridedButViewableTensor) {
  // z = arange(24).view(4, 6)[::2] = rows 0 and 2: sizes (2, 6), strides (12, 1).
  TensorBase z = iota({4, 6}).slice(0, 0, 4, 2);
  ASSERT_FALSE(z.is_contiguous());
  TensorBase v = z.view({2, 2, 3});
  expectView(v, z);
  EXPECT_THAT(stridesOf(v), ElementsAre(12, 3, 1));
  EXPECT_THAT(values(v), ElementsAre(0, 1, 2, 3, 4, 5, 12, 13, 14, 15, 16, 17));
  // Merging the two rows is not expressible.
  EXPECT_THAT(testing::errorOf([&] { z.view({12}); }), HasSubstr("use reshape()"));
}

TEST_P(ViewTest, ViewOfTransposedThrowsSuggestingReshape) {
  TensorBase xt = iota({3, 4}).t();
  std::string msg = testing::errorOf([&] { xt.view({12}); });
  EXPECT_THAT(msg, HasSubstr("view: shape [12] is not compatible with sizes [4, 3] and strides [1, 4]"));
  EXPECT_THAT(msg, HasSubstr("use reshape()"));
  EXPECT_THAT(testing::errorOf([&] { xt.view({-1}); }), HasSubstr("use reshape()"));
  // Splitting a dimension of a transposed tensor is still a view.
  TensorBase split = xt.view({2, 2, 3});
  EXPECT_THAT(stridesOf(split), ElementsAre(2, 1, 4));
  EXPECT_THAT(values(split), ElementsAre(0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11));
}

TEST_P(ViewTest, TryViewGivesAViewOrNothing) {
  TensorBase x = iota({3, 4});
  std::optional<TensorBase> r = x.tryView({6, -1}, "reshape");
  ASSERT_TRUE(r.has_value());
  expectView(*r, x);
  EXPECT_THAT(sizesOf(*r), ElementsAre(6, 2));
  EXPECT_THAT(stridesOf(*r), ElementsAre(2, 1));
  std::optional<TensorBase> r2 = x.slice(0, 1).tryView({-1}, "reshape");  // contiguous, offset 4
  ASSERT_TRUE(r2.has_value());
  EXPECT_EQ(r2->storage_offset(), 4);
  EXPECT_THAT(values(*r2), ElementsAre(4, 5, 6, 7, 8, 9, 10, 11));
  // A transposed layout merges into no view: reshape() copies it (in the
  // ops layer, dispatcher/ops/tests/tensor_test.cc).
  EXPECT_FALSE(x.t().tryView({12}, "reshape").has_value());
  EXPECT_TRUE(x.t().tryView({2, 2, 3}, "reshape").has_value());
  EXPECT_THAT(testing::errorOf([&] { x.tryView({7, -1}, "reshape"); }), HasSubstr("reshape: shape [7, -1]"));
}

// ---------------------------------------------------- transpose, t, permute

TEST_P(ViewTest, Transpose) {
  TensorBase x = iota({3, 4});
  for (TensorBase xt : {x.transpose(0, 1), x.transpose(-1, -2), x.transpose(1, 0)}) {
    expectView(xt, x);
    EXPECT_THAT(sizesOf(xt), ElementsAre(4, 3));
    EXPECT_THAT(stridesOf(xt), ElementsAre(1, 4));
    EXPECT_EQ(xt.storage_offset(), 0);
    EXPECT_FALSE(xt.is_contiguous());
    EXPECT_THAT(values(xt), ElementsAre(0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11));
  }
  TensorBase same = x.transpose(1, 1);
  EXPECT_THAT(stridesOf(same), ElementsAre(4, 1));
  EXPECT_TRUE(same.is_contiguous());

  // y.transpose(0, 2)[a][b][c] = y[c][b][a] = 12c + 4b + a.
  TensorBase y = iota({2, 3, 4}).transpose(0, 2);
  EXPECT_THAT(sizesOf(y), ElementsAre(4, 3, 2));
  EXPECT_THAT(stridesOf(y), ElementsAre(1, 4, 12));
  EXPECT_THAT(values(y), ElementsAre(0, 12, 4, 16, 8, 20, 1, 13, 5, 17, 9, 21,  //
                                     2, 14, 6, 18, 10, 22, 3, 15, 7, 19, 11, 23));
  // Transposing back is contiguous again.
  EXPECT_TRUE(y.transpose(0, 2).is_contiguous());
}

TEST_P(ViewTest, TOnUpToTwoDims) {
  TensorBase x = iota({3, 4});
  TensorBase xt = x.t();
  expectView(xt, x);
  EXPECT_THAT(sizesOf(xt), ElementsAre(4, 3));
  EXPECT_THAT(stridesOf(xt), ElementsAre(1, 4));
  EXPECT_THAT(values(xt), ElementsAre(0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11));
  EXPECT_THAT(values(xt.t()), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11));

  TensorBase v = iota({5}).t();
  EXPECT_THAT(sizesOf(v), ElementsAre(5));
  EXPECT_THAT(values(v), ElementsAre(0, 1, 2, 3, 4));
  TensorBase s = iota({}).t();
  EXPECT_EQ(s.dim(), 0);

  std::string msg = testing::errorOf([&] { iota({2, 3, 4}).t(); });
  EXPECT_THAT(msg, HasSubstr("t() expects a tensor with <= 2 dims, but this one has 3"));
  EXPECT_THAT(msg, HasSubstr("transpose(dim0, dim1)"));
}

TEST_P(ViewTest, Permute) {
  TensorBase y = iota({2, 3, 4});
  // p[a][b][c] = y[b][c][a] = 12b + 4c + a.
  for (TensorBase p : {y.permute({2, 0, 1}), y.permute({-1, 0, -2})}) {
    expectView(p, y);
    EXPECT_THAT(sizesOf(p), ElementsAre(4, 2, 3));
    EXPECT_THAT(stridesOf(p), ElementsAre(1, 12, 4));
    EXPECT_FALSE(p.is_contiguous());
    EXPECT_THAT(values(p), ElementsAre(0, 4, 8, 12, 16, 20, 1, 5, 9, 13, 17, 21,  //
                                       2, 6, 10, 14, 18, 22, 3, 7, 11, 15, 19, 23));
  }
  EXPECT_TRUE(y.permute({0, 1, 2}).is_contiguous());
  EXPECT_EQ(iota({}).permute({}).dim(), 0);

  EXPECT_THAT(testing::errorOf([&] { y.permute({0, 0, 1}); }), HasSubstr("dim 0 appears twice"));
  EXPECT_THAT(testing::errorOf([&] { y.permute({0, -3, 1}); }), HasSubstr("appears twice"));
  EXPECT_THAT(testing::errorOf([&] { y.permute({0, 1}); }), HasSubstr("permute: got 2 dims [0, 1] for a 3-d tensor"));
  EXPECT_THAT(testing::errorOf([&] {
                y.permute({0, 1, 3});
              }),
              HasSubstr("dimension 3 is out of range for a 3-d tensor"));
}

// ------------------------------------------------------ slice, narrow, select

TEST_P(ViewTest, SliceStartEndAndClamping) {
  TensorBase v = iota({10});
  TensorBase s = v.slice(0, 2, 7);  // v[2:7]
  expectView(s, v);
  EXPECT_THAT(sizesOf(s), ElementsAre(5));
  EXPECT_THAT(stridesOf(s), ElementsAre(1));
  EXPECT_EQ(s.storage_offset(), 2);
  EXPECT_TRUE(s.is_contiguous());
  EXPECT_THAT(values(s), ElementsAre(2, 3, 4, 5, 6));

  TensorBase tail = v.slice(0, -3);  // v[-3:]
  EXPECT_EQ(tail.storage_offset(), 7);
  EXPECT_THAT(values(tail), ElementsAre(7, 8, 9));
  TensorBase inner = v.slice(0, 1, -1);  // v[1:-1]
  EXPECT_EQ(inner.storage_offset(), 1);
  EXPECT_THAT(values(inner), ElementsAre(1, 2, 3, 4, 5, 6, 7, 8));
  TensorBase clamped = v.slice(0, -100, 100);  // v[-100:100]
  EXPECT_EQ(clamped.storage_offset(), 0);
  EXPECT_THAT(values(clamped), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8, 9));
  TensorBase head = v.slice(0, std::nullopt, 3);  // v[:3]
  EXPECT_THAT(values(head), ElementsAre(0, 1, 2));
  EXPECT_THAT(values(v.slice(0, -4, -2)), ElementsAre(6, 7));  // v[-4:-2]
}

TEST_P(ViewTest, SliceWithStep) {
  TensorBase v = iota({10});
  TensorBase odd = v.slice(0, 1, 10, 2);  // v[1::2]
  EXPECT_THAT(sizesOf(odd), ElementsAre(5));
  EXPECT_THAT(stridesOf(odd), ElementsAre(2));
  EXPECT_EQ(odd.storage_offset(), 1);
  EXPECT_FALSE(odd.is_contiguous());
  EXPECT_THAT(values(odd), ElementsAre(1, 3, 5, 7, 9));

  TensorBase every3 = v.slice(0, 0, 10, 3);  // v[::3]
  EXPECT_THAT(sizesOf(every3), ElementsAre(4));
  EXPECT_THAT(stridesOf(every3), ElementsAre(3));
  EXPECT_THAT(values(every3), ElementsAre(0, 3, 6, 9));
  EXPECT_THAT(values(v.slice(0, 2, 9, 3)), ElementsAre(2, 5, 8));  // v[2:9:3]
  EXPECT_THAT(values(v.slice(0, -1, 10, 3)), ElementsAre(9));      // v[-1::3]
  // A step larger than the range keeps one element.
  EXPECT_THAT(values(v.slice(0, 4, 6, 5)), ElementsAre(4));

  EXPECT_THAT(testing::errorOf([&] { v.slice(0, 0, 10, 0); }), HasSubstr("step must be positive, got 0"));
  EXPECT_THAT(testing::errorOf([&] { v.slice(0, 0, 10, -1); }), HasSubstr("step must be positive"));
}

TEST_P(ViewTest, SliceToEmpty) {
  TensorBase v = iota({10});
  for (TensorBase e : {v.slice(0, 7, 3), v.slice(0, 20), v.slice(0, 5, 5), v.slice(0, -1, -5, 2)}) {
    expectView(e, v);
    EXPECT_THAT(sizesOf(e), ElementsAre(0));
    EXPECT_EQ(e.numel(), 0);
    EXPECT_TRUE(e.is_contiguous());
    EXPECT_TRUE(values(e).empty());
  }
}

TEST_P(ViewTest, SliceOfMatrix) {
  TensorBase x = iota({3, 4});
  TensorBase cols = x.slice(1, 1, 3);  // x[:, 1:3]
  EXPECT_THAT(sizesOf(cols), ElementsAre(3, 2));
  EXPECT_THAT(stridesOf(cols), ElementsAre(4, 1));
  EXPECT_EQ(cols.storage_offset(), 1);
  EXPECT_FALSE(cols.is_contiguous());
  EXPECT_THAT(values(cols), ElementsAre(1, 2, 5, 6, 9, 10));

  TensorBase rows = x.slice(0, 1);  // x[1:]
  EXPECT_THAT(sizesOf(rows), ElementsAre(2, 4));
  EXPECT_EQ(rows.storage_offset(), 4);
  EXPECT_TRUE(rows.is_contiguous());
  EXPECT_THAT(values(rows), ElementsAre(4, 5, 6, 7, 8, 9, 10, 11));

  TensorBase even_cols = x.slice(-1, 0, 4, 2);  // x[:, ::2]
  EXPECT_THAT(stridesOf(even_cols), ElementsAre(4, 2));
  EXPECT_THAT(values(even_cols), ElementsAre(0, 2, 4, 6, 8, 10));

  TensorBase one_row = x.slice(0, 2, 3);  // x[2:3]: size-1 dim, contiguous
  EXPECT_TRUE(one_row.is_contiguous());
  EXPECT_THAT(values(one_row), ElementsAre(8, 9, 10, 11));

  EXPECT_THAT(testing::errorOf([&] { iota({}).slice(0, 0, 1); }), HasSubstr("0-d tensor"));
}

TEST_P(ViewTest, Narrow) {
  TensorBase x = iota({3, 4});
  TensorBase n = x.narrow(1, 1, 2);  // x[:, 1:3]
  expectView(n, x);
  EXPECT_THAT(sizesOf(n), ElementsAre(3, 2));
  EXPECT_THAT(stridesOf(n), ElementsAre(4, 1));
  EXPECT_EQ(n.storage_offset(), 1);
  EXPECT_THAT(values(n), ElementsAre(1, 2, 5, 6, 9, 10));

  TensorBase last_rows = x.narrow(0, -2, 2);  // rows 1 and 2
  EXPECT_EQ(last_rows.storage_offset(), 4);
  EXPECT_THAT(values(last_rows), ElementsAre(4, 5, 6, 7, 8, 9, 10, 11));
  EXPECT_THAT(sizesOf(x.narrow(1, 4, 0)), ElementsAre(3, 0));  // empty at the end is fine

  EXPECT_THAT(testing::errorOf([&] { x.narrow(1, 3, 2); }),
              HasSubstr("start 3 + length 2 exceeds dimension 1 of size 4"));
  EXPECT_THAT(testing::errorOf([&] { x.narrow(0, 0, 4); }), HasSubstr("exceeds dimension 0 of size 3"));
  EXPECT_THAT(testing::errorOf([&] { x.narrow(0, -4, 1); }), HasSubstr("exceeds dimension 0"));
  EXPECT_THAT(testing::errorOf([&] { x.narrow(0, 0, -1); }), HasSubstr("length -1"));
  EXPECT_THAT(testing::errorOf([&] { x.narrow(2, 0, 1); }), HasSubstr("out of range"));
}

TEST_P(ViewTest, Select) {
  TensorBase x = iota({3, 4});
  TensorBase row = x.select(0, 1);  // x[1]
  expectView(row, x);
  EXPECT_THAT(sizesOf(row), ElementsAre(4));
  EXPECT_THAT(stridesOf(row), ElementsAre(1));
  EXPECT_EQ(row.storage_offset(), 4);
  EXPECT_TRUE(row.is_contiguous());
  EXPECT_THAT(values(row), ElementsAre(4, 5, 6, 7));

  TensorBase col = x.select(1, -1);  // x[:, -1]
  EXPECT_THAT(sizesOf(col), ElementsAre(3));
  EXPECT_THAT(stridesOf(col), ElementsAre(4));
  EXPECT_EQ(col.storage_offset(), 3);
  EXPECT_FALSE(col.is_contiguous());
  EXPECT_THAT(values(col), ElementsAre(3, 7, 11));

  TensorBase elem = x.select(0, -1).select(0, 2);  // x[-1][2]
  EXPECT_EQ(elem.dim(), 0);
  EXPECT_EQ(elem.storage_offset(), 10);
  EXPECT_EQ(elem.item<int64_t>(), 10);

  // y[:, 2] of arange(24).view(2, 3, 4): sizes (2, 4), strides (12, 1), offset 8.
  TensorBase ys = iota({2, 3, 4}).select(1, 2);
  EXPECT_THAT(stridesOf(ys), ElementsAre(12, 1));
  EXPECT_EQ(ys.storage_offset(), 8);
  EXPECT_THAT(values(ys), ElementsAre(8, 9, 10, 11, 20, 21, 22, 23));

  EXPECT_THAT(testing::errorOf([&] { x.select(0, 3); }),
              HasSubstr("select: index 3 is out of range for dimension 0 of size 3"));
  EXPECT_THAT(testing::errorOf([&] { x.select(1, -5); }),
              HasSubstr("index -5 is out of range for dimension 1 of size 4"));
  EXPECT_THAT(testing::errorOf([&] { iota({}).select(0, 0); }),
              HasSubstr("select() cannot be applied to a 0-d tensor"));
  EXPECT_THAT(testing::errorOf([&] { iota({0}).select(0, 0); }), HasSubstr("of size 0"));
}

// -------------------------------------------------------------------- expand

TEST_P(ViewTest, Expand) {
  TensorBase c = iota({3, 1});  // [[0], [1], [2]]
  TensorBase e = c.expand({2, 3, 4});
  expectView(e, c);
  EXPECT_THAT(sizesOf(e), ElementsAre(2, 3, 4));
  EXPECT_THAT(stridesOf(e), ElementsAre(0, 1, 0));  // new leading dim and expanded dim: stride 0
  EXPECT_EQ(e.storage_offset(), 0);
  EXPECT_FALSE(e.is_contiguous());
  EXPECT_THAT(values(e), ElementsAre(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2,  //
                                     0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2));

  TensorBase keep = c.expand({-1, 4});  // -1 keeps the size
  EXPECT_THAT(sizesOf(keep), ElementsAre(3, 4));
  EXPECT_THAT(stridesOf(keep), ElementsAre(1, 0));
  TensorBase same = c.expand({3, -1});
  EXPECT_THAT(sizesOf(same), ElementsAre(3, 1));
  EXPECT_THAT(stridesOf(same), ElementsAre(1, 1));
  EXPECT_THAT(values(same), ElementsAre(0, 1, 2));

  TensorBase s = iota({}).expand({2, 2});
  EXPECT_THAT(stridesOf(s), ElementsAre(0, 0));
  EXPECT_THAT(values(s), ElementsAre(0, 0, 0, 0));

  // An expanded view of a sliced row keeps the slice's offset.
  TensorBase r = iota({3, 4}).select(0, 2).expand({2, 4});
  EXPECT_EQ(r.storage_offset(), 8);
  EXPECT_THAT(stridesOf(r), ElementsAre(0, 1));
  EXPECT_THAT(values(r), ElementsAre(8, 9, 10, 11, 8, 9, 10, 11));
}

TEST_P(ViewTest, ExpandErrors) {
  TensorBase c = iota({3, 1});
  std::string msg = testing::errorOf([&] { c.expand({2, 5, 4}); });
  EXPECT_THAT(msg, HasSubstr("the expanded size 5 must match the existing size 3"));
  EXPECT_THAT(msg, HasSubstr("at non-singleton dimension 1"));
  EXPECT_THAT(testing::errorOf([&] { c.expand({4}); }), HasSubstr("fewer dims"));
  EXPECT_THAT(testing::errorOf([&] {
                c.expand({-1, 3, 4});
              }),
              HasSubstr("size -1 is not allowed for new leading dimension 0"));
  EXPECT_THAT(testing::errorOf([&] { c.expand({3, -2}); }), HasSubstr("invalid size -2"));
}

// --------------------------------------------------- squeeze and unsqueeze

TEST_P(ViewTest, Squeeze) {
  TensorBase s = iota({1, 3, 1, 2});  // strides (6, 2, 2, 1)
  TensorBase all = s.squeeze();
  expectView(all, s);
  EXPECT_THAT(sizesOf(all), ElementsAre(3, 2));
  EXPECT_THAT(stridesOf(all), ElementsAre(2, 1));
  EXPECT_TRUE(all.is_contiguous());
  EXPECT_THAT(values(all), ElementsAre(0, 1, 2, 3, 4, 5));

  TensorBase first = s.squeeze(0);
  EXPECT_THAT(sizesOf(first), ElementsAre(3, 1, 2));
  EXPECT_THAT(stridesOf(first), ElementsAre(2, 2, 1));
  TensorBase neg = s.squeeze(-2);
  EXPECT_THAT(sizesOf(neg), ElementsAre(1, 3, 2));
  EXPECT_THAT(stridesOf(neg), ElementsAre(6, 2, 1));
  TensorBase not_one = s.squeeze(1);  // size 3: unchanged, still a view
  expectView(not_one, s);
  EXPECT_THAT(sizesOf(not_one), ElementsAre(1, 3, 1, 2));
  EXPECT_THAT(values(not_one), ElementsAre(0, 1, 2, 3, 4, 5));

  EXPECT_EQ(iota({1, 1}).squeeze().dim(), 0);
  EXPECT_EQ(iota({1, 1}).squeeze().item<int64_t>(), 0);
  EXPECT_THAT(testing::errorOf([&] { s.squeeze(4); }),
              HasSubstr("dimension 4 is out of range for a 4-d tensor (expected a dim in [-4, 3])"));
}

TEST_P(ViewTest, Unsqueeze) {
  TensorBase x = iota({3, 4});
  TensorBase u0 = x.unsqueeze(0);
  expectView(u0, x);
  EXPECT_THAT(sizesOf(u0), ElementsAre(1, 3, 4));
  EXPECT_THAT(stridesOf(u0), ElementsAre(12, 4, 1));
  EXPECT_TRUE(u0.is_contiguous());
  TensorBase u1 = x.unsqueeze(1);
  EXPECT_THAT(sizesOf(u1), ElementsAre(3, 1, 4));
  EXPECT_THAT(stridesOf(u1), ElementsAre(4, 4, 1));
  for (TensorBase u2 : {x.unsqueeze(2), x.unsqueeze(-1)}) {
    EXPECT_THAT(sizesOf(u2), ElementsAre(3, 4, 1));
    EXPECT_THAT(stridesOf(u2), ElementsAre(4, 1, 1));
    EXPECT_THAT(values(u2), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11));
  }
  EXPECT_THAT(sizesOf(x.unsqueeze(-3)), ElementsAre(1, 3, 4));

  // Of a transposed tensor: the inserted stride is size * stride of the dim it precedes.
  TensorBase tu = x.t().unsqueeze(1);
  EXPECT_THAT(sizesOf(tu), ElementsAre(4, 1, 3));
  EXPECT_THAT(stridesOf(tu), ElementsAre(1, 12, 4));
  EXPECT_THAT(values(tu), ElementsAre(0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11));

  TensorBase s = iota({}).unsqueeze(0);
  EXPECT_THAT(sizesOf(s), ElementsAre(1));
  EXPECT_THAT(stridesOf(s), ElementsAre(1));

  EXPECT_THAT(testing::errorOf([&] { x.unsqueeze(3); }), HasSubstr("expected a dim in [-3, 2]"));
  EXPECT_THAT(testing::errorOf([&] { x.unsqueeze(-4); }), HasSubstr("dimension -4 is out of range"));
}

// ------------------------------------------------------------------- flatten

TEST_P(ViewTest, FlattenedSizes) {
  TensorBase y = iota({2, 3, 4});
  EXPECT_THAT(y.flattenedSizes(0, -1), ElementsAre(24));
  EXPECT_THAT(y.flattenedSizes(1, -1), ElementsAre(2, 12));
  EXPECT_THAT(y.flattenedSizes(0, 1), ElementsAre(6, 4));
  EXPECT_THAT(y.flattenedSizes(-2, -1), ElementsAre(2, 12));
  EXPECT_THAT(y.flattenedSizes(1, 1), ElementsAre(2, 3, 4));
  EXPECT_THAT(iota({}).flattenedSizes(0, -1), ElementsAre(1));
  EXPECT_THAT(testing::errorOf([&] { y.flattenedSizes(2, 1); }), HasSubstr("start_dim 2 is after end_dim 1"));
  EXPECT_THAT(testing::errorOf([&] { y.flattenedSizes(0, 3); }), HasSubstr("out of range"));
}

// ---------------------------------------------------------------- as_strided

TEST_P(ViewTest, AsStrided) {
  TensorBase x = iota({3, 4});  // 12 int64 = 96 bytes of storage
  TensorBase a = x.as_strided({2, 2}, {1, 4}, 1);
  expectView(a, x);
  EXPECT_THAT(sizesOf(a), ElementsAre(2, 2));
  EXPECT_THAT(stridesOf(a), ElementsAre(1, 4));
  EXPECT_EQ(a.storage_offset(), 1);
  EXPECT_THAT(values(a), ElementsAre(1, 5, 2, 6));

  // Overlapping windows.
  EXPECT_THAT(values(x.as_strided({3, 3}, {1, 1})), ElementsAre(0, 1, 2, 1, 2, 3, 2, 3, 4));
  // Without an offset, the view's own offset is kept.
  TensorBase from_view = x.slice(0, 1).as_strided({2}, {1});
  EXPECT_EQ(from_view.storage_offset(), 4);
  EXPECT_THAT(values(from_view), ElementsAre(4, 5));
  // The whole storage, ending at the last byte, is fine.
  EXPECT_THAT(values(x.as_strided({1}, {1}, 11)), ElementsAre(11));

  std::string msg = testing::errorOf([&] { x.as_strided({3, 4}, {4, 1}, 1); });
  EXPECT_THAT(msg, HasSubstr("needs 104 bytes of storage, but the storage has 96"));
  EXPECT_THAT(testing::errorOf([&] { x.as_strided({2}, {1}, 11); }), HasSubstr("needs 104 bytes"));
  EXPECT_THAT(testing::errorOf([&] { x.as_strided({2}, {-1}, 1); }), HasSubstr("negative stride -1"));
  EXPECT_THAT(testing::errorOf([&] { x.as_strided({2}, {1}, -1); }), HasSubstr("negative storage offset"));
  EXPECT_THAT(testing::errorOf([&] { x.as_strided({2, 2}, {1}); }), HasSubstr("has 2 dims but strides"));
}

// ------------------------------------------------------------ views of views

TEST_P(ViewTest, ViewsOfViews) {
  TensorBase x = iota({3, 4});
  // x.t()[1:].unsqueeze(0): x.t() is (4, 3) strides (1, 4); [1:] drops row 0.
  TensorBase v = x.t().slice(0, 1).unsqueeze(0);
  expectView(v, x);
  EXPECT_THAT(sizesOf(v), ElementsAre(1, 3, 3));
  EXPECT_THAT(stridesOf(v), ElementsAre(3, 1, 4));
  EXPECT_EQ(v.storage_offset(), 1);
  EXPECT_THAT(values(v), ElementsAre(1, 5, 9, 2, 6, 10, 3, 7, 11));

  // y.permute(2, 0, 1)[:, 1][1::2]: p[a][1][c] = 12 + 4c + a for a in {1, 3}.
  TensorBase y = iota({2, 3, 4});
  TensorBase w = y.permute({2, 0, 1}).select(1, 1).slice(0, 1, 4, 2);
  EXPECT_THAT(sizesOf(w), ElementsAre(2, 3));
  EXPECT_THAT(stridesOf(w), ElementsAre(2, 4));
  EXPECT_EQ(w.storage_offset(), 13);
  EXPECT_THAT(values(w), ElementsAre(13, 17, 21, 15, 19, 23));
  EXPECT_FALSE(w.tryView({6}, "reshape").has_value());  // reshape() copies it
  EXPECT_THAT(values(w.t()), ElementsAre(13, 15, 17, 19, 21, 23));

  // x[1:, ::2].expand(2, 2, 2).select(2, 1): column 2 of rows 1 and 2, twice.
  TensorBase e = x.slice(0, 1).slice(1, 0, 4, 2).expand({2, 2, 2}).select(2, 1);
  EXPECT_THAT(stridesOf(e), ElementsAre(0, 4));
  EXPECT_EQ(e.storage_offset(), 6);
  EXPECT_THAT(values(e), ElementsAre(6, 10, 6, 10));

  // Views of views do not copy, however deep.
  TensorBase deep = x.view({2, 6}).t().slice(0, 1, 5).narrow(1, 1, 1).squeeze(1).unsqueeze(-1);
  expectView(deep, x);
  EXPECT_THAT(values(deep), ElementsAre(7, 8, 9, 10));
}

TEST(ViewTrafficTest, ViewsOnTestDeviceMoveNoBytes) {
  testing::TestDevice& dev = testing::TestDevice::install("testdev", 2);
  std::vector<int64_t> in(24, 7);
  TensorBase x = tensorFromVector(in, {4, 6}, dev.device(0));
  const size_t live = dev.liveAllocations();
  const uint64_t to_host = dev.bytesToHost(), from_host = dev.bytesFromHost();
  const uint64_t d2d = dev.bytesDeviceToDevice();
  TensorBase v = x.view({2, 12})
                     .view({24})
                     .view({6, 4})
                     .t()
                     .slice(1, 1, 6, 2)
                     .select(0, 3)
                     .unsqueeze(0)
                     .expand({5, 3})
                     .permute({1, 0})
                     .as_strided({2}, {3});
  EXPECT_TRUE(v.is_alias_of(x));
  EXPECT_EQ(dev.liveAllocations(), live);
  EXPECT_EQ(dev.bytesToHost(), to_host);
  EXPECT_EQ(dev.bytesFromHost(), from_host);
  EXPECT_EQ(dev.bytesDeviceToDevice(), d2d);
}

// ------------------------------------------------------------- dim wrapping

TEST_P(ViewTest, OutOfRangeDimsNameTheValidRange) {
  TensorBase x = iota({3, 4});
  EXPECT_EQ(x.size(-1), 4);
  EXPECT_EQ(x.size(-2), 3);
  EXPECT_EQ(x.stride(-2), 4);
  std::string msg = testing::errorOf([&] { x.transpose(5, 0); });
  EXPECT_THAT(msg, HasSubstr("transpose: dimension 5 is out of range for a 2-d tensor"));
  EXPECT_THAT(msg, HasSubstr("expected a dim in [-2, 1]"));
  EXPECT_THAT(testing::errorOf([&] { x.select(-3, 0); }),
              HasSubstr("select: dimension -3 is out of range for a 2-d tensor (expected a dim in [-2, 1])"));
  EXPECT_THAT(testing::errorOf([&] { x.slice(2); }), HasSubstr("slice: dimension 2 is out of range"));
  EXPECT_THAT(testing::errorOf([&] { x.size(2); }), HasSubstr("size: dimension 2 is out of range"));
  EXPECT_THAT(testing::errorOf([&] { x.stride(-3); }), HasSubstr("stride: dimension -3 is out of range"));
  EXPECT_THAT(testing::errorOf([&] { x.squeeze(2); }), HasSubstr("expected a dim in [-2, 1]"));
  EXPECT_THAT(testing::errorOf([&] { x.flattenedSizes(-3, -1); }), HasSubstr("expected a dim in [-2, 1]"));
  EXPECT_THAT(testing::errorOf([&] { iota({5}).transpose(0, 1); }),
              HasSubstr("dimension 1 is out of range for a 1-d tensor (expected a dim in [-1, 0])"));
}

TEST_P(ViewTest, ZeroDimTensorHasNoDimToIndex) {
  // Regression: size()/stride() on a 0-d tensor once read past the empty
  // sizes array; like PyTorch, there is no dimension to name.
  TensorBase s = iota({});
  EXPECT_THROW(s.size(0), Error);
  EXPECT_THROW(s.size(-1), Error);
  EXPECT_THROW(s.stride(0), Error);
  // 0-d tensors do accept dim 0 / -1 where PyTorch does.
  EXPECT_EQ(s.transpose(0, -1).dim(), 0);
  EXPECT_EQ(s.squeeze(0).dim(), 0);
  EXPECT_EQ(s.unsqueeze(-1).dim(), 1);
}

TEST_P(ViewTest, ZeroDimSqueezeValidatesDim) {
  // Regression: squeeze(dim) on a 0-d tensor once skipped the range check.
  TensorBase s = iota({});
  EXPECT_THAT(testing::errorOf([&] { s.squeeze(5); }), HasSubstr("expected a dim in [-1, 0]"));
}

// Note [Rank limit]: no view makes a tensor of more than 64 dims.
TEST_P(ViewTest, ViewsStayWithinTheRankLimit) {
  const std::vector<int64_t> ones64(64, 1), ones65(65, 1);
  TensorBase t = iota(ones64);
  EXPECT_EQ(t.dim(), 64);
  EXPECT_EQ(t.view({1}).unsqueeze(0).dim(), 2);
  const char* limit = "a tensor has at most 64 dimensions; got 65";
  testing::expectError([&] { t.unsqueeze(0); }, absl::StatusCode::kInvalidArgument, {limit});
  testing::expectError([&] { t.unsqueeze(-1); }, {limit});
  testing::expectError([&] { t.view(ones65); }, {limit});
  testing::expectError([&] { t.tryView(ones65, "reshape"); }, {limit});
  testing::expectError([&] { t.expand(ones65); }, {limit});
  testing::expectError([&] { t.as_strided(ones65, ones65); }, {limit});
  testing::expectError([&] { iota({}).view(std::vector<int64_t>(1000000, 1)); },
                       {"a tensor has at most 64 dimensions; got 1000000"});
  // A corrupt length is refused before a single entry is read.
  const int64_t one = 1;
  testing::expectError([&] { t.as_strided(IntArrayRef(&one, size_t{1} << 40), IntArrayRef(&one, size_t{1} << 40)); },
                       {"a tensor has at most 64 dimensions; got 1099511627776"});
}

// Note [Long lists in messages]: a 1M-entry perm gives a short message.
TEST_P(ViewTest, LongListsInMessagesAreElided) {
  TensorBase y = iota({2, 3, 4});
  std::vector<int64_t> perm(1000000);
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(i);
  const std::string message = testing::errorOf([&] { y.permute(perm); });
  EXPECT_LT(message.size(), 1024u) << message.substr(0, 2000);
  EXPECT_THAT(message, HasSubstr("permute: got 1000000 dims [0, 1, 2, 3, 4, 5, 6, 7, ..., 999992, 999993, 999994, "
                                 "999995, 999996, 999997, 999998, 999999] (1000000 entries) for a 3-d tensor"));
  EXPECT_THAT(testing::errorOf([&] { y.expand(std::vector<int64_t>(100000, 5)); }),
              HasSubstr("target sizes [5, 5, 5, 5, 5, 5, 5, 5, ..., 5, 5, 5, 5, 5, 5, 5, 5] (100000 entries), tensor "
                        "sizes [2, 3, 4]"));
}

}  // namespace
}  // namespace backplane
