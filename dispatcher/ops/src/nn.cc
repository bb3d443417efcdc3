// The "nn" standard operators: conv2d, max_pool2d, avg_pool2d, batch_norm,
// layer_norm. They are plain (functional) ops that backends implement, but
// for layer_norm, which is structured (layer_norm.out the kernel); each
// has a meta kernel that applies PyTorch's argument and shape rules before
// any kernel runs, so every device (CPU fallback included) reports bad
// arguments the same way and kernels can assume valid input.
#include <array>
#include <optional>

#include "backplane/core/error.h"
#include "families.h"
#include "meta.h"
#include "structured.h"

namespace backplane::ops {

namespace {

void checkDefined(const std::string& op, const Tensor& t, const char* name) {
  BP_CHECK(t.defined(), op, ": argument '", name, "' is undefined");
}

// An `int[2]` argument as PyTorch reads it: one value stands for both
// spatial dimensions. Returns {h, w}.
std::array<int64_t, 2> pair(const std::string& op, IntArrayRef v, const char* name) {
  BP_CHECK(v.size() == 1 || v.size() == 2, op, ": argument '", name,
           "' must be a single int or a list of two ints (height, width), but got ", shapeString(v));
  return v.size() == 1 ? std::array<int64_t, 2>{v[0], v[0]} : std::array<int64_t, 2>{v[0], v[1]};
}

// Tensor arguments other than `input` must match its dtype (PyTorch's
// "Input type and weight type should be the same").
void checkSameDtype(const std::string& op, const Tensor& input, const Tensor& t, const char* name) {
  if (!t.defined()) return;
  BP_CHECK(t.dtype() == input.dtype(), op, ": argument '", name, "' has dtype ", t.dtype(), " but 'input' has ",
           input.dtype(), "; convert one with .to(dtype) so they match");
}

// Note [Window geometry overflow]
// Sizes, padding, dilation and kernel sizes are the caller's int64s, so the
// output size arithmetic of a window op (in + 2 * padding - dilation *
// (kernel - 1) - 1) can overflow: a padding of 2^63 - 1 once wrapped into a
// "valid" geometry that reached the kernel as a negative output size. The
// metas compute it with checked arithmetic and refuse such a geometry,
// naming every number that went into it, before any kernel runs; a
// geometry that passes fits int64 at every step in any order the kernels
// compute it.

// (in + 2 * pad - (dilation * (k - 1) + 1)) / stride + 1, the division
// rounding down (up in ceil mode), with each step checked (Note [Window
// geometry overflow]); nullopt when a step overflows int64. The span may be
// negative (a kernel larger than the padded input).
std::optional<int64_t> windowOutputSize(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dilation,
                                        bool ceil_mode = false) {
  int64_t padded, extent, span;
  if (__builtin_mul_overflow(pad, int64_t{2}, &padded) || __builtin_add_overflow(in, padded, &padded) ||
      __builtin_mul_overflow(dilation, k - 1, &extent) || __builtin_add_overflow(extent, int64_t{1}, &extent) ||
      __builtin_sub_overflow(padded, extent, &span))
    return std::nullopt;
  // Rounding by the remainder, not by adding stride - 1 first, which could
  // overflow for a huge stride.
  int64_t quotient = span / stride;
  const int64_t remainder = span % stride;
  if (remainder != 0 && (span < 0) != ceil_mode) quotient += ceil_mode ? 1 : -1;
  int64_t out;
  if (__builtin_add_overflow(quotient, int64_t{1}, &out)) return std::nullopt;  // an empty kernel: extent 1 - dilation
  return out;
}

// "conv2d: output size overflows int64 (input 5 x 5, kernel 3 x 3, stride
// [1], padding [9223372036854775807], dilation [1]); ...".
[[noreturn]] void throwGeometryOverflow(const std::string& op, int64_t h, int64_t w, int64_t kh, int64_t kw,
                                        IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation) {
  BP_THROW(kInvalidArgument, op, ": output size overflows int64 (input ", h, " x ", w, ", kernel ", kh, " x ", kw,
           ", stride ", shapeString(stride), ", padding ", shapeString(padding), ", dilation ", shapeString(dilation),
           "); use a smaller padding, dilation or kernel");
}

// --- conv2d

}  // namespace

std::array<int64_t, 2> conv2dOutputSize(const std::string& op, const StandardOp& rule, const Tensor& input,
                                        const Tensor& weight, const Tensor& b, IntArrayRef stride, IntArrayRef padding,
                                        IntArrayRef dilation, int64_t groups) {
  checkDefined(op, input, "input");
  checkDefined(op, weight, "weight");
  commonDevice(op, {{"input", &input}, {"weight", &weight}, {"bias", &b}});
  checkDtypes(op, rule, {{"input", &input}, {"weight", &weight}, {"bias", &b}});
  checkSameDtype(op, input, weight, "weight");
  checkSameDtype(op, input, b, "bias");
  BP_CHECK(input.dim() == 3 || input.dim() == 4, op,
           ": expected a 3-D (unbatched: C, H, W) or 4-D (batched: N, C, H, W) input, but got input of size ",
           shapeString(input.sizes()));
  BP_CHECK(weight.dim() == 4, op, ": expected a 4-D weight (out_channels, in_channels / groups, kH, kW), but got ",
           "weight of size ", shapeString(weight.sizes()));
  const auto s = pair(op, stride, "stride");
  const auto p = pair(op, padding, "padding");
  const auto d = pair(op, dilation, "dilation");
  BP_CHECK(s[0] > 0 && s[1] > 0, op, ": stride must be positive, but got ", shapeString(stride));
  BP_CHECK(p[0] >= 0 && p[1] >= 0, op, ": padding must be non-negative, but got ", shapeString(padding));
  BP_CHECK(d[0] > 0 && d[1] > 0, op, ": dilation must be positive, but got ", shapeString(dilation));
  BP_CHECK(groups > 0, op, ": groups must be positive, but got ", groups);
  const int64_t out_channels = weight.size(0);
  BP_CHECK(out_channels % groups == 0, op, ": given groups=", groups, ", the weight's first dimension (out_channels) ",
           "must be divisible by ", groups, ", but got weight of size ", shapeString(weight.sizes()));
  const int64_t batch_dim = input.dim() == 4 ? 1 : 0;
  const int64_t channels = input.size(batch_dim);
  BP_CHECK(channels == weight.size(1) * groups, op, ": given groups=", groups, " and weight of size ",
           shapeString(weight.sizes()), ", expected input of size ", shapeString(input.sizes()), " to have ",
           weight.size(1) * groups, " channels, but it has ", channels);
  if (b.defined()) {
    BP_CHECK(b.dim() == 1 && b.size(0) == out_channels, op, ": expected bias to be 1-D with ", out_channels,
             " elements (weight.size(0)), but got bias of size ", shapeString(b.sizes()));
  }
  const int64_t h = input.size(batch_dim + 1), w = input.size(batch_dim + 2);
  const int64_t kh = weight.size(2), kw = weight.size(3);
  std::array<int64_t, 2> out{};
  for (int i = 0; i < 2; ++i) {
    const std::optional<int64_t> size = windowOutputSize(i == 0 ? h : w, i == 0 ? kh : kw, p[i], s[i], d[i]);
    if (!size) throwGeometryOverflow(op, h, w, kh, kw, stride, padding, dilation);
    out[i] = *size;
  }
  // Each padded size and dilated kernel extent fits int64 (checked above).
  BP_CHECK(out[0] >= 1 && out[1] >= 1, op, ": the padded input is ", h + 2 * p[0], " x ", w + 2 * p[1],
           " per channel, smaller than the (dilated) kernel ", d[0] * (kh - 1) + 1, " x ", d[1] * (kw - 1) + 1,
           "; use a smaller kernel or dilation, or more padding");
  return out;
}

namespace {

void conv2dMeta(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias, IntArrayRef stride,
                IntArrayRef padding, IntArrayRef dilation, int64_t groups) {
  conv2dOutputSize(qualified<"conv2d">(), standardOp<"conv2d">(), input, weight, orUndefined(bias), stride, padding,
                   dilation, groups);
}

// --- pooling

// PyTorch's pooling_output_shape: with ceil_mode the last window may hang
// over the end, but it must start inside the input or the left padding.
// nullopt when the arithmetic overflows (Note [Window geometry overflow]).
std::optional<int64_t> poolOutputSize(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dilation,
                                      bool ceil_mode) {
  std::optional<int64_t> out = windowOutputSize(in, k, pad, stride, dilation, ceil_mode);
  int64_t last_start;  // of the last window; past int64 is past the input
  if (out && ceil_mode && *out > 1 && (__builtin_mul_overflow(*out - 1, stride, &last_start) || last_start >= in + pad))
    --*out;
  return out;
}

}  // namespace

std::array<int64_t, 2> pool2dOutputSize(const std::string& op, const StandardOp& rule, const Tensor& self,
                                        IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding,
                                        IntArrayRef dilation, bool ceil_mode) {
  checkDefined(op, self, "self");
  checkDtypes(op, rule, {{"self", &self}});
  BP_CHECK(self.dim() == 3 || self.dim() == 4, op,
           ": expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, but got input of size ", shapeString(self.sizes()));
  for (int64_t i = self.dim() - 3; i < self.dim(); ++i) {
    BP_CHECK(self.size(i) > 0, op,
             ": expected the input's non-batch dimensions to be non-empty, but got input of size ",
             shapeString(self.sizes()), " (only the batch dimension may be 0)");
  }
  const auto k = pair(op, kernel_size, "kernel_size");
  BP_CHECK(stride.size() <= 2, op, ": argument 'stride' must be empty (= kernel_size), a single int or two ints, ",
           "but got ", shapeString(stride));
  const auto s = stride.empty() ? k : pair(op, stride, "stride");
  const auto p = pair(op, padding, "padding");
  const auto d = pair(op, dilation, "dilation");
  BP_CHECK(k[0] > 0 && k[1] > 0, op, ": kernel_size must be positive, but got ", shapeString(kernel_size));
  BP_CHECK(s[0] > 0 && s[1] > 0, op, ": stride must be positive, but got ", shapeString(stride));
  BP_CHECK(d[0] > 0 && d[1] > 0, op, ": dilation must be positive, but got ", shapeString(dilation));
  BP_CHECK(p[0] >= 0 && p[1] >= 0, op, ": padding must be non-negative, but got ", shapeString(padding));
  BP_CHECK(p[0] <= k[0] / 2 && p[1] <= k[1] / 2, op, ": padding must be at most half the kernel size, but got ",
           "padding ", shapeString(padding), " for kernel_size ", shapeString(kernel_size));
  const int64_t h = self.size(-2), w = self.size(-1);
  const std::optional<int64_t> out_h = poolOutputSize(h, k[0], p[0], s[0], d[0], ceil_mode);
  const std::optional<int64_t> out_w = poolOutputSize(w, k[1], p[1], s[1], d[1], ceil_mode);
  if (!out_h || !out_w) throwGeometryOverflow(op, h, w, k[0], k[1], stride, padding, dilation);
  const int64_t oh = *out_h, ow = *out_w;
  BP_CHECK(oh >= 1 && ow >= 1, op, ": the output would be ", oh, " x ", ow, " for an input of ", h, " x ", w,
           " (kernel_size ", shapeString(kernel_size), ", stride ", shapeString(stride), ", padding ",
           shapeString(padding), ", dilation ", shapeString(dilation),
           "); the output size must be positive: ", "use a smaller kernel or more padding");
  return {oh, ow};
}

namespace {

void maxPool2dMeta(const Tensor& self, IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding,
                   IntArrayRef dilation, bool ceil_mode) {
  pool2dOutputSize(qualified<"max_pool2d">(), standardOp<"max_pool2d">(), self, kernel_size, stride, padding, dilation,
                   ceil_mode);
}

void avgPool2dMeta(const Tensor& self, IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding, bool ceil_mode,
                   bool count_include_pad, std::optional<int64_t> divisor_override) {
  (void)count_include_pad;  // any value is valid
  const std::string& op = qualified<"avg_pool2d">();
  const int64_t one = 1;
  pool2dOutputSize(op, standardOp<"avg_pool2d">(), self, kernel_size, stride, padding, IntArrayRef(&one, 1), ceil_mode);
  BP_CHECK(!divisor_override || *divisor_override != 0, op, ": divisor_override must not be zero");
}

// --- normalization

void checkPerChannel(const std::string& op, const Tensor& t, const char* name, int64_t channels, const Tensor& input) {
  if (!t.defined()) return;
  BP_CHECK(t.dim() == 1 && t.size(0) == channels, op, ": expected '", name, "' to be 1-D with ", channels,
           " elements (the input's channel dimension, size(1)), but got size ", shapeString(t.sizes()),
           " for input of size ", shapeString(input.sizes()));
}

}  // namespace

void checkBatchNorm(const std::string& op, const StandardOp& rule, const Tensor& input, const Tensor& w,
                    const Tensor& b, const Tensor& rm, const Tensor& rv, bool training, double eps) {
  checkDefined(op, input, "input");
  commonDevice(op, {{"input", &input}, {"weight", &w}, {"bias", &b}, {"running_mean", &rm}, {"running_var", &rv}});
  checkDtypes(op, rule, {{"input", &input}, {"weight", &w}, {"bias", &b}, {"running_mean", &rm}, {"running_var", &rv}});
  BP_CHECK(input.dim() >= 2, op, ": expected an input of at least 2 dimensions (N, C, ...), but got input of size ",
           shapeString(input.sizes()));
  const int64_t channels = input.size(1);
  checkPerChannel(op, w, "weight", channels, input);
  checkPerChannel(op, b, "bias", channels, input);
  checkPerChannel(op, rm, "running_mean", channels, input);
  checkPerChannel(op, rv, "running_var", channels, input);
  BP_CHECK(eps >= 0, op, ": eps must be non-negative, but got ", eps);
  if (!training) {
    BP_CHECK(rm.defined() && rv.defined(), op,
             ": running_mean and running_var must be given when training=False (evaluation mode uses them)");
  } else {
    BP_CHECK(rm.defined() == rv.defined(), op,
             ": give both running_mean and running_var, or neither, when training=True");
    // One value per channel has no variance; an empty input is an empty
    // result (and leaves the running statistics alone), as in PyTorch.
    const int64_t per_channel = channels == 0 ? 0 : input.numel() / channels;
    BP_CHECK(per_channel != 1, op, ": expected more than 1 value per channel when training, got input of size ",
             shapeString(input.sizes()));
  }
}

namespace {

void batchNormMeta(const Tensor& input, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
                   const std::optional<Tensor>& running_mean, const std::optional<Tensor>& running_var, bool training,
                   double momentum, double eps, bool cudnn_enabled) {
  (void)momentum;
  (void)cudnn_enabled;  // a hint for CUDA backends; no effect on the result
  checkBatchNorm(qualified<"batch_norm">(), standardOp<"batch_norm">(), input, orUndefined(weight), orUndefined(bias),
                 orUndefined(running_mean), orUndefined(running_var), training, eps);
}

// layer_norm is structured (Note [The standard operator table]):
// layer_norm.out is the kernel, the functional form a composite that
// allocates the result and calls it. The result has the input's shape,
// dtype and device; an out= of another dtype is refused, as PyTorch's
// native_layer_norm.out refuses it.
using LayerNormOutSig = Tensor(const Tensor&, IntArrayRef, const std::optional<Tensor>&, const std::optional<Tensor>&,
                               double, bool, const Tensor&);

template <FixedString Name>
OutputMeta layerNormMeta(const Tensor& input, IntArrayRef normalized_shape, const std::optional<Tensor>& weight,
                         const std::optional<Tensor>& bias, double eps) {
  const std::string& op = qualified<Name>();
  checkDefined(op, input, "input");
  const Tensor &w = orUndefined(weight), &b = orUndefined(bias);
  commonDevice(op, {{"input", &input}, {"weight", &w}, {"bias", &b}});
  checkDtypes(op, standardOp<Name>(), {{"input", &input}, {"weight", &w}, {"bias", &b}});
  checkNormalizedShape(op, input, normalized_shape, {{&w, "weight"}, {&b, "bias"}}, eps);
  return OutputMeta{Shape(input.sizes().begin(), input.sizes().end()), input.dtype(), input.device()};
}

void layerNormOutMeta(const Tensor& input, IntArrayRef normalized_shape, const std::optional<Tensor>& weight,
                      const std::optional<Tensor>& bias, double eps, bool /*cudnn_enable*/, const Tensor& out) {
  const std::string& op = qualified<"layer_norm.out">();
  const OutputMeta m = layerNormMeta<"layer_norm.out">(input, normalized_shape, weight, bias, eps);
  checkOutDtype(op, out, m);
  const Tensor &w = orUndefined(weight), &b = orUndefined(bias);
  checkOut(op, out, m, {{"input", &input}, {"weight", &w}, {"bias", &b}});
}

// The functional form keeps a meta of its own, so that a backend's native
// functional kernel (a vendor's) is handed checked arguments too; the
// composite runs after it and so checks nothing again.
void layerNormFunctionalMeta(const Tensor& input, IntArrayRef normalized_shape, const std::optional<Tensor>& weight,
                             const std::optional<Tensor>& bias, double eps, bool /*cudnn_enable*/) {
  layerNormMeta<"layer_norm">(input, normalized_shape, weight, bias, eps);
}

Tensor layerNormFunctional(const Tensor& input, IntArrayRef normalized_shape, const std::optional<Tensor>& weight,
                           const std::optional<Tensor>& bias, double eps, bool cudnn_enable) {
  Tensor out = allocate(OutputMeta{Shape(input.sizes().begin(), input.sizes().end()), input.dtype(), input.device()});
  return BP_STANDARD_OP("layer_norm.out", LayerNormOutSig)
      .callSkippingMeta(input, normalized_shape, weight, bias, eps, cudnn_enable, out);
}

}  // namespace

void addNNOps(std::vector<StandardOp>& ops) {
  auto add = [&](std::string schema, KernelFunction meta, std::vector<ArgumentDtypes> dtypes,
                 KernelFunction composite = {}) {
    ops.push_back(StandardOp{std::move(schema), std::move(meta), std::move(composite), "nn", std::move(dtypes)});
  };
  // conv2d and avg_pool2d take what PyTorch's CPU kernels take: the
  // floating dtypes (float16 and bfloat16 convolve in float32); conv2d the
  // signed and unsigned 8- to 64-bit integers too (accumulating with
  // wrap-around in the dtype, as PyTorch's slow path), avg_pool2d int64.
  // The CPU plugin serves them for every device through the fallback. The
  // other layers take the floating dtypes.
  constexpr ScalarTypeSet kFloating = ScalarTypeSet::floating();
  constexpr ScalarTypeSet kConvDtypes = {ScalarType::Float32,  ScalarType::Float64, ScalarType::Float16,
                                         ScalarType::BFloat16, ScalarType::UInt8,   ScalarType::Int8,
                                         ScalarType::Int16,    ScalarType::Int32,   ScalarType::Int64};
  constexpr ScalarTypeSet kPoolDtypes = {ScalarType::Float32, ScalarType::Float64, ScalarType::Float16,
                                         ScalarType::BFloat16, ScalarType::Int64};
  add("conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1, int[2] padding=0, "
      "int[2] dilation=1, int groups=1) -> Tensor",
      KernelFunction::makeFromFunction(BP_FN(conv2dMeta)),
      {{"input", kConvDtypes}, {"weight", kConvDtypes}, {"bias", kConvDtypes}});
  add("max_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, int[2] dilation=1, "
      "bool ceil_mode=False) -> Tensor",
      KernelFunction::makeFromFunction(BP_FN(maxPool2dMeta)), {{"self", kFloating}});
  add("avg_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, bool ceil_mode=False, "
      "bool count_include_pad=True, int? divisor_override=None) -> Tensor",
      KernelFunction::makeFromFunction(BP_FN(avgPool2dMeta)), {{"self", kPoolDtypes}});
  // Training updates running_mean and running_var in place: the write
  // annotations make the CPU fallback copy them back.
  add("batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor(a!)? running_mean, Tensor(b!)? running_var, "
      "bool training, float momentum, float eps, bool cudnn_enabled) -> Tensor",
      KernelFunction::makeFromFunction(BP_FN(batchNormMeta)),
      {{"input", kFloating},
       {"weight", kFloating},
       {"bias", kFloating},
       {"running_mean", kFloating},
       {"running_var", kFloating}});
  add("layer_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, Tensor? bias=None, float eps=1e-05, "
      "bool cudnn_enable=True) -> Tensor",
      KernelFunction::makeFromFunction(BP_FN(layerNormFunctionalMeta)),
      {{"input", kFloating}, {"weight", kFloating}, {"bias", kFloating}},
      KernelFunction::makeFromFunction(BP_FN(layerNormFunctional)));
  add("layer_norm.out(Tensor input, int[] normalized_shape, Tensor? weight=None, Tensor? bias=None, "
      "float eps=1e-05, bool cudnn_enable=True, *, Tensor(a!) out) -> Tensor(a!)",
      KernelFunction::makeFromFunction(BP_FN(layerNormOutMeta)),
      {{"input", kFloating}, {"weight", kFloating}, {"bias", kFloating}});
  // Out= forms derived from the functional ones (Note [Derived out= forms]).
  ops.push_back(derivedOut(
      "avg_pool2d.out(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, bool ceil_mode=False, bool "
      "count_include_pad=True, int? divisor_override=None, *, Tensor(a!) out) -> Tensor(a!)",
      "avg_pool2d"));
}

}  // namespace backplane::ops
