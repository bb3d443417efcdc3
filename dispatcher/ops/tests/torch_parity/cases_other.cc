// Creation, reductions, linear algebra, neural-network layers and data
// movement. One table row (or loop line) per op.
#include <map>
#include <set>

#include "backplane/ops/derivatives.h"
#include "cases.h"

namespace backplane::torch_parity {
namespace {

constexpr ScalarType kBool = ScalarType::Bool, kU8 = ScalarType::UInt8, kI8 = ScalarType::Int8,
                     kI32 = ScalarType::Int32, kI64 = ScalarType::Int64, kF16 = ScalarType::Float16,
                     kBF16 = ScalarType::BFloat16, kF32 = ScalarType::Float32, kF64 = ScalarType::Float64;

std::vector<Scalar> fillValues() {
  const double inf = std::numeric_limits<double>::infinity();
  return {Scalar(int64_t{0}),    Scalar(int64_t{1}),   Scalar(int64_t{-1}), Scalar(2.5),
          Scalar(65510.0),       Scalar(int64_t{300}), Scalar(1e300),       Scalar(std::nan("")),
          Scalar(inf),           Scalar(true),         Scalar(-0.0),        Scalar(int64_t{1} << 40),
          Scalar(int64_t{-129}), Scalar(3.4e38)};
}

std::vector<Case> creationCases() {
  std::vector<Case> cases;
  for (const Scalar& v : fillValues()) {
    for (ScalarType t : dtypes()) {
      cases.push_back({"full", {{"size", Ints({2, 3})}, {"fill_value", S(v)}, {"dtype", Dt(t)}}, exact()});
      cases.push_back(
          {"full_like", {{"self", T(kF32, {2, 3}, Fill::Zeros)}, {"fill_value", S(v)}, {"dtype", Dt(t)}}, exact()});
      cases.push_back(
          {"fill_.Scalar", {{"self", T(t, {3, 2}, Fill::Zeros, View::Transposed)}, {"value", S(v)}}, exact()});
    }
    // The dtype a fill value infers.
    cases.push_back({"full", {{"size", Ints({2})}, {"fill_value", S(v)}}, exact()});
    cases.push_back({"full_like", {{"self", T(kI8, {2}, Fill::Zeros)}, {"fill_value", S(v)}}, exact()});
  }
  for (ScalarType t : dtypes()) {
    for (const char* op : {"zeros", "ones"})
      cases.push_back({op, {{"size", Ints({2, 0, 3})}, {"dtype", Dt(t)}}, exact()});
    for (const char* op : {"zeros", "ones"}) cases.push_back({op, {{"size", Ints({})}, {"dtype", Dt(t)}}, exact()});
    cases.push_back({"empty", {{"size", Ints({3, 1})}, {"dtype", Dt(t)}}, shapeOnly()});
    for (const char* op : {"zeros_like", "ones_like"})
      cases.push_back({op, {{"self", T(kF16, {2, 3}, Fill::Random, View::Transposed)}, {"dtype", Dt(t)}}, exact()});
    cases.push_back({"empty_like", {{"self", T(t, {2, 3}, Fill::Random)}}, shapeOnly()});
    for (const char* op : {"rand", "randn"})
      cases.push_back({op, {{"size", Ints({4})}, {"dtype", Dt(t)}}, shapeOnly()});
    cases.push_back({"arange", {{"end", S(int64_t{5})}, {"dtype", Dt(t)}}, exact()});
    cases.push_back({"arange.start_step",
                     {{"start", S(int64_t{-3})}, {"end", S(2.5)}, {"step", S(0.5)}, {"dtype", Dt(t)}},
                     close(1)});
    cases.push_back({"eye", {{"n", I(3)}, {"dtype", Dt(t)}}, exact()});
    cases.push_back({"eye.m", {{"n", I(2)}, {"m", I(4)}, {"dtype", Dt(t)}}, exact()});
    // PyTorch steps within a CPU vector from a base (two roundings) and
    // 16-bit dtypes in their own precision; Backplane rounds each value's
    // formula once: a few ulps apart (Note in creation.cc's linspace).
    if (scalarTypeName(t) != "bool")
      for (const auto& [a, b, n] : std::vector<std::tuple<Scalar, Scalar, int64_t>>{
               {int64_t{0}, int64_t{10}, 6}, {-3.5, 7.25, 11}, {int64_t{10}, int64_t{0}, 7}, {0.1, 0.7, 100}})
        cases.push_back({"linspace", {{"start", S(a)}, {"end", S(b)}, {"steps", I(n)}, {"dtype", Dt(t)}}, close(4, 4)});
  }
  cases.push_back({"eye", {{"n", I(0)}}, exact()});
  cases.push_back({"linspace", {{"start", S(int64_t{0})}, {"end", S(int64_t{1})}, {"steps", I(5)}}, exact()});
  cases.push_back({"zeros", {{"size", Ints({-1})}}, exact()});
  const std::vector<std::tuple<Scalar, Scalar, Scalar>> ranges = {
      {int64_t{0}, int64_t{10}, int64_t{3}},
      {int64_t{10}, int64_t{0}, int64_t{-3}},
      {0.0, 1.0, 0.1},
      {int64_t{1}, 2.5, 0.5},
      {int64_t{0}, int64_t{5}, int64_t{0}},
      {int64_t{0}, int64_t{5}, int64_t{-1}},
      {-1.5, 1.5, 1.0},
      {int64_t{0}, int64_t{0}, int64_t{1}},
      {true, int64_t{4}, int64_t{1}},
      {0.0, std::nan(""), 1.0},
      {0.0, std::numeric_limits<double>::infinity(), 1.0},
  };
  for (const auto& [a, b, s] : ranges)
    cases.push_back({"arange.start_step", {{"start", S(a)}, {"end", S(b)}, {"step", S(s)}}, close(1)});
  for (const Scalar& e : {Scalar(int64_t{6}), Scalar(4.5), Scalar(int64_t{-2}), Scalar(0.0)})
    cases.push_back({"arange", {{"end", S(e)}}, exact()});
  return cases;
}

std::vector<Case> reductionCases() {
  std::vector<Case> cases;
  const Check sum_check = close(16, 16);
  for (ScalarType t : dtypes()) {
    const Arg x = T(t, {4, 6}, Fill::Random, View::Contiguous, 1);
    const Arg xs = T(t, {4, 4}, Fill::Special, View::Contiguous, 2);
    const Arg xt = T(t, {6, 4}, Fill::Random, View::Transposed, 3);
    const Arg empty = T(t, {0, 3}, Fill::Zeros);
    for (const Arg& in : {x, xs, xt, empty}) {
      cases.push_back({"sum", {{"self", in}}, sum_check});
      cases.push_back({"sum.dim_IntList", {{"self", in}, {"dim", Ints({1})}, {"keepdim", B(true)}}, sum_check});
      cases.push_back({"sum.dim_IntList", {{"self", in}, {"dim", Ints({0, -1})}}, sum_check});
      cases.push_back({"mean", {{"self", in}}, sum_check});
      cases.push_back({"mean.dim", {{"self", in}, {"dim", Ints({0})}}, sum_check});
      cases.push_back({"amax", {{"self", in}, {"dim", Ints({1})}}, exact()});
      cases.push_back({"amin", {{"self", in}, {"dim", Ints({})}}, exact()});
      cases.push_back({"argmax", {{"self", in}, {"dim", I(1)}}, exact()});
      cases.push_back({"argmin", {{"self", in}}, exact()});
      cases.push_back({"argmax", {{"self", in}, {"dim", I(0)}, {"keepdim", B(true)}}, exact()});
      cases.push_back({"max", {{"self", in}}, exact()});
      cases.push_back({"min", {{"self", in}}, exact()});
      cases.push_back({"max.dim", {{"self", in}, {"dim", I(1)}}, exact()});
      cases.push_back({"min.dim", {{"self", in}, {"dim", I(-1)}, {"keepdim", B(true)}}, exact()});
      cases.push_back({"max.other", {{"self", in}, {"other", xs}}, exact()});
      cases.push_back({"min.other", {{"self", xt}, {"other", in}}, exact()});
      for (int64_t corr : {0, 1, 2}) {
        cases.push_back({"var.correction", {{"self", in}, {"dim", Ints({1})}, {"correction", I(corr)}}, close(64, 64)});
        cases.push_back({"std.correction", {{"self", in}, {"dim", None()}, {"correction", I(corr)}}, close(64, 64)});
      }
      cases.push_back(
          {"var.dim", {{"self", in}, {"dim", Ints({0})}, {"unbiased", B(false)}, {"keepdim", B(true)}}, close(64, 64)});
      cases.push_back({"var", {{"self", in}}, close(64, 64)});
      cases.push_back({"std", {{"self", in}, {"unbiased", B(false)}}, close(64, 64)});
      // Issue 21 item 7: not yet in Backplane's table on main.
      cases.push_back({"prod", {{"self", in}}, close(16, 16)});
      cases.push_back({"prod.dim_int", {{"self", in}, {"dim", I(1)}}, close(16, 16)});
      cases.push_back({"cumsum", {{"self", in}, {"dim", I(1)}}, close(16, 16)});
      cases.push_back({"all", {{"self", in}}, exact()});
      cases.push_back({"any", {{"self", in}}, exact()});
      cases.push_back({"all.dim", {{"self", in}, {"dim", I(0)}}, exact()});
      cases.push_back({"any.dim", {{"self", in}, {"dim", I(1)}, {"keepdim", B(true)}}, exact()});
    }
    // A dtype argument: accumulate and return in another dtype.
    for (ScalarType d : {kF64, kI64, kF16, kBool}) {
      cases.push_back({"sum", {{"self", x}, {"dtype", Dt(d)}}, sum_check, "sum/dtype"});
      cases.push_back({"mean.dim", {{"self", x}, {"dim", Ints({1})}, {"dtype", Dt(d)}}, sum_check, "mean.dim/dtype"});
    }
    // Welford: a large offset and a small spread (issue 21 item 9); float64
    // is left out, being its own reference.
    if (isFloatingType(t) && t != kF64) {
      const Arg off = T(t, {3, 64}, Fill::Offset, View::Contiguous, 4);
      cases.push_back({"var.correction",
                       {{"self", off}, {"dim", Ints({1})}, {"correction", I(1)}},
                       noLessAccurate(2),
                       "var/large_offset"});
      cases.push_back({"std.correction",
                       {{"self", off}, {"dim", None()}, {"correction", I(0)}},
                       noLessAccurate(2),
                       "std/large_offset"});
    }
  }
  // Out-of-range and repeated dims.
  for (const std::vector<int64_t>& d : std::vector<std::vector<int64_t>>{{2}, {-3}, {0, 0}, {1, -1}}) {
    cases.push_back(
        {"sum.dim_IntList", {{"self", T(kF32, {2, 3}, Fill::Random)}, {"dim", Ints(d)}}, exact(), "sum/bad_dims"});
    cases.push_back({"amax", {{"self", T(kF32, {2, 3}, Fill::Random)}, {"dim", Ints(d)}}, exact(), "amax/bad_dims"});
  }
  return cases;
}

std::vector<Case> linalgCases() {
  std::vector<Case> cases;
  for (ScalarType t : dtypes()) {
    const Fill f = Fill::Small;
    const Check c = close(32, 32);
    cases.push_back(
        {"mm", {{"self", T(t, {3, 5}, f, View::Contiguous, 1)}, {"mat2", T(t, {5, 4}, f, View::Contiguous, 2)}}, c});
    cases.push_back(
        {"mm", {{"self", T(t, {3, 5}, f, View::Transposed, 1)}, {"mat2", T(t, {5, 4}, f, View::Strided, 2)}}, c});
    cases.push_back({"mm", {{"self", T(t, {3, 5}, f)}, {"mat2", T(t, {4, 4}, f)}}, c});  // shape mismatch
    cases.push_back({"mm", {{"self", T(t, {3, 0}, f)}, {"mat2", T(t, {0, 4}, f)}}, c});  // empty inner dim
    cases.push_back(
        {"bmm",
         {{"self", T(t, {2, 3, 5}, f, View::Contiguous, 1)}, {"mat2", T(t, {2, 5, 4}, f, View::Transposed, 2)}},
         c});
    cases.push_back(
        {"matmul", {{"self", T(t, {5}, f, View::Contiguous, 1)}, {"other", T(t, {5}, f, View::Contiguous, 2)}}, c});
    cases.push_back(
        {"matmul", {{"self", T(t, {3, 5}, f, View::Contiguous, 1)}, {"other", T(t, {5}, f, View::Strided, 2)}}, c});
    cases.push_back({"matmul",
                     {{"self", T(t, {5}, f, View::Contiguous, 1)}, {"other", T(t, {2, 5, 4}, f, View::Contiguous, 2)}},
                     c});
    cases.push_back(
        {"matmul",
         {{"self", T(t, {2, 1, 3, 5}, f, View::Contiguous, 1)}, {"other", T(t, {3, 5, 2}, f, View::Contiguous, 2)}},
         c});
    cases.push_back({"addmm",
                     {{"self", T(t, {4}, f, View::Contiguous, 3)},
                      {"mat1", T(t, {3, 5}, f, View::Contiguous, 1)},
                      {"mat2", T(t, {5, 4}, f, View::Contiguous, 2)},
                      {"beta", S(int64_t{2})},
                      {"alpha", S(int64_t{-1})}},
                     c});
    cases.push_back({"addmm",
                     {{"self", T(t, {3, 4}, f, View::Contiguous, 3)},
                      {"mat1", T(t, {3, 5}, f, View::Contiguous, 1)},
                      {"mat2", T(t, {5, 4}, f, View::Contiguous, 2)},
                      {"beta", S(0.5)},
                      {"alpha", S(1.5)}},
                     c});
    cases.push_back({"linear",
                     {{"input", T(t, {2, 3, 5}, f, View::Contiguous, 1)},
                      {"weight", T(t, {4, 5}, f, View::Contiguous, 2)},
                      {"bias", T(t, {4}, f, View::Contiguous, 3)}},
                     c});
    cases.push_back({"linear",
                     {{"input", T(t, {5}, f, View::Contiguous, 1)}, {"weight", T(t, {4, 5}, f, View::Contiguous, 2)}},
                     c});
    cases.push_back({"mm.out",
                     {{"self", T(t, {3, 5}, f, View::Contiguous, 1)},
                      {"mat2", T(t, {5, 4}, f, View::Contiguous, 2)},
                      {"out", T(t, {0}, Fill::Zeros)}},
                     c});
    // Mixed dtypes: PyTorch's matrix products refuse them.
    cases.push_back({"mm", {{"self", T(t, {2, 3}, f)}, {"mat2", T(kF32, {3, 2}, f)}}, c, "mm/mixed_dtypes"});
    cases.push_back({"matmul", {{"self", T(t, {2, 3}, f)}, {"other", T(kF64, {3}, f)}}, c, "matmul/mixed_dtypes"});
  }
  return cases;
}

std::vector<Case> nnCases() {
  std::vector<Case> cases;
  for (ScalarType t : dtypes()) {
    const Check c = close(16, 16);
    const Arg x = T(t, {3, 5}, Fill::Random, View::Contiguous, 1);
    const Arg xs = T(t, {4, 4}, Fill::Special, View::Transposed, 2);
    for (const char* op : {"softmax.int", "log_softmax.int"}) {
      for (int64_t d : {0, 1, -1}) cases.push_back({op, {{"self", x}, {"dim", I(d)}}, c});
      cases.push_back({op, {{"self", xs}, {"dim", I(1)}}, c});
      cases.push_back({op, {{"self", x}, {"dim", I(1)}, {"dtype", Dt(kF64)}}, c});
      cases.push_back({op, {{"self", x}, {"dim", I(2)}}, c});
    }
    // The backward ops (Note [Backward ops]): the CPU plugin's kernels for
    // float32 and float64, the composites for the 16-bit dtypes; every dtype
    // PyTorch refuses is refused by the host's rule too.
    const Arg g = T(t, {3, 5}, Fill::Random, View::Contiguous, 11);
    const Arg y = T(t, {3, 5}, Fill::Random, View::Contiguous, 12);
    for (const char* op : {"_softmax_backward_data", "_log_softmax_backward_data"}) {
      for (int64_t d : {0, 1, -1})
        cases.push_back({op, {{"grad_output", g}, {"output", y}, {"dim", I(d)}, {"input_dtype", Dt(t)}}, c});
      cases.push_back({op,
                       {{"grad_output", T(t, {4, 4}, Fill::Random, View::Transposed, 13)},
                        {"output", T(t, {4, 4}, Fill::Random, View::Strided, 14)},
                        {"dim", I(1)},
                        {"input_dtype", Dt(t)}},
                       c});
    }
    for (const char* approximate : {"none", "tanh"}) {
      cases.push_back({"gelu_backward", {{"grad_output", g}, {"self", y}, {"approximate", Str(approximate)}}, c});
      cases.push_back({"gelu_backward",
                       {{"grad_output", T(t, {4, 4}, Fill::Special, View::Transposed, 15)},
                        {"self", T(t, {4, 4}, Fill::Special, View::Contiguous, 16)},
                        {"approximate", Str(approximate)}},
                       c});
    }
    // embedding's weight gradient: repeated indices add up, padding_idx's
    // row stays 0, scale_grad_by_freq divides by the index's count.
    if (t == kF32 || t == kF64) {
      for (ScalarType it : {kI64, kI32}) {
        for (bool scale : {false, true}) {
          cases.push_back({"embedding_dense_backward",
                           {{"grad_output", T(t, {2, 3, 4}, Fill::Random, View::Contiguous, 17)},
                            {"indices", TV(it, {2, 3}, {0, 4, 2, 2, 1, 4})},
                            {"num_weights", I(6)},
                            {"padding_idx", I(scale ? -1 : 2)},
                            {"scale_grad_by_freq", B(scale)}},
                           close(16, 16)});
        }
      }
    }
    const Arg img = T(t, {2, 4, 5, 6}, Fill::Random, View::Contiguous, 3);
    cases.push_back({"layer_norm", {{"input", img}, {"normalized_shape", Ints({6})}}, close(64, 64)});
    cases.push_back({"layer_norm",
                     {{"input", img},
                      {"normalized_shape", Ints({5, 6})},
                      {"weight", T(t, {5, 6}, Fill::Random, View::Contiguous, 4)},
                      {"bias", T(t, {5, 6}, Fill::Random, View::Contiguous, 5)},
                      {"eps", F(1e-3)}},
                     close(64, 64)});
    if (t != kF64)  // float64 is its own reference
      cases.push_back({"layer_norm",
                       {{"input", T(t, {3, 64}, Fill::Offset, View::Contiguous, 6)}, {"normalized_shape", Ints({64})}},
                       noLessAccurate(2),
                       "layer_norm/large_offset"});
    for (bool training : {true, false}) {
      for (Fill fill : {Fill::Random, Fill::Offset}) {
        if (fill == Fill::Offset && t == kF64) continue;  // float64 is its own reference
        cases.push_back({"batch_norm",
                         {{"input", T(t, {4, 3, 5}, fill, View::Contiguous, 7)},
                          {"weight", T(t, {3}, Fill::Positive, View::Contiguous, 8)},
                          {"bias", T(t, {3}, Fill::Random, View::Contiguous, 9)},
                          {"running_mean", T(t, {3}, Fill::Random, View::Contiguous, 10)},
                          {"running_var", T(t, {3}, Fill::Positive, View::Contiguous, 11)},
                          {"training", B(training)},
                          {"momentum", F(0.1)},
                          {"eps", F(1e-5)},
                          {"cudnn_enabled", B(false)}},
                         fill == Fill::Offset ? noLessAccurate(2) : close(64, 64),
                         fill == Fill::Offset ? "batch_norm/large_offset" : "batch_norm"});
      }
    }
    const Arg w = T(t, {6, 2, 3, 3}, Fill::Small, View::Contiguous, 12);
    const Arg in = T(t, {2, 4, 7, 6}, Fill::Small, View::Contiguous, 13);
    cases.push_back(
        {"conv2d", {{"input", in}, {"weight", T(t, {5, 4, 3, 3}, Fill::Small, View::Contiguous, 14)}}, close(32, 32)});
    cases.push_back({"conv2d",
                     {{"input", in},
                      {"weight", w},
                      {"bias", T(t, {6}, Fill::Small, View::Contiguous, 15)},
                      {"stride", Ints({2, 1})},
                      {"padding", Ints({1, 2})},
                      {"dilation", Ints({1, 2})},
                      {"groups", I(2)}},
                     close(32, 32)});
    cases.push_back(
        {"conv2d", {{"input", in}, {"weight", T(t, {5, 3, 3, 3}, Fill::Small)}}, close(32, 32)});  // channels
    const Arg pool_in = T(t, {2, 3, 7, 6}, Fill::Random, View::Contiguous, 16);
    cases.push_back({"max_pool2d", {{"self", pool_in}, {"kernel_size", Ints({2, 2})}}, exact()});
    cases.push_back({"max_pool2d",
                     {{"self", T(t, {2, 3, 6, 7}, Fill::Special, View::Transposed, 17)},
                      {"kernel_size", Ints({3, 2})},
                      {"stride", Ints({2, 2})},
                      {"padding", Ints({1, 1})},
                      {"ceil_mode", B(true)}},
                     exact()});
    cases.push_back({"avg_pool2d", {{"self", pool_in}, {"kernel_size", Ints({2, 2})}}, close(8, 8)});
    cases.push_back({"avg_pool2d",
                     {{"self", pool_in},
                      {"kernel_size", Ints({3, 3})},
                      {"stride", Ints({2, 2})},
                      {"padding", Ints({1, 1})},
                      {"ceil_mode", B(true)},
                      {"count_include_pad", B(false)}},
                     close(8, 8)});
    cases.push_back(
        {"avg_pool2d",
         {{"self", pool_in}, {"kernel_size", Ints({2, 3})}, {"padding", Ints({1, 1})}, {"divisor_override", I(5)}},
         close(8, 8)});
    // avg_pool2d's backward op has PyTorch's schema (Note [Window op
    // gradients]): the CPU plugin's kernel for float32 and float64.
    if (t == kF32 || t == kF64) {
      cases.push_back({"avg_pool2d_backward",
                       {{"grad_output", T(t, {2, 3, 3, 3}, Fill::Random, View::Contiguous, 19)},
                        {"self", pool_in},
                        {"kernel_size", Ints({2, 2})},
                        {"stride", Ints({})},
                        {"padding", Ints({0, 0})},
                        {"ceil_mode", B(false)},
                        {"count_include_pad", B(true)},
                        {"divisor_override", None()}},
                       close(8, 8)});
      for (bool include_pad : {true, false})
        cases.push_back({"avg_pool2d_backward",
                         {{"grad_output", T(t, {2, 3, 4, 4}, Fill::Random, View::Transposed, 20)},
                          {"self", pool_in},
                          {"kernel_size", Ints({3, 3})},
                          {"stride", Ints({2, 2})},
                          {"padding", Ints({1, 1})},
                          {"ceil_mode", B(true)},
                          {"count_include_pad", B(include_pad)},
                          {"divisor_override", None()}},
                         close(8, 8)});
    }
    for (ScalarType it : {kI64, kI32})
      cases.push_back({"embedding",
                       {{"weight", T(t, {5, 3}, Fill::Special, View::Contiguous, 18)},
                        {"indices", TV(it, {2, 3}, {0, 4, 2, 2, 1, 0})},
                        {"padding_idx", I(2)}},
                       exact()});
    cases.push_back({"embedding",
                     {{"weight", T(t, {5, 3}, Fill::Random)}, {"indices", TV(kI64, {2}, {1, 5})}},
                     exact(),
                     "embedding/out_of_range"});
    cases.push_back({"dropout", {{"input", xs}, {"p", F(0.5)}, {"train", B(false)}}, exact()});
    cases.push_back({"dropout", {{"input", x}, {"p", F(0.0)}, {"train", B(true)}}, exact()});
    // Issue 21 item 7: pad is not yet in Backplane's table on main.
    cases.push_back({"pad", {{"self", img}, {"pad", Ints({1, 2})}, {"value", F(-1.5)}}, exact()});
    cases.push_back({"pad", {{"self", img}, {"pad", Ints({2, 1, 1, 2})}, {"mode", Str("reflect")}}, exact()});
    cases.push_back({"pad", {{"self", img}, {"pad", Ints({2, 1, 0, 3})}, {"mode", Str("replicate")}}, exact()});
    cases.push_back({"pad", {{"self", img}, {"pad", Ints({-1, 2})}}, exact()});
  }
  return cases;
}

std::vector<Case> dataMovementCases() {
  std::vector<Case> cases;
  for (ScalarType a : dtypes()) {
    for (ScalarType b : dtypes()) {
      // Conversion: special values between floating dtypes, in-range values otherwise
      // (a NaN or out-of-range float to an integer is undefined in C++ and PyTorch).
      const bool floats = isFloatingType(a) && isFloatingType(b);
      const Fill f = floats || !isFloatingType(a) ? Fill::Special : Fill::Small;
      cases.push_back(
          {"to.dtype", {{"self", T(a, {4, 4}, f, View::Transposed)}, {"dtype", Dt(b)}}, exact(), "to.dtype/pairs"});
      cases.push_back({"copy_",
                       {{"self", T(b, {3, 4}, Fill::Zeros)}, {"src", T(a, {4}, f, View::Contiguous, 1)}},
                       exact(),
                       "copy_/pairs"});
      cases.push_back({"cat",
                       {{"tensors", TL({TA(a, {2, 3}, Fill::Small, 1), TA(b, {1, 3}, Fill::Small, 2)})}, {"dim", I(0)}},
                       exact(),
                       "cat/pairs"});
      cases.push_back({"stack",
                       {{"tensors", TL({TA(a, {2, 3}, Fill::Small, 1), TA(b, {2, 3}, Fill::Small, 2)})}},
                       exact(),
                       "stack/pairs"});
    }
    const TensorArg t1 = TA(a, {2, 3}, Fill::Special, 1), t2 = TA(a, {2, 4}, Fill::Special, 2);
    cases.push_back({"cat", {{"tensors", TL({t1, t2})}, {"dim", I(1)}}, exact()});
    cases.push_back({"cat", {{"tensors", TL({t1, t2})}, {"dim", I(0)}}, exact()});  // size mismatch
    cases.push_back({"cat", {{"tensors", TL({t1, TA(a, {0}, Fill::Zeros)})}, {"dim", I(0)}}, exact()});  // legacy empty
    cases.push_back({"cat", {{"tensors", TL({})}}, exact()});
    cases.push_back({"stack", {{"tensors", TL({t1, t1})}, {"dim", I(-1)}}, exact()});
    cases.push_back({"stack", {{"tensors", TL({t1, t2})}}, exact()});
    const Arg x = T(a, {4, 5}, Fill::Special, View::Transposed, 3);
    for (ScalarType it : {kI64, kI32}) {
      cases.push_back({"index_select", {{"self", x}, {"dim", I(1)}, {"index", TV(it, {3}, {3, 0, 3})}}, exact()});
      cases.push_back(
          {"gather", {{"self", x}, {"dim", I(0)}, {"index", TV(it, {2, 4}, {0, 4, 1, 2, 3, 3, 0, 1})}}, exact()});
      cases.push_back({"scatter_add",
                       {{"self", T(a, {3, 4}, Fill::Small)},
                        {"dim", I(1)},
                        {"index", TV(it, {2, 3}, {0, 3, 3, 1, 1, 2})},
                        {"src", T(a, {2, 5}, Fill::Small, View::Contiguous, 4)}},
                       close(2)});
    }
    // Indexing ops (dispatcher/ops/src/indexing.cc): scatter's kernel, and the
    // composites over index_select, scatter, scatter_add and cumsum.
    cases.push_back({"scatter.src",
                     {{"self", T(a, {3, 4}, Fill::Small)},
                      {"dim", I(1)},
                      {"index", TV(kI64, {2, 3}, {0, 3, 2, 1, 2, 0})},
                      {"src", T(a, {2, 5}, Fill::Small, View::Contiguous, 4)}},
                     exact()});
    cases.push_back({"scatter.value",
                     {{"self", T(a, {3, 4}, Fill::Small)},
                      {"dim", I(0)},
                      {"index", TV(kI64, {1, 4}, {2, 0, 1, 2})},
                      {"value", S(int64_t{1})}},
                     exact()});
    cases.push_back({"index_add",
                     {{"self", T(a, {3, 4}, Fill::Small)},
                      {"dim", I(0)},
                      {"index", TV(kI64, {3}, {2, 0, 2})},
                      {"source", T(a, {3, 4}, Fill::Small, View::Contiguous, 4)}},
                     close(2)});
    cases.push_back({"nonzero", {{"self", x}}, exact()});
    cases.push_back({"masked_select", {{"self", x}, {"mask", TV(kBool, {4}, {1, 0, 1, 1})}}, exact()});
    cases.push_back({"tril", {{"self", x}, {"diagonal", I(1)}}, exact()});
    cases.push_back({"triu", {{"self", T(a, {2, 3, 4}, Fill::Special)}, {"diagonal", I(-1)}}, exact()});
    cases.push_back({"roll", {{"self", x}, {"shifts", Ints({2, -1})}, {"dims", Ints({0, 1})}}, exact()});
    cases.push_back({"roll", {{"self", x}, {"shifts", Ints({7})}}, exact()});
    cases.push_back({"repeat", {{"self", x}, {"repeats", Ints({2, 1, 2})}}, exact()});
    cases.push_back({"repeat_interleave.self_int", {{"self", x}, {"repeats", I(2)}, {"dim", I(1)}}, exact()});
    cases.push_back({"repeat_interleave.self_Tensor",
                     {{"self", x}, {"repeats", TV(kI64, {4}, {1, 0, 3, 2})}, {"dim", I(1)}},
                     exact()});
    if (a != kBool) cases.push_back({"cumprod", {{"self", T(a, {3, 4}, Fill::Small)}, {"dim", I(1)}}, close(4, 4)});
    cases.push_back({"isclose", {{"self", x}, {"other", x}}, exact()});
    cases.push_back({"index_select",
                     {{"self", x}, {"dim", I(0)}, {"index", TV(kI64, {2}, {0, 5})}},
                     exact(),
                     "index_select/out_of_range"});
    cases.push_back(
        {"gather", {{"self", x}, {"dim", I(1)}, {"index", TV(kI64, {1, 1}, {-1})}}, exact(), "gather/out_of_range"});
    cases.push_back({"masked_fill.Tensor",
                     {{"self", x},
                      {"mask", TV(kBool, {4}, {1, 0, 0, 1})},
                      {"value", T(kF64, {}, Fill::Special, View::Contiguous, 5)}},
                     exact()});
    cases.push_back({"masked_fill.Tensor",
                     {{"self", x}, {"mask", TV(kBool, {4}, {1, 0, 0, 1})}, {"value", T(kF32, {1}, Fill::Special)}},
                     exact()});
    // Issue 21 item 7: not yet in Backplane's table on main.
    cases.push_back({"flip", {{"self", x}, {"dims", Ints({0, -1})}}, exact()});
    cases.push_back({"flip", {{"self", T(a, {})}, {"dims", Ints({})}}, exact()});
    if (a != kBool) {
      const Arg r = T(a, {3, 6}, Fill::Random, View::Contiguous, 6);
      cases.push_back({"topk", {{"self", r}, {"k", I(2)}}, exact()});
      cases.push_back({"topk", {{"self", r}, {"k", I(2)}, {"dim", I(0)}, {"largest", B(false)}}, exact()});
      cases.push_back({"topk", {{"self", r}, {"k", I(7)}}, exact()});
      cases.push_back({"sort.stable", {{"self", r}, {"stable", B(true)}}, exact()});
      cases.push_back({"argsort.stable", {{"self", r}, {"stable", B(true)}, {"dim", I(0)}}, exact()});
      cases.push_back(
          {"argsort.stable",
           {{"self", T(a, {4, 4}, Fill::Special, View::Transposed, 7)}, {"stable", B(true)}, {"descending", B(true)}},
           exact()});
      cases.push_back({"sort.stable",
                       {{"self", T(a, {4, 4}, Fill::Special, View::Transposed, 7)},
                        {"stable", B(true)},
                        {"descending", B(true)},
                        {"dim", I(0)}},
                       exact()});
    }
  }
  (void)kU8;
  (void)kI8;
  (void)kF16;
  (void)kBF16;
  return cases;
}

}  // namespace

// Note [Gradients against PyTorch]: the other families' cases of ops that
// differentiate, with float64 leaves of random values; at most four distinct
// calls per op.
std::vector<Case> gradientCases() {
  std::vector<Case> out;
  std::map<std::string, std::set<std::string>> seen;
  for (const Family& f : {binaryFamily(), scalarFamily(), unaryFamily(), clampFamily(), reductionFamily(),
                          linalgFamily(), nnFamily(), dataMovementFamily()}) {
    for (Case c : f.make()) {
      const OpDerivative* d = findDerivative(c.op);
      if (d == nullptr || (d->kind != Differentiability::Formula && d->kind != Differentiability::Composite)) continue;
      if (c.bp_api) continue;
      bool floating = false;
      const auto adapt = [&](TensorArg& t) {
        if (!isFloatingType(t.dtype)) return;
        floating = true;
        t.dtype = ScalarType::Float64;
        if (t.fill == Fill::Special) t.fill = Fill::Random;
      };
      for (auto& [name, a] : c.args) {
        if (a.kind == Arg::Kind::Tensor) adapt(a.tensor);
        if (a.kind == Arg::Kind::TensorList)
          for (TensorArg& t : a.tensors) adapt(t);
        if (a.kind == Arg::Kind::Dtype && isFloatingType(a.dtype)) a.dtype = ScalarType::Float64;
      }
      if (!floating) continue;
      auto& calls = seen[c.op];
      const std::string call = describe(c);
      if (calls.size() >= 4 || !calls.insert(call).second) continue;
      c.gradient = true;
      c.group = "grad_" + c.op;
      out.push_back(std::move(c));
    }
  }
  return out;
}

Family creationFamily() { return {"creation", creationCases}; }
Family reductionFamily() { return {"reduction", reductionCases}; }
Family linalgFamily() { return {"linalg", linalgCases}; }
Family nnFamily() { return {"nn", nnCases}; }
Family dataMovementFamily() { return {"data_movement", dataMovementCases}; }

std::vector<Family> families() {
  return {binaryFamily(),    scalarFamily(), unaryFamily(), clampFamily(),        creationFamily(),
          reductionFamily(), linalgFamily(), nnFamily(),    dataMovementFamily(), {"gradients", gradientCases}};
}

}  // namespace backplane::torch_parity
