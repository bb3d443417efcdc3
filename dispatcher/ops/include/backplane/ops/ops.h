#pragma once
// The standard operators as C++ functions, for applications:
//
//   Tensor x = randn({8, 128, 768}, {.device = dev});
//   Tensor y = layer_norm(x.matmul(w) + b, {768}, gamma, beta).gelu();
//
// Each function calls the operator of the same name in the standard table
// (namespace "bp", backplane/ops/standard_ops.h) through a typed
// handle looked up once: it dispatches on the devices of its tensor
// arguments to the plugin's kernel, a composite, or the CPU fallback, with
// PyTorch's semantics (broadcasting, type promotion, error messages). The
// tensor methods of the same names (backplane/ops/tensor.h) call these. All tensor arguments of one call must be on one
// device; move one with to() first.
//
// Scalars: `t * 2.0`, `add(t, 1)` and friends wrap the number in a 0-d CPU
// tensor of the dtype PyTorch gives a Python number there (an integer keeps
// t's dtype, a float keeps t's floating dtype, an integer tensor gets float32)
// and call the Tensor overload, which passes it to t's device as a kernel argument.

#include <cstdint>
#include <optional>
#include <string_view>
#include <tuple>

#include "backplane/dispatch/boxing.h"
#include "backplane/ops/tensor.h"

namespace backplane {

// dtype and device of a new tensor; unset fields mean float32 (or what the
// op infers, e.g. arange of integers) and the CPU. Designated initializers
// read well: zeros({2, 3}, {.dtype = ScalarType::Float16, .device = dev}).
struct TensorOptions {
  std::optional<ScalarType> dtype = std::nullopt;
  std::optional<Device> device = std::nullopt;
};

// --- Factories.
Tensor empty(IntArrayRef size, const TensorOptions& options = {});
Tensor zeros(IntArrayRef size, const TensorOptions& options = {});
Tensor ones(IntArrayRef size, const TensorOptions& options = {});
Tensor full(IntArrayRef size, const Scalar& fill_value, const TensorOptions& options = {});
// [0, end) and [start, end) by step; the dtype is int64 when every bound is
// an integer, else float32, unless options.dtype says otherwise.
Tensor arange(const Scalar& end, const TensorOptions& options = {});
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step = 1, const TensorOptions& options = {});
// Uniform on [0, 1) and standard normal, from the process's Philox stream
// (backplane/ops/random.h: manualSeed): a seed gives the same
// numbers on every device.
Tensor rand(IntArrayRef size, const TensorOptions& options = {});
Tensor randn(IntArrayRef size, const TensorOptions& options = {});
// Like `self` (its sizes; its dtype and device unless options say otherwise).
Tensor empty_like(const Tensor& self, const TensorOptions& options = {});
Tensor zeros_like(const Tensor& self, const TensorOptions& options = {});
Tensor ones_like(const Tensor& self, const TensorOptions& options = {});
Tensor full_like(const Tensor& self, const Scalar& fill_value, const TensorOptions& options = {});
Tensor rand_like(const Tensor& self, const TensorOptions& options = {});
Tensor randn_like(const Tensor& self, const TensorOptions& options = {});

// --- Elementwise, with broadcasting and type promotion.
Tensor add(const Tensor& self, const Tensor& other, const Scalar& alpha = 1);  // self + alpha * other
Tensor sub(const Tensor& self, const Tensor& other, const Scalar& alpha = 1);  // self - alpha * other
Tensor mul(const Tensor& self, const Tensor& other);
Tensor div(const Tensor& self, const Tensor& other);  // true division: integers give float32
Tensor add(const Tensor& self, const Scalar& other);
Tensor sub(const Tensor& self, const Scalar& other);
Tensor mul(const Tensor& self, const Scalar& other);
Tensor div(const Tensor& self, const Scalar& other);
Tensor pow(const Tensor& self, const Scalar& exponent);
Tensor pow(const Tensor& self, const Tensor& exponent);
Tensor maximum(const Tensor& self, const Tensor& other);
Tensor minimum(const Tensor& self, const Tensor& other);
Tensor clamp(const Tensor& self, const std::optional<Scalar>& min, const std::optional<Scalar>& max = std::nullopt);
Tensor where(const Tensor& condition, const Tensor& self, const Tensor& other);
Tensor masked_fill(const Tensor& self, const Tensor& mask, const Scalar& value);
// Comparisons give bool tensors.
Tensor eq(const Tensor& self, const Tensor& other);
Tensor ne(const Tensor& self, const Tensor& other);
Tensor lt(const Tensor& self, const Tensor& other);
Tensor le(const Tensor& self, const Tensor& other);
Tensor gt(const Tensor& self, const Tensor& other);
Tensor ge(const Tensor& self, const Tensor& other);
Tensor eq(const Tensor& self, const Scalar& other);
Tensor ne(const Tensor& self, const Scalar& other);
Tensor lt(const Tensor& self, const Scalar& other);
Tensor le(const Tensor& self, const Scalar& other);
Tensor gt(const Tensor& self, const Scalar& other);
Tensor ge(const Tensor& self, const Scalar& other);
Tensor neg(const Tensor& self);
Tensor abs(const Tensor& self);
Tensor exp(const Tensor& self);
Tensor log(const Tensor& self);
Tensor sqrt(const Tensor& self);
Tensor rsqrt(const Tensor& self);
Tensor sin(const Tensor& self);
Tensor cos(const Tensor& self);
Tensor tanh(const Tensor& self);
Tensor sigmoid(const Tensor& self);
Tensor relu(const Tensor& self);
Tensor gelu(const Tensor& self, std::string_view approximate = "none");  // or "tanh"
Tensor silu(const Tensor& self);

// --- More elementwise ops, as PyTorch's (docs/operators.md: "More elementwise operators").
// Division rounded toward zero ("trunc") or negative infinity ("floor"); no
// mode is true division. Integral division by zero raises ZeroDivisionError.
Tensor div(const Tensor& self, const Tensor& other, std::optional<std::string_view> rounding_mode);
Tensor div(const Tensor& self, const Scalar& other, std::optional<std::string_view> rounding_mode);
Tensor true_divide(const Tensor& self, const Tensor& other);
Tensor floor_divide(const Tensor& self, const Tensor& other);  // rounds toward negative infinity
Tensor floor_divide(const Tensor& self, const Scalar& other);
Tensor remainder(const Tensor& self, const Tensor& other);  // the sign of other (Python's %)
Tensor remainder(const Tensor& self, const Scalar& other);
Tensor fmod(const Tensor& self, const Tensor& other);  // the sign of self (C's fmod)
Tensor fmod(const Tensor& self, const Scalar& other);
Tensor floor(const Tensor& self);
Tensor ceil(const Tensor& self);
Tensor trunc(const Tensor& self);
Tensor round(const Tensor& self);                    // halves to even
Tensor round(const Tensor& self, int64_t decimals);  // floating self; negative decimals round to tens, ...
Tensor sign(const Tensor& self);
Tensor erf(const Tensor& self);
Tensor leaky_relu(const Tensor& self, const Scalar& negative_slope = 0.01);
Tensor hardtanh(const Tensor& self, const Scalar& min_val = -1, const Scalar& max_val = 1);
Tensor elu(const Tensor& self, const Scalar& alpha = 1, const Scalar& scale = 1, const Scalar& input_scale = 1);
Tensor softplus(const Tensor& self, const Scalar& beta = 1, const Scalar& threshold = 20);
// Integral and bool operands (on bool, the logical ops).
Tensor bitwise_and(const Tensor& self, const Tensor& other);
Tensor bitwise_or(const Tensor& self, const Tensor& other);
Tensor bitwise_xor(const Tensor& self, const Tensor& other);
Tensor bitwise_and(const Tensor& self, const Scalar& other);
Tensor bitwise_or(const Tensor& self, const Scalar& other);
Tensor bitwise_xor(const Tensor& self, const Scalar& other);
Tensor bitwise_not(const Tensor& self);
// Operands of any dtype, true where non-zero; bool results.
Tensor logical_and(const Tensor& self, const Tensor& other);
Tensor logical_or(const Tensor& self, const Tensor& other);
Tensor logical_xor(const Tensor& self, const Tensor& other);
Tensor logical_not(const Tensor& self);
Tensor isnan(const Tensor& self);
Tensor isinf(const Tensor& self);
Tensor isfinite(const Tensor& self);
// NaN to `nan` (0), +inf to `posinf`, -inf to `neginf` (default: the dtype's largest and lowest values).
Tensor nan_to_num(const Tensor& self, std::optional<double> nan = std::nullopt,
                  std::optional<double> posinf = std::nullopt, std::optional<double> neginf = std::nullopt);

// --- Linear algebra.
Tensor matmul(const Tensor& self, const Tensor& other);  // torch.matmul: 1-d, 2-d and batched with broadcasting
Tensor mm(const Tensor& self, const Tensor& mat2);
Tensor bmm(const Tensor& self, const Tensor& mat2);
Tensor addmm(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta = 1,
             const Scalar& alpha = 1);  // beta * self + alpha * (mat1 @ mat2)
// input @ weight.T + bias; weight is [out_features, in_features].
Tensor linear(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt);
// relu, or the exact gelu with use_gelu, of addmm(self, mat1, mat2, beta,
// alpha) in one call, which a plugin may fuse (PyTorch's
// torch._addmm_activation; Note [Fused activation products]): a dense
// layer's product, bias and activation, e.g. _addmm_activation(bias, x,
// weight.t(), 1, 1, true) for gelu(linear(x, weight, bias)) on 2-d x.
Tensor _addmm_activation(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta = 1,
                         const Scalar& alpha = 1, bool use_gelu = false);

// --- Reductions. An empty `dim` list reduces over every dimension.
Tensor sum(const Tensor& self, std::optional<ScalarType> dtype = std::nullopt);
Tensor sum(const Tensor& self, IntArrayRef dim, bool keepdim = false, std::optional<ScalarType> dtype = std::nullopt);
Tensor mean(const Tensor& self, std::optional<ScalarType> dtype = std::nullopt);
Tensor mean(const Tensor& self, IntArrayRef dim, bool keepdim = false, std::optional<ScalarType> dtype = std::nullopt);
Tensor amax(const Tensor& self, IntArrayRef dim = {}, bool keepdim = false);
Tensor amin(const Tensor& self, IntArrayRef dim = {}, bool keepdim = false);
Tensor argmax(const Tensor& self, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& self, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
// Variance and standard deviation with Bessel's correction (correction = 1).
Tensor var(const Tensor& self, IntArrayRef dim, bool keepdim = false, int64_t correction = 1);
Tensor std(const Tensor& self, IntArrayRef dim, bool keepdim = false, int64_t correction = 1);
// The p-norm over dims (every dim when none): max |x| for p = inf, the nonzero count for p = 0,
// (sum |x|^p)^(1/p) otherwise. Floating dtypes.
Tensor norm(const Tensor& self, double p = 2, std::optional<IntArrayRef> dim = std::nullopt, bool keepdim = false);

// --- Products, logical reductions, scans and sorts, as PyTorch's (docs/operators.md "Sorting, scans, products, flip
// and pad"): integral and bool inputs of prod and cumsum give int64 unless dtype= says otherwise; all/any
// give bool (uint8 for a uint8 input); sort is stable and puts NaN last (first when descending); topk
// returns its k values in sorted order with their int64 indices.
Tensor prod(const Tensor& self, std::optional<ScalarType> dtype = std::nullopt);
Tensor prod(const Tensor& self, int64_t dim, bool keepdim = false, std::optional<ScalarType> dtype = std::nullopt);
Tensor all(const Tensor& self);
Tensor all(const Tensor& self, int64_t dim, bool keepdim = false);
Tensor all(const Tensor& self, IntArrayRef dim, bool keepdim = false);  // an empty list reduces no dim
Tensor any(const Tensor& self);
Tensor any(const Tensor& self, int64_t dim, bool keepdim = false);
Tensor any(const Tensor& self, IntArrayRef dim, bool keepdim = false);  // an empty list reduces no dim
Tensor cumsum(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype = std::nullopt);
Tensor cumprod(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype = std::nullopt);
std::tuple<Tensor, Tensor> sort(const Tensor& self, int64_t dim = -1, bool descending = false);
std::tuple<Tensor, Tensor> topk(const Tensor& self, int64_t k, int64_t dim = -1, bool largest = true,
                                bool sorted = true);

// --- Neural-network layers.
Tensor softmax(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype = std::nullopt);
Tensor log_softmax(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype = std::nullopt);
// Normalises over the trailing dimensions `normalized_shape`.
Tensor layer_norm(const Tensor& input, IntArrayRef normalized_shape, const std::optional<Tensor>& weight = std::nullopt,
                  const std::optional<Tensor>& bias = std::nullopt, double eps = 1e-5);
// Rows of weight [num_embeddings, dim] picked by integer `indices`.
Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx = -1);
// Zeroes elements with probability p and scales the rest by 1/(1-p) when
// `train`; the identity otherwise.
Tensor dropout(const Tensor& input, double p, bool train);
Tensor conv2d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt,
              IntArrayRef stride = {1, 1}, IntArrayRef padding = {0, 0}, IntArrayRef dilation = {1, 1},
              int64_t groups = 1);
Tensor max_pool2d(const Tensor& self, IntArrayRef kernel_size, IntArrayRef stride = {}, IntArrayRef padding = {0, 0});
Tensor avg_pool2d(const Tensor& self, IntArrayRef kernel_size, IntArrayRef stride = {}, IntArrayRef padding = {0, 0});

// torch.einsum: "ij,jk->ik" and friends (letters, one "..." per operand, diagonals); the operands are
// contracted left to right, each pair as one bmm (Note [einsum] in dispatcher/ops/src/linalg.cc).
Tensor einsum(std::string_view equation, TensorList tensors);

// --- Indexing and joining.
Tensor cat(TensorList tensors, int64_t dim = 0);
Tensor stack(TensorList tensors, int64_t dim = 0);
Tensor index_select(const Tensor& self, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& self, int64_t dim, const Tensor& index);
// Reverses the listed dims.
Tensor flip(const Tensor& self, IntArrayRef dims);
// out = self with out[.., index[p], ..] = src[p] (or value) along dim; where two indices name one place,
// which lands is unspecified on a GPU.
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Scalar& value);
// self with alpha * source added at index along dim (index 1-d, int64 or int32).
Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha = 1);
// Advanced indexing (Note [Advanced indexing]): one entry per leading dim, std::nullopt for a whole dim, an
// integer tensor, or a bool mask over the next dims. index() is self[indices]; index_put_() writes
// values there (adding with accumulate) and returns self.
Tensor index(const Tensor& self, ArrayRef<std::optional<Tensor>> indices);
const Tensor& index_put_(const Tensor& self, ArrayRef<std::optional<Tensor>> indices, const Tensor& values,
                         bool accumulate = false);
// The coordinates ([count, ndim], int64) of the nonzero elements, in row-major order; the elements of self
// where mask (broadcast, bool) is true, as a 1-d tensor. Both read a count back to the host.
Tensor nonzero(const Tensor& self);
Tensor masked_select(const Tensor& self, const Tensor& mask);
// The lower (upper) triangle of the last two dims, on and below (above) the diagonal shifted by `diagonal`.
Tensor tril(const Tensor& self, int64_t diagonal = 0);
Tensor triu(const Tensor& self, int64_t diagonal = 0);
// Elements shifted by shifts[i] along dims[i], wrapping; with no dims, along the flattened tensor.
Tensor roll(const Tensor& self, IntArrayRef shifts, IntArrayRef dims = {});
// The tensor tiled repeats[i] times along dim i (repeats may have more entries than self has dims).
Tensor repeat(const Tensor& self, IntArrayRef repeats);
// |self - other| <= atol + rtol * |other|, elementwise (NaNs equal with equal_nan); allclose: all of it.
Tensor isclose(const Tensor& self, const Tensor& other, double rtol = 1e-05, double atol = 1e-08,
               bool equal_nan = false);
bool allclose(const Tensor& self, const Tensor& other, double rtol = 1e-05, double atol = 1e-08,
              bool equal_nan = false);
// torch.nn.functional.pad: (before, after) pairs for the last dims, the last first; mode "constant"
// (value, default 0), "reflect" or "replicate".
Tensor pad(const Tensor& self, IntArrayRef pad, std::string_view mode = "constant",
           std::optional<double> value = std::nullopt);

// --- Optimizer steps (Note [Optimizer ops]; docs/operators.md "Optimizer steps"): each updates
// every tensor of `self` and its state in place, from the gradient at the same position. The
// classes of backplane/autograd/optim.h (SGD, AdamW) keep the state and call these under no_grad.
// torch.optim.SGD's step; momentum_buffer_list may be empty when momentum is 0.
void _fused_sgd_(TensorList self, TensorList grads, TensorList momentum_buffer_list, double weight_decay,
                 double momentum, double lr, double dampening, bool nesterov, bool maximize, bool is_first_step);
// torch.optim.AdamW's step number `step` (counted from 1); max_exp_avg_sqs only with amsgrad.
void _fused_adamw_(TensorList self, TensorList grads, TensorList exp_avgs, TensorList exp_avg_sqs,
                   TensorList max_exp_avg_sqs, int64_t step, double lr, double beta1, double beta2, double weight_decay,
                   double eps, bool amsgrad, bool maximize);

// --- Operators. Arithmetic on tensors and numbers, as in PyTorch; the
// compound forms write into the left tensor (its dtype must hold the result).
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, const Scalar& b);
Tensor operator-(const Tensor& a, const Scalar& b);
Tensor operator*(const Tensor& a, const Scalar& b);
Tensor operator/(const Tensor& a, const Scalar& b);
Tensor operator+(const Scalar& a, const Tensor& b);
Tensor operator-(const Scalar& a, const Tensor& b);
Tensor operator*(const Scalar& a, const Tensor& b);
Tensor operator/(const Scalar& a, const Tensor& b);
Tensor operator-(const Tensor& a);
const Tensor& operator+=(const Tensor& a, const Tensor& b);
const Tensor& operator-=(const Tensor& a, const Tensor& b);
const Tensor& operator*=(const Tensor& a, const Tensor& b);
const Tensor& operator/=(const Tensor& a, const Tensor& b);

}  // namespace backplane
