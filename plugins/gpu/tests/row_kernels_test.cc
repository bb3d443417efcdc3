// The GPU plugins' row kernels on the simulator against the CPU plugin, at
// the shapes that choose between their paths: softmax, log_softmax and
// layer_norm rows short, exactly filling and overflowing the shared-memory
// row cache (Note [One-pass rows] in plugins/gpu/block_reduce.cuh), and
// reductions long enough to be split across blocks (Note [Split
// reductions]), with the rules the merge must keep: wrapping integer sums,
// Welford's merge for var, first-index ties and NaN for argmax and amax.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/ops.h"
#include "backplane/ops/tensor.h"
#include "backplane/runtime/runtime.h"
#include "gpu_test_util.h"

namespace backplane {
namespace {

class GpusimRowKernelsTest : public gpu_test::GpusimSuite {
 protected:
  // rows x n values with a large common offset (a naive one-pass variance
  // would lose it) and a spread that exercises exp.
  static Tensor rowsOf(int64_t rows, int64_t n, ScalarType dtype, double offset) {
    std::vector<float> v(static_cast<size_t>(rows * n));
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<float>(offset + static_cast<double>((i * 2654435761u) % 1000) / 97.0);
    return Tensor(tensorFromVector<float>(v, {rows, n}, cpu())).to(dtype);
  }
};

// The row cache holds 32 KiB of opmath values (float for float32 and
// float16, double for float64): rows of up to 8192 and 4096 elements.
TEST_F(GpusimRowKernelsTest, SoftmaxAndLayerNormRowsInAndBeyondTheRowCacheMatchTheCpu) {
  expectNative("bp::softmax.int_out");
  expectNative("bp::log_softmax.int_out");
  expectNative("bp::layer_norm.out");
  struct Case {
    ScalarType dtype;
    int64_t fits;  // the longest row the cache holds
    double atol, rtol;
  };
  for (const Case& c : {Case{ScalarType::Float32, 8192, 1e-6, 1e-5}, Case{ScalarType::Float64, 4096, 1e-12, 1e-10},
                        Case{ScalarType::Float16, 8192, 1e-3, 1e-2}}) {
    for (int64_t n : {int64_t{5}, int64_t{300}, c.fits, c.fits + 1}) {
      SCOPED_TRACE(std::string(scalarTypeName(c.dtype)) + " n=" + std::to_string(n));
      const int64_t rows = n > 1000 ? 2 : 7;
      const Tensor x = rowsOf(rows, n, c.dtype, 0.0);
      const Tensor xs = x.to(sim());
      expectClose(softmax(xs, 1), softmax(x, 1), c.atol, c.rtol);
      expectClose(log_softmax(xs, 1), log_softmax(x, 1), c.atol * 10, c.rtol);
      // Along dim 0 (rows of `rows` elements, neighbouring rows adjacent).
      expectClose(softmax(xs, 0), softmax(x, 0), c.atol, c.rtol);
      const Tensor big = rowsOf(rows, n, c.dtype, 100.0);
      const Tensor w = rowsOf(1, n, c.dtype, 0.5).reshape({n}), b = rowsOf(1, n, c.dtype, -3.0).reshape({n});
      expectClose(layer_norm(big.to(sim()), {n}, w.to(sim()), b.to(sim())), layer_norm(big, {n}, w, b), c.atol * 100,
                  c.rtol * 10);
    }
  }
  // NaN and infinities keep the rules of Note [GPU reduction arithmetic]
  // on the cached path: a NaN or +inf row is NaN, -inf entries are 0.
  const Tensor special = tensorFromVector<float>({1, NAN, 2, 3, 1, INFINITY, -INFINITY, 2, -INFINITY}, {3, 3}, cpu());
  expectClose(softmax(special.to(sim()), 1), softmax(special, 1), 1e-6, 1e-5);
  expectClose(log_softmax(special.to(sim()), 1), log_softmax(special, 1), 1e-5, 1e-5);
}

// layer_norm_backward at the same row lengths: the input's gradient (the
// row kernel, from the cache or not) and the parameters' sums (the column
// kernel, over more rows than a block's lanes) against the CPU plugin's.
TEST_F(GpusimRowKernelsTest, LayerNormBackwardRowsInAndBeyondTheRowCacheMatchTheCpu) {
  expectNative("bp::layer_norm_backward");
  const OperatorHandle op = Dispatcher::singleton().findOpOrThrow("bp::layer_norm_backward");
  struct Case {
    ScalarType dtype;
    int64_t fits;
    double atol, rtol;
  };
  for (const Case& c : {Case{ScalarType::Float32, 8192, 1e-5, 1e-4}, Case{ScalarType::Float64, 4096, 1e-11, 1e-10},
                        Case{ScalarType::Float16, 8192, 1e-2, 1e-2}}) {
    for (int64_t n : {int64_t{5}, int64_t{300}, c.fits, c.fits + 1}) {
      SCOPED_TRACE(std::string(scalarTypeName(c.dtype)) + " n=" + std::to_string(n));
      const int64_t rows = n > 1000 ? 3 : 37;
      const Tensor x = rowsOf(rows, n, c.dtype, 100.0), g = rowsOf(rows, n, c.dtype, -5.0);
      const Tensor w = rowsOf(1, n, ScalarType::Float32, 0.5).reshape({n});
      Stack on_cpu{g, x, IValue(std::vector<int64_t>{n}), IValue(w), 1e-5};
      Stack on_sim{g.to(sim()), x.to(sim()), IValue(std::vector<int64_t>{n}), IValue(w.to(sim())), 1e-5};
      op.callBoxed(on_cpu);
      op.callBoxed(on_sim);
      ASSERT_EQ(on_sim.size(), 3u);
      for (size_t k = 0; k < 3; ++k) {
        SCOPED_TRACE("result " + std::to_string(k));
        EXPECT_EQ(on_sim[k].toTensor().device(), sim());
        EXPECT_EQ(on_sim[k].toTensor().dtype(), on_cpu[k].toTensor().dtype());
        // The parameters' sums add `rows` terms of either sign.
        const double scale = k == 0 ? 1.0 : static_cast<double>(rows);
        expectClose(on_sim[k].toTensor(), on_cpu[k].toTensor(), c.atol * 100 * scale, c.rtol * 10);
      }
    }
  }
}

// layer_norm_backward's parameter sums over many rows of few columns split
// across blocks (Note [Split reductions]): 96 columns fill 3 blocks of the
// simulator's 4 multiprocessors; 256 rows give each of a column's 8 lanes
// 32 reads, split in 4 parts (3 launches: the rows, the parts, their sum);
// 32 rows give 4 reads, unsplit (2 launches); 1000 rows without a weight
// split unevenly. All match the CPU.
TEST_F(GpusimRowKernelsTest, LayerNormBackwardParameterSumsSplitOverRowsMatchTheCpu) {
  const OperatorHandle op = Dispatcher::singleton().findOpOrThrow("bp::layer_norm_backward");
  const int64_t n = 96;
  struct Case {
    int64_t rows, launches;
    bool weight;
  };
  // 1000 rows, without a weight: 11 parts of 91 rows, the last of 90.
  for (const Case& c : {Case{256, 3, true}, Case{32, 2, true}, Case{1000, 3, false}}) {
    for (ScalarType dtype : {ScalarType::Float32, ScalarType::Float16}) {
      // Without a weight, float16's two sums are converted to float16: 2 more.
      const int64_t rows = c.rows;
      const int64_t expected_launches = c.launches + (!c.weight && dtype == ScalarType::Float16 ? 2 : 0);
      SCOPED_TRACE(std::string(scalarTypeName(dtype)) + " rows=" + std::to_string(rows));
      const Tensor x = rowsOf(rows, n, dtype, 100.0), g = rowsOf(rows, n, dtype, -5.0);
      const Tensor w = rowsOf(1, n, ScalarType::Float32, 0.5).reshape({n});
      Stack on_cpu{g, x, IValue(std::vector<int64_t>{n}), c.weight ? IValue(w) : IValue(), 1e-5};
      Stack on_sim{g.to(sim()), x.to(sim()), IValue(std::vector<int64_t>{n}), c.weight ? IValue(w.to(sim())) : IValue(),
                   1e-5};
      op.callBoxed(on_cpu);
      const int64_t before = activity("kernel_launches");
      op.callBoxed(on_sim);
      EXPECT_EQ(activity("kernel_launches") - before, expected_launches);
      ASSERT_EQ(on_sim.size(), 3u);
      const double tol = dtype == ScalarType::Float16 ? 1e-2 : 1e-5;
      for (size_t k = 0; k < 3; ++k) {
        SCOPED_TRACE("result " + std::to_string(k));
        const double scale = k == 0 ? 1.0 : static_cast<double>(rows);
        expectClose(on_sim[k].toTensor(), on_cpu[k].toTensor(), tol * 100 * scale, tol * 10);
      }
    }
  }
}

// The backward ops' kernels (plugins/gpu/backward.cu) against the CPU's:
// (log_)softmax's along the last dim and along dim 0 (neighbouring rows
// adjacent), short rows and rows longer than a block, and gelu_backward's
// two forms, with a transposed (non-contiguous) operand.
TEST_F(GpusimRowKernelsTest, BackwardOpsMatchTheCpu) {
  for (const char* op : {"bp::_softmax_backward_data", "bp::_log_softmax_backward_data", "bp::gelu_backward"})
    expectNative(op);
  auto call = [](const char* op, Stack stack) {
    Dispatcher::singleton().findOpOrThrow(op).callBoxed(stack);
    return stack.at(0).toTensor();
  };
  struct Case {
    ScalarType dtype;
    double atol, rtol;
  };
  for (const Case& c : {Case{ScalarType::Float32, 1e-5, 1e-4}, Case{ScalarType::Float64, 1e-12, 1e-10},
                        Case{ScalarType::Float16, 2e-2, 2e-2}}) {
    for (int64_t n : {int64_t{5}, int64_t{300}, int64_t{1000}}) {
      SCOPED_TRACE(std::string(scalarTypeName(c.dtype)) + " n=" + std::to_string(n));
      const int64_t rows = 7;
      const Tensor g = rowsOf(rows, n, c.dtype, -5.0);
      for (int64_t dim : {int64_t{1}, int64_t{0}}) {
        const Tensor y = softmax(rowsOf(rows, n, ScalarType::Float32, 0.0), dim).to(c.dtype);
        const Tensor ly = log_softmax(rowsOf(rows, n, ScalarType::Float32, 0.0), dim).to(c.dtype);
        for (const char* op : {"bp::_softmax_backward_data", "bp::_log_softmax_backward_data"}) {
          SCOPED_TRACE(std::string(op) + " dim " + std::to_string(dim));
          const Tensor& out = std::string(op).find("log") != std::string::npos ? ly : y;
          const Tensor got = call(op, {g.to(sim()), out.to(sim()), dim, c.dtype});
          EXPECT_EQ(got.device(), sim());
          expectClose(got, call(op, {g, out, dim, c.dtype}), c.atol * 10, c.rtol * 10);
        }
      }
      const Tensor x = rowsOf(rows, n, c.dtype, -4.0) * 0.5;
      for (const char* approximate : {"none", "tanh"}) {
        SCOPED_TRACE(approximate);
        expectClose(call("bp::gelu_backward", {g.to(sim()), x.to(sim()), std::string(approximate)}),
                    call("bp::gelu_backward", {g, x, std::string(approximate)}), c.atol * 10, c.rtol * 10);
        // A transposed operand.
        const Tensor gt = rowsOf(n, rows, c.dtype, -5.0).t();
        expectClose(call("bp::gelu_backward", {gt.to(sim()), x.to(sim()), std::string(approximate)}),
                    call("bp::gelu_backward", {gt, x, std::string(approximate)}), c.atol * 10, c.rtol * 10);
      }
    }
  }
  // softmax's gradient in the forward's input dtype (dtype=float64 over float32 data).
  const Tensor g = rowsOf(3, 4, ScalarType::Float32, 1.0), y = softmax(rowsOf(3, 4, ScalarType::Float32, 0.0), 1);
  const Tensor got = call("bp::_softmax_backward_data", {g.to(sim()), y.to(sim()), int64_t{1}, ScalarType::Float64});
  EXPECT_EQ(got.dtype(), ScalarType::Float64);
  expectClose(got, call("bp::_softmax_backward_data", {g, y, int64_t{1}, ScalarType::Float64}), 1e-6, 1e-5);
}

// embedding_dense_backward's kernel (one thread per column, the rows added
// in order: Note in plugins/gpu/backward.cu) against the CPU's: repeated
// indices add up, padding_idx's row stays 0, scale_grad_by_freq divides by
// the index's count; int32 and int64 indices, a transposed gradient; an
// index out of range is the CPU's kind of error, before anything is written.
TEST_F(GpusimRowKernelsTest, EmbeddingDenseBackwardMatchesTheCpu) {
  expectNative("bp::embedding_dense_backward");
  auto call = [](Stack stack) {
    Dispatcher::singleton().findOpOrThrow("bp::embedding_dense_backward").callBoxed(stack);
    return stack.at(0).toTensor();
  };
  const std::vector<int64_t> idx = {0, 4, 2, 2, 1, 4, 4, 5, 0, 2, 2, 3};
  for (ScalarType dt : {ScalarType::Float32, ScalarType::Float64}) {
    for (ScalarType it : {ScalarType::Int64, ScalarType::Int32}) {
      for (bool scale : {false, true}) {
        for (int64_t padding_idx : {int64_t{-1}, int64_t{2}}) {
          SCOPED_TRACE(::testing::Message()
                       << dt << " " << it << (scale ? " scaled" : "") << " padding_idx " << padding_idx);
          const Tensor g = rowsOf(12, 40, dt, -3.0).reshape({3, 4, 40});
          const Tensor i = Tensor(tensorFromVector<int64_t>(idx, {3, 4}, cpu())).to(it);
          const Tensor got = call({g.to(sim()), i.to(sim()), int64_t{7}, padding_idx, scale});
          EXPECT_EQ(got.device(), sim());
          expectClose(got, call({g, i, int64_t{7}, padding_idx, scale}), 1e-6, 1e-6);
          const Tensor gt = rowsOf(40, 12, dt, -3.0).t();  // [12, 40], transposed
          expectClose(call({gt.to(sim()), i.reshape({12}).to(sim()), int64_t{7}, padding_idx, scale}),
                      call({gt, i.reshape({12}), int64_t{7}, padding_idx, scale}), 1e-6, 1e-6);
        }
      }
    }
  }
  // An index out of range: reported at the next synchronization (Note
  // [Deferred device errors]), its row skipped.
  const Tensor bad = tensorFromVector<int64_t>({1, 9}, {2}, sim()), g = rowsOf(2, 3, ScalarType::Float32, 0.0);
  for (bool scale : {false, true}) {
    Tensor got;
    expectDeferredError(
        [&] {
          got = call({g.to(sim()), bad, int64_t{4}, int64_t{-1}, scale});
        },
        absl::StatusCode::kOutOfRange,
        {"bp::embedding_dense_backward: index 9 (element 1 of 'index') is out of range for "
         "dimension 0 of the weight, which has size 4"});
    const std::vector<double> rows = valuesOf(got), first = valuesOf(g);
    for (int j = 0; j < 3; ++j) EXPECT_EQ(rows[3 + j], first[j]) << "row 1 takes the in-range row's gradient";
  }
}

// max_pool2d_backward's and avg_pool2d_backward's kernels (one gather per
// input element) against the CPU's: strides smaller than, equal to and
// larger than the kernel, padding, dilation (max), ceil_mode windows past
// the input, an unbatched input, ties (small integer values: the first
// maximum takes the gradient), a NaN and a channels-last input.
TEST_F(GpusimRowKernelsTest, PoolBackwardsMatchTheCpu) {
  expectNative("bp::max_pool2d_backward");
  expectNative("bp::avg_pool2d_backward");
  auto call = [](const char* op, Stack stack) {
    Dispatcher::singleton().findOpOrThrow(op).callBoxed(stack);
    return stack.at(0).toTensor();
  };
  for (ScalarType dt : {ScalarType::Float32, ScalarType::Float64}) {
    for (const gpu_test::PoolCase& c : gpu_test::kPoolCases) {
      SCOPED_TRACE(::testing::Message() << dt << " input " << ::testing::PrintToString(c.input) << " kernel "
                                        << ::testing::PrintToString(c.kernel));
      int64_t numel = 1;
      for (int64_t v : c.input) numel *= v;
      std::vector<double> values(static_cast<size_t>(numel));
      for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>((i * 2654435761u) % 7);
      values[3] = std::nan("");
      const Tensor x = Tensor(tensorFromVector<double>(values, c.input, cpu())).to(dt);
      const Tensor y = call("bp::max_pool2d", {x, c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode});
      const Tensor g = rowsOf(1, y.numel(), dt, -2.0).reshape(y.sizes());
      const bool batched = c.input.size() == 4;
      // Channels-last storage (a non-contiguous input) as well.
      const Tensor x_cl = batched ? x.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2})
                                  : x.permute({1, 2, 0}).contiguous().permute({2, 0, 1});
      for (const Tensor& in : {x, x_cl}) {
        const Tensor want =
            call("bp::max_pool2d_backward", {g, in, c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode});
        expectClose(call("bp::max_pool2d_backward",
                         {g.to(sim()), in.to(sim()), c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode}),
                    want, 1e-6, 1e-6);
      }
      if (c.dilation != std::vector<int64_t>{1, 1}) continue;  // avg_pool2d has none
      for (bool include_pad : {true, false}) {
        for (const IValue& divisor : {IValue(), IValue(int64_t{5})}) {
          Stack args{g, x, c.kernel, c.stride, c.padding, c.ceil_mode, include_pad, divisor};
          Stack on_sim{g.to(sim()), x.to(sim()), c.kernel, c.stride, c.padding, c.ceil_mode, include_pad, divisor};
          expectClose(call("bp::avg_pool2d_backward", on_sim), call("bp::avg_pool2d_backward", args), 1e-6, 1e-6);
        }
      }
    }
  }
}

// batch_norm_backward's kernel (one block per channel) against the CPU's:
// training and evaluation, with and without a weight (of another dtype
// than the input's: the parameters' gradients come in its dtype), channels
// shorter and longer than a block, 2-D and 4-D inputs, and a mask that
// leaves the input's gradient out.
TEST_F(GpusimRowKernelsTest, BatchNormBackwardMatchesTheCpu) {
  expectNative("bp::batch_norm_backward");
  auto call = [](Stack stack) {
    Dispatcher::singleton().findOpOrThrow("bp::batch_norm_backward").callBoxed(stack);
    return stack;
  };
  for (ScalarType dt : {ScalarType::Float32, ScalarType::Float64}) {
    for (const std::vector<int64_t>& shape :
         {std::vector<int64_t>{3, 4, 5, 2}, std::vector<int64_t>{6, 3}, std::vector<int64_t>{4, 2, 700}}) {
      int64_t numel = 1;
      for (int64_t v : shape) numel *= v;
      const int64_t ch = shape[1];
      const Tensor x = rowsOf(1, numel, dt, 3.0).reshape(shape), g = rowsOf(1, numel, dt, -4.0).reshape(shape);
      const Tensor w = rowsOf(1, ch, ScalarType::Float32, 0.5).reshape({ch});
      const Tensor rm = rowsOf(1, ch, dt, 2.0).reshape({ch}), rv = rowsOf(1, ch, dt, 0.5).reshape({ch});
      for (bool training : {true, false}) {
        for (bool with_weight : {true, false}) {
          for (const std::vector<bool>& mask : {std::vector<bool>{true, true, true}, {false, true, true}}) {
            SCOPED_TRACE(::testing::Message()
                         << dt << " " << ::testing::PrintToString(shape) << (training ? " training" : " evaluation")
                         << (with_weight ? " weight" : "") << (mask[0] ? "" : " no input"));
            const Stack want = call({g, x, with_weight ? IValue(w) : IValue(), rm, rv, training, 1e-5, mask});
            const Stack got = call({g.to(sim()), x.to(sim()), with_weight ? IValue(w.to(sim())) : IValue(),
                                    rm.to(sim()), rv.to(sim()), training, 1e-5, mask});
            for (size_t i = 0; i < 3; ++i) {
              ASSERT_EQ(got[i].toTensor().defined(), mask[i]);
              if (!mask[i]) continue;
              EXPECT_EQ(got[i].toTensor().dtype(), want[i].toTensor().dtype());
              expectClose(got[i].toTensor(), want[i].toTensor(), dt == ScalarType::Float32 ? 1e-4 : 1e-10,
                          dt == ScalarType::Float32 ? 1e-4 : 1e-10);
            }
          }
        }
      }
    }
  }
}

// layer_norm and var of rows with a large offset and a small spread
// (1000 + 0.01 * u) against a float64 reference over the same float32
// values: the variance and the deviations must not lose the spread to the
// offset (two passes over the row less its first element; Welford).
TEST_F(GpusimRowKernelsTest, LargeOffsetSmallSpreadMatchesFloat64) {
  const int64_t rows = 4, n = 1000;
  std::vector<float> v(static_cast<size_t>(rows * n));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(1000.0 + 0.01 * (static_cast<double>((i * 2654435761u) % 2001) / 1000.0 - 1.0));
  const Tensor x = tensorFromVector<float>(v, {rows, n}, cpu());
  const Tensor x64 = x.to(ScalarType::Float64);
  const Tensor ln = layer_norm(x.to(sim()), {n}), ln64 = layer_norm(x64, {n});
  double err = 0;
  const std::vector<double> got = valuesOf(ln), want = valuesOf(ln64);
  for (size_t i = 0; i < got.size(); ++i) err = std::max(err, std::abs(got[i] - want[i]));
  std::cout << "[ numerics ] gpusim layer_norm, float32: max |error| vs float64 = " << err << "\n";
  EXPECT_LE(err, 1e-4);
  const std::vector<double> var_got = valuesOf(var(x.to(sim()), {1})), var_want = valuesOf(var(x64, {1}));
  double rel = 0;
  for (size_t r = 0; r < var_got.size(); ++r) rel = std::max(rel, std::abs(var_got[r] - var_want[r]) / var_want[r]);
  std::cout << "[ numerics ] gpusim var, float32: max relative error vs float64 = " << rel << "\n";
  EXPECT_LE(rel, 1e-4);
}

// 40000 reduced elements: past kSplitMinElements twice over, with few
// outputs, so every reduction here is split across blocks on the simulator.
TEST_F(GpusimRowKernelsTest, LongReductionsSplitAcrossBlocksMatchTheCpu) {
  for (const char* op :
       {"bp::sum.IntList_out", "bp::mean.out", "bp::amax.out", "bp::argmax.out", "bp::var.correction_out"})
    expectNative(op);
  const int64_t n = 40000;
  for (ScalarType dtype : {ScalarType::Float32, ScalarType::Float16, ScalarType::Int64}) {
    SCOPED_TRACE(std::string(scalarTypeName(dtype)));
    const bool floating = dtype != ScalarType::Int64;
    const Tensor x = rowsOf(3, n, dtype, floating ? 1.0 : -500.0);
    const Tensor xs = x.to(sim());
    const double tol = dtype == ScalarType::Float16 ? 1e-2 : 1e-5;
    // To one value, and along each dim.
    if (floating) {
      expectClose(xs.sum(), x.sum(), 0, tol);
      expectClose(xs.sum({1}), x.sum({1}), 0, tol);
      expectClose(xs.mean({1}), x.mean({1}), 0, tol);
      expectClose(var(xs, {1}), var(x, {1}), 0, tol);
      // Columns: the reduced dim strided, neighbouring outputs adjacent.
      const Tensor columns = x.t().contiguous();
      expectClose(var(columns.to(sim()), {0}), var(columns, {0}), 0, tol);
      expectClose(columns.to(sim()).sum({0}), columns.sum({0}), 0, tol);
    } else {
      EXPECT_EQ(valuesOf(xs.sum()), valuesOf(x.sum()));
      EXPECT_EQ(valuesOf(xs.sum({1})), valuesOf(x.sum({1})));
    }
    EXPECT_EQ(valuesOf(xs.amax({1})), valuesOf(x.amax({1})));
    EXPECT_EQ(valuesOf(xs.argmax(1)), valuesOf(x.argmax(1)));
    EXPECT_EQ(valuesOf(xs.argmax()), valuesOf(x.argmax()));
    EXPECT_EQ(valuesOf(xs.argmin(1)), valuesOf(x.argmin(1)));
  }
  // Integer sums wrap, as PyTorch's, whichever block adds what.
  const Tensor huge = full({n}, Scalar((int64_t{1} << 62) + 12345), {ScalarType::Int64, cpu()});
  EXPECT_EQ(valuesOf(huge.to(sim()).sum()), valuesOf(huge.sum()));
  // Ties resolve to the first index and NaN wins, across blocks: the
  // maximum at 5 and in the last part; a NaN in a middle part only.
  std::vector<float> v(static_cast<size_t>(n), 0.0f);
  v[5] = v[n - 3] = 9.0f;
  const Tensor ties = tensorFromVector<float>(v, {n}, cpu());
  EXPECT_EQ(valuesOf(ties.to(sim()).argmax()), (std::vector<double>{5}));
  EXPECT_EQ(valuesOf(ties.to(sim()).argmin()), (std::vector<double>{0}));
  v[n / 2] = NAN;
  v[n / 2 + 100] = NAN;
  const Tensor with_nan = tensorFromVector<float>(v, {n}, cpu());
  EXPECT_EQ(valuesOf(with_nan.to(sim()).argmax()), (std::vector<double>{static_cast<double>(n / 2)}));
  EXPECT_TRUE(std::isnan(valuesOf(with_nan.to(sim()).amax())[0]));
  EXPECT_TRUE(std::isnan(valuesOf(with_nan.to(sim()).sum())[0]));
}

// A linear layer's bias gradient: [batch, seq, hidden] summed over batch
// and seq, the column layout with 8 lanes per output. On the simulator's 4
// multiprocessors 96 outputs fill 3 blocks; 128 reduced elements give each
// lane 16 reads, enough to split in 2 parts (two launches: the parts, then
// their merge); 64 give 8, too few (one launch). Both match the CPU, for
// sum, mean, var and an integer sum.
TEST_F(GpusimRowKernelsTest, ShortColumnsSplitByTheirReadsPerLaneMatchTheCpu) {
  for (const auto& [batch, expected_launches] : {std::pair<int64_t, int64_t>{8, 2}, {4, 1}}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    const Tensor x = rowsOf(batch * 16, 96, ScalarType::Float32, 1.0).reshape({batch, 16, 96});
    const Tensor xs = x.to(sim());
    const int64_t before = activity("kernel_launches");
    const Tensor sums = xs.sum({0, 1});
    EXPECT_EQ(activity("kernel_launches") - before, expected_launches) << "the sum's kernels";
    expectClose(sums, x.sum({0, 1}), 0, 1e-5);
    expectClose(xs.mean({0, 1}), x.mean({0, 1}), 0, 1e-5);
    expectClose(var(xs, {0, 1}), var(x, {0, 1}), 0, 1e-4);
    const Tensor ints = x.to(ScalarType::Int64);
    EXPECT_EQ(valuesOf(ints.to(sim()).sum({0, 1})), valuesOf(ints.sum({0, 1})));
  }
}

}  // namespace
}  // namespace backplane
