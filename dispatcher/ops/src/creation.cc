// The creation standard operators: factories (empty, zeros, ones, full,
// arange, rand, randn and their *_like forms), fills, random draws, copy_
// and to, plus dropout (family "nn", which is a random draw).
//
// Note [Creation ops on every device]
// Factories are composites: they allocate on the requested device through
// its allocator (core's emptyTensor) and fill through a kernel op that
// plugins implement: fill_.Scalar, arange.start_out and the internal Philox
// draws below. A device without those kernels gets them by CPU fallback, so
// every factory works on every device. A Device argument takes part in
// dispatch (boxing.h), so a plugin may also implement a factory directly.
//
// Note [Internal random kernels]
// Random ops are composites over three internal kernel ops (a leading
// underscore marks them internal: not for applications, but every backend
// that wants native random numbers implements them):
//   _philox_uniform_(Tensor(a!) self, float from, float to, int seed, int offset)
//   _philox_normal_(Tensor(a!) self, float mean, float std, int seed, int offset)
//   _philox_bernoulli_(Tensor(a!) self, float p, int seed, int offset)
// They fill `self` from the Philox stream of `seed` starting at block
// `offset` (plugin_sdk/include/backplane/philox.h, Note [The Philox
// stream]): element i in row-major order, whatever self's strides. The
// composite reserves the blocks from the process-wide generator
// (backplane/ops/random.h), so results are the same on every device.
//
// Note [Copies between devices]
// copy_ is a composite. Within one device it calls the internal kernel
//   _copy_on_device_(Tensor(a!) self, Tensor src) -> Tensor(a!)
// (PyTorch's per-backend part is _copy_from): self and src on one device,
// src broadcast to self's shape, any strides, any dtype conversion. Between
// devices the composite moves src's bytes with the host's device copy
// (contiguous first on src's device when its span is mostly gaps), then
// converts and strides on self's device with _copy_on_device_. So a device
// plugin implements one same-device kernel and gets copies to and from
// every other device.
#include <cmath>
#include <limits>

#include "backplane/core/device_interface.h"
#include "backplane/ops/ops.h"
#include "backplane/ops/random.h"
#include "backplane/philox.h"
#include "families.h"
#include "meta.h"
#include "structured.h"

namespace backplane::ops {

namespace {

using FactorySig = Tensor(IntArrayRef, std::optional<ScalarType>, std::optional<Device>);
using FillSig = Tensor(const Tensor&, const Scalar&);
using CopySig = Tensor(const Tensor&, const Tensor&, bool);
using CopyOnDeviceSig = Tensor(const Tensor&, const Tensor&);
using UniformSig = Tensor(const Tensor&, double, double, int64_t, int64_t);
using BernoulliSig = Tensor(const Tensor&, double, int64_t, int64_t);
using ArangeOutSig = Tensor(const Scalar&, const Scalar&, const Scalar&, const Tensor&);

Device targetDevice(std::optional<Device> device) { return device ? device->resolved() : Device(DeviceType::CPU); }

void checkSizes(std::string_view op, IntArrayRef size) {
  for (size_t i = 0; i < size.size(); ++i) {
    BP_CHECK(size[i] >= 0, op, ": size ", shapeString(size), " has the negative size ", size[i], " in dimension ", i,
             "; sizes must be >= 0");
  }
}

// --- empty, fills, zeros, ones, full

Tensor empty(IntArrayRef size, std::optional<ScalarType> dtype, std::optional<Device> device) {
  checkSizes("bp::empty", size);
  return emptyTensor(size, dtype.value_or(ScalarType::Float32), targetDevice(device));
}

Tensor emptyStrided(IntArrayRef size, IntArrayRef stride, std::optional<ScalarType> dtype,
                    std::optional<Device> device) {
  const char* op = "bp::empty_strided";
  BP_CHECK(size.size() == stride.size(), op, ": size ", shapeString(size), " and stride ", shapeString(stride),
           " have different lengths; give one stride per dimension");
  checkSizes(op, size);
  for (size_t i = 0; i < stride.size(); ++i) {
    BP_CHECK(stride[i] >= 0, op, ": stride ", shapeString(stride), " has the negative stride ", stride[i],
             " in dimension ", i, "; strides must be >= 0");
  }
  return emptyStridedTensor(size, stride, dtype.value_or(ScalarType::Float32), targetDevice(device));
}

void fillMeta(const Tensor& self, const Scalar& value) {
  checkDefined("bp::fill_.Scalar", self, "self");
  checkNoInternalOverlap("bp::fill_.Scalar", self, "self");
  checkScalarConverts("bp::fill_.Scalar", "the value", value, self.dtype());
}

Tensor fillChecked(const Tensor& self, const Scalar& value) {
  if (self.numel() == 0) return self;
  return BP_STANDARD_OP("fill_.Scalar", FillSig).callSkippingMeta(self, value);
}

Tensor zero_(const Tensor& self) {
  checkDefined("bp::zero_", self, "self");
  checkNoInternalOverlap("bp::zero_", self, "self");
  return fillChecked(self, Scalar(int64_t{0}));
}

Tensor filled(const char* op, IntArrayRef size, const Scalar& value, ScalarType dtype, Device device) {
  checkSizes(op, size);
  checkScalarConverts(op, "the value", value, dtype);
  return fillChecked(emptyTensor(size, dtype, device), value);
}

Tensor zeros(IntArrayRef size, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return filled("bp::zeros", size, Scalar(int64_t{0}), dtype.value_or(ScalarType::Float32), targetDevice(device));
}

Tensor ones(IntArrayRef size, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return filled("bp::ones", size, Scalar(int64_t{1}), dtype.value_or(ScalarType::Float32), targetDevice(device));
}

// PyTorch infers full's dtype from the value: bool, int64 or float32.
Tensor full(IntArrayRef size, const Scalar& value, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return filled("bp::full", size, value, dtype.value_or(value.defaultType()), targetDevice(device));
}

// The *_like factories: self's shape, dtype and device unless given.
// (Contiguous, where PyTorch would keep a permuted input's layout.)
struct LikeOptions {
  Shape sizes;
  ScalarType dtype;
  Device device;
};
LikeOptions likeOptions(const char* op, const Tensor& self, std::optional<ScalarType> dtype,
                        std::optional<Device> device) {
  checkDefined(op, self, "self");
  return LikeOptions{Shape(self.sizes().begin(), self.sizes().end()), dtype.value_or(self.dtype()),
                     device ? device->resolved() : self.device()};
}
IntArrayRef sizesOf(const LikeOptions& o) { return IntArrayRef(o.sizes.data(), o.sizes.size()); }

Tensor emptyLike(const Tensor& self, std::optional<ScalarType> dtype, std::optional<Device> device) {
  LikeOptions o = likeOptions("bp::empty_like", self, dtype, device);
  return emptyTensor(sizesOf(o), o.dtype, o.device);
}
Tensor zerosLike(const Tensor& self, std::optional<ScalarType> dtype, std::optional<Device> device) {
  LikeOptions o = likeOptions("bp::zeros_like", self, dtype, device);
  return filled("bp::zeros_like", sizesOf(o), Scalar(int64_t{0}), o.dtype, o.device);
}
Tensor onesLike(const Tensor& self, std::optional<ScalarType> dtype, std::optional<Device> device) {
  LikeOptions o = likeOptions("bp::ones_like", self, dtype, device);
  return filled("bp::ones_like", sizesOf(o), Scalar(int64_t{1}), o.dtype, o.device);
}
Tensor fullLike(const Tensor& self, const Scalar& value, std::optional<ScalarType> dtype,
                std::optional<Device> device) {
  LikeOptions o = likeOptions("bp::full_like", self, dtype, device);
  return filled("bp::full_like", sizesOf(o), value, o.dtype, o.device);
}

// --- arange

// PyTorch's size rule: int64 results count in integers (start, end and
// step truncated), every other dtype in double; ceil((end - start) / step).
int64_t arangeSize(std::string_view op, const Scalar& start, const Scalar& end, const Scalar& step, ScalarType dtype) {
  BP_CHECK(dtype != ScalarType::Bool, op, ": dtype bool is not supported; use an integral or floating dtype");
  if (dtype == ScalarType::Int64) {
    const double ds = start.toDouble(), de = end.toDouble(), dt = step.toDouble();
    BP_CHECK(std::isfinite(ds) && std::isfinite(de) && std::isfinite(dt), op, ": start, end and step must be finite, ",
             "got ", start, ", ", end, ", ", step);
    const int64_t s = start.toInt(), e = end.toInt(), st = step.toInt();
    BP_CHECK(st != 0, op, ": step must be nonzero (got ", step, ", which is 0 as int64)");
    BP_CHECK(st > 0 ? e >= s : e <= s, op, ": the range from ", start, " to ", end, " is empty in the direction of ",
             "step ", step, "; give a ", st > 0 ? "negative" : "positive", " step or swap start and end");
    const int64_t sign = st > 0 ? 1 : -1;
    // In __int128 so that ranges spanning most of int64 do not overflow.
    return static_cast<int64_t>((static_cast<__int128>(e) - s + st - sign) / st);
  }
  const double s = start.toDouble(), e = end.toDouble(), st = step.toDouble();
  BP_CHECK(std::isfinite(s) && std::isfinite(e), op, ": start and end must be finite, got ", start, " and ", end);
  BP_CHECK(std::isfinite(st) && st != 0, op, ": step must be finite and nonzero, got ", step);
  BP_CHECK(st > 0 ? e >= s : e <= s, op, ": the range from ", start, " to ", end, " is empty in the direction of step ",
           step, "; give a ", st > 0 ? "negative" : "positive", " step or swap start and end");
  const double size = std::ceil((e - s) / st);
  BP_CHECK(size < 9.2e18, op, ": the range from ", start, " to ", end, " in steps of ", step,
           " has too many elements (", size, ")");
  return static_cast<int64_t>(size);
}

void arangeOutMeta(const Scalar& start, const Scalar& end, const Scalar& step, const Tensor& out) {
  const char* op = "bp::arange.start_out";
  checkDefined(op, out, "out");
  const int64_t n = arangeSize(op, start, end, step, out.dtype());
  checkOut(op, out, OutputMeta{Shape{n}, out.dtype(), out.device()}, {});
}

// int64 when start, end and step are all integers (or bools), else float32.
ScalarType arangeType(const Scalar& start, const Scalar& end, const Scalar& step) {
  return start.isFloatingPoint() || end.isFloatingPoint() || step.isFloatingPoint() ? ScalarType::Float32
                                                                                    : ScalarType::Int64;
}

Tensor arangeStartStep(const Scalar& start, const Scalar& end, const Scalar& step, std::optional<ScalarType> dtype,
                       std::optional<Device> device) {
  const ScalarType t = dtype.value_or(arangeType(start, end, step));
  const int64_t n = arangeSize("bp::arange", start, end, step, t);
  Tensor out = emptyTensor({n}, t, targetDevice(device));
  if (n == 0) return out;
  return BP_STANDARD_OP("arange.start_out", ArangeOutSig).callSkippingMeta(start, end, step, out);
}
Tensor arangeStart(const Scalar& start, const Scalar& end, std::optional<ScalarType> dtype,
                   std::optional<Device> device) {
  return arangeStartStep(start, end, Scalar(int64_t{1}), dtype, device);
}
Tensor arangeEnd(const Scalar& end, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return arangeStartStep(Scalar(int64_t{0}), end, Scalar(int64_t{1}), dtype, device);
}

// --- eye, linspace: composites over arange, so every device has them.

// eye(n, m): ones on the main diagonal of an [n, m] matrix (float32 unless
// dtype= says otherwise): a row index compared with a column index.
Tensor eyeM(int64_t n, int64_t m, std::optional<ScalarType> dtype, std::optional<Device> device) {
  BP_CHECK(n >= 0, "bp::eye: n must be >= 0, got ", n);
  BP_CHECK(m >= 0, "bp::eye: m must be >= 0, got ", m);
  const Device d = targetDevice(device);
  const Tensor rows = arangeEnd(Scalar(n), ScalarType::Int64, d).unsqueeze(1);
  const Tensor cols = arangeEnd(Scalar(m), ScalarType::Int64, d);
  return rows.eq(cols).to(dtype.value_or(ScalarType::Float32));
}
Tensor eye(int64_t n, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return eyeM(n, n, dtype, device);
}

// linspace(start, end, steps): PyTorch's. step = (end - start) / (steps -
// 1); the first half counts up from start (start + step * i), the second
// down from end (end - step * (steps - 1 - i)), so the last value is end.
// float32 computes in float32 as PyTorch's kernel does; other dtypes in
// float64, converted. An integral dtype takes start and end truncated to
// integers first and truncates each value, as PyTorch's kernel does. (PyTorch
// switches from the first formula to the second, and steps within a
// vector, at its CPU's vector width, so its values can differ from these in
// the last bit; these are each element's own formula.)
Tensor linspace(const Scalar& start, const Scalar& end, int64_t steps, std::optional<ScalarType> dtype,
                std::optional<Device> device) {
  const char* op = "bp::linspace";
  BP_CHECK(steps >= 0, op, ": number of steps must be non-negative, got ", steps);
  const ScalarType t = dtype.value_or(ScalarType::Float32);
  BP_CHECK(t != ScalarType::Bool, op, ": dtype bool is not supported; use an integral or floating dtype");
  const bool integral = !isFloatingType(t);
  checkScalarConverts(op, "start", start, t);
  checkScalarConverts(op, "end", end, t);
  const double s = integral ? std::trunc(start.toDouble()) : start.toDouble();
  const double e = integral ? std::trunc(end.toDouble()) : end.toDouble();
  BP_CHECK(std::isfinite(s) && std::isfinite(e), op, ": start and end must be finite, got ", start, " and ", end);
  const Device d = targetDevice(device);
  if (steps <= 1) return steps == 0 ? emptyTensor({0}, t, d) : full({1}, start, {t, d});
  const bool in_float = t == ScalarType::Float32;
  const ScalarType compute = in_float ? ScalarType::Float32 : ScalarType::Float64;
  const double step =
      in_float ? static_cast<double>((static_cast<float>(e) - static_cast<float>(s)) / static_cast<float>(steps - 1))
               : (e - s) / static_cast<double>(steps - 1);
  const double first = in_float ? static_cast<double>(static_cast<float>(s)) : s;
  const double last = in_float ? static_cast<double>(static_cast<float>(e)) : e;
  const Tensor i = arangeEnd(Scalar(steps), compute, d);
  const Tensor up = i.mul(Scalar(step)).add(Scalar(first));
  const Tensor down = i.sub(Scalar(static_cast<double>(steps - 1))).mul(Scalar(step)).add(Scalar(last));
  return where(i.lt(Scalar(static_cast<double>(steps / 2))), up, down).to(t);
}

// --- random draws (Note [Internal random kernels])

bp::philox::DrawKind drawKind(ScalarType t) {
  return t == ScalarType::Float64 ? bp::philox::DrawKind::Wide : bp::philox::DrawKind::Narrow;
}

void checkFloating(std::string_view op, ScalarType t, const char* what) {
  BP_CHECK(isFloatingType(t), op, ": ", what, ", ", t, ", is not floating; random floating values need float16, ",
           "bfloat16, float32 or float64");
}

void philoxDrawMeta(std::string_view op, const Tensor& self, int64_t offset) {
  checkDefined(op, self, "self");
  checkNoInternalOverlap(op, self, "self");
  BP_CHECK(offset >= 0, op, ": offset must be >= 0, got ", offset);
}

void philoxUniformMeta(const Tensor& self, double from, double to, int64_t, int64_t offset) {
  const char* op = "bp::_philox_uniform_";
  philoxDrawMeta(op, self, offset);
  checkFloating(op, self.dtype(), "the dtype of argument 'self'");
  BP_CHECK(from <= to && std::isfinite(from) && std::isfinite(to), op, ": expected finite from <= to, got from=", from,
           " and to=", to);
}
void philoxNormalMeta(const Tensor& self, double, double std, int64_t, int64_t offset) {
  const char* op = "bp::_philox_normal_";
  philoxDrawMeta(op, self, offset);
  checkFloating(op, self.dtype(), "the dtype of argument 'self'");
  BP_CHECK(std >= 0, op, ": expected std >= 0, got ", std);
}
void philoxBernoulliMeta(const Tensor& self, double p, int64_t, int64_t offset) {
  const char* op = "bp::_philox_bernoulli_";
  philoxDrawMeta(op, self, offset);
  BP_CHECK(p >= 0 && p <= 1, op, ": expected p in [0, 1], got ", p);
}

// Reserves the blocks for a draw into `self` and runs the kernel.
template <typename Handle, typename... Params>
Tensor draw(const Handle& kernel, bp::philox::DrawKind kind, const Tensor& self, Params... params) {
  if (self.numel() == 0) return self;
  const RandomState s = reserveRandomBlocks(bp::philox::blocksFor(self.numel(), kind));
  return kernel.callSkippingMeta(self, params..., static_cast<int64_t>(s.seed), static_cast<int64_t>(s.offset));
}

Tensor uniformDraw(const Tensor& self, double from, double to) {
  return draw(BP_STANDARD_OP("_philox_uniform_", UniformSig), drawKind(self.dtype()), self, from, to);
}
Tensor normalDraw(const Tensor& self, double mean, double std) {
  return draw(BP_STANDARD_OP("_philox_normal_", UniformSig), drawKind(self.dtype()), self, mean, std);
}
Tensor bernoulliDraw(const Tensor& self, double p) {
  return draw(BP_STANDARD_OP("_philox_bernoulli_", BernoulliSig), bp::philox::DrawKind::Narrow, self, p);
}

Tensor uniform_(const Tensor& self, double from, double to) {
  const char* op = "bp::uniform_";
  checkDefined(op, self, "self");
  checkNoInternalOverlap(op, self, "self");
  checkFloating(op, self.dtype(), "the dtype of argument 'self'");
  BP_CHECK(std::isfinite(from) && std::isfinite(to) && from <= to, op,
           ": expects a [from, to) range with finite from <= to, but got from=", from, " and to=", to);
  return uniformDraw(self, from, to);
}

Tensor normal_(const Tensor& self, double mean, double std) {
  const char* op = "bp::normal_";
  checkDefined(op, self, "self");
  checkNoInternalOverlap(op, self, "self");
  checkFloating(op, self.dtype(), "the dtype of argument 'self'");
  BP_CHECK(std >= 0, op, ": expects std >= 0, but got std=", std);
  return normalDraw(self, mean, std);
}

Tensor bernoulli_(const Tensor& self, double p) {
  const char* op = "bp::bernoulli_.float";
  checkDefined(op, self, "self");
  checkNoInternalOverlap(op, self, "self");
  BP_CHECK(p >= 0 && p <= 1, op, ": expects p in [0, 1], but got p=", p);
  return bernoulliDraw(self, p);
}

// bernoulli.p: a new tensor like self (its shape, dtype and device) of
// draws that are 1 with probability p; self's values are not read.
Tensor bernoulliP(const Tensor& self, double p) {
  const char* op = "bp::bernoulli.p";
  checkDefined(op, self, "self");
  BP_CHECK(p >= 0 && p <= 1, op, ": expects p in [0, 1], but got p=", p);
  return bernoulliDraw(emptyTensor(self.sizes(), self.dtype(), self.device()), p);
}

Tensor randomFactory(const char* op, IntArrayRef size, std::optional<ScalarType> dtype, std::optional<Device> device,
                     bool normal) {
  checkSizes(op, size);
  const ScalarType t = dtype.value_or(ScalarType::Float32);
  checkFloating(op, t, "the requested dtype");
  Tensor out = emptyTensor(size, t, targetDevice(device));
  return normal ? normalDraw(out, 0, 1) : uniformDraw(out, 0, 1);
}
Tensor rand(IntArrayRef size, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return randomFactory("bp::rand", size, dtype, device, false);
}
Tensor randn(IntArrayRef size, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return randomFactory("bp::randn", size, dtype, device, true);
}
Tensor randLike(const Tensor& self, std::optional<ScalarType> dtype, std::optional<Device> device) {
  LikeOptions o = likeOptions("bp::rand_like", self, dtype, device);
  return randomFactory("bp::rand_like", sizesOf(o), o.dtype, o.device, false);
}
Tensor randnLike(const Tensor& self, std::optional<ScalarType> dtype, std::optional<Device> device) {
  LikeOptions o = likeOptions("bp::randn_like", self, dtype, device);
  return randomFactory("bp::randn_like", sizesOf(o), o.dtype, o.device, true);
}

// PyTorch's dropout: the input itself when not training (or p = 0);
// otherwise input * mask / (1 - p) with mask ~ Bernoulli(1 - p) in the
// input's dtype, so p = 1 multiplies by zero.
Tensor dropout(const Tensor& input, double p, bool train) {
  const char* op = "bp::dropout";
  checkDefined(op, input, "input");
  BP_CHECK(p >= 0 && p <= 1, op, ": dropout probability has to be between 0 and 1, but got ", p);
  if (!train || p == 0 || input.numel() == 0) return input;
  checkFloating(op, input.dtype(), "the dtype of argument 'input'");
  using MulSig = Tensor(const Tensor&, const Tensor&);
  const auto& mul = BP_STANDARD_OP("mul.Tensor", MulSig);
  if (p == 1) return mul.call(input, filled(op, {}, Scalar(int64_t{0}), input.dtype(), input.device()));
  Tensor mask = bernoulliDraw(emptyTensor(input.sizes(), input.dtype(), input.device()), 1 - p);
  Tensor scale = filled(op, {}, Scalar(1 / (1 - p)), input.dtype(), input.device());
  BP_STANDARD_OP("mul_.Tensor", MulSig).call(mask, scale);
  return mul.call(input, mask);
}

// --- copy_ and to (Note [Copies between devices])

// Checks that src broadcasts to self's shape (only src is expanded).
void checkCopyShapes(std::string_view op, const Tensor& self, const Tensor& src) {
  bool ok = src.dim() <= self.dim();
  for (int64_t i = 1; ok && i <= src.dim(); ++i) {
    const int64_t s = src.size(-i);
    ok = s == 1 || s == self.size(-i);
  }
  BP_CHECK(ok, op, ": src of shape ", shapeString(src.sizes()), " cannot be broadcast to self's shape ",
           shapeString(self.sizes()), " (trailing sizes must match or be 1)");
}

void copyOnDeviceMeta(const Tensor& self, const Tensor& src) {
  const char* op = "bp::_copy_on_device_";
  checkDefined(op, self, "self");
  checkDefined(op, src, "src");
  BP_CHECK(self.device() == src.device(), op, ": self is on ", self.device(), " and src on ", src.device(),
           "; this kernel copies within one device (bp::copy_ copies between devices)");
  checkCopyShapes(op, self, src);
  checkNoInternalOverlap(op, self, "self");
  checkNoPartialOverlap(op, self, "self", src, "src");
}

Tensor copyOnDevice(const Tensor& self, const Tensor& src) {
  return BP_STANDARD_OP("_copy_on_device_", CopyOnDeviceSig).callSkippingMeta(self, src);
}

// Moves src to `device` keeping its dtype: its span as a block (a tensor
// with src's strides there) when that is mostly elements, else a
// contiguous copy made on src's device first.
Tensor moveToDevice(const Tensor& src, Device device) {
  if (!src.is_contiguous() && spanBytes(src) > 2 * src.nbytes()) {
    Tensor packed = emptyTensor(src.sizes(), src.dtype(), src.device());
    return stageSpan(copyOnDevice(packed, src), device);
  }
  return stageSpan(src, device);
}

Tensor copy_(const Tensor& self, const Tensor& src, bool) {
  const char* op = "bp::copy_";
  checkDefined(op, self, "self");
  checkDefined(op, src, "src");
  checkCopyShapes(op, self, src);
  checkNoInternalOverlap(op, self, "self");
  if (self.numel() == 0) return self;
  if (self.device() == src.device()) {
    checkNoPartialOverlap(op, self, "self", src, "src");
    if (self.unsafeGetImpl() == src.unsafeGetImpl()) return self;
    return copyOnDevice(self, src);
  }
  // The bytes go straight into self when they already are its elements.
  if (self.is_contiguous() && src.is_contiguous() && self.dtype() == src.dtype() && self.sizes() == src.sizes()) {
    copyBytesBetweenDevices(self.data_ptr(), self.device(), src.data_ptr(), src.device(), self.nbytes());
    return self;
  }
  return copyOnDevice(self, moveToDevice(src, self.device()));
}

// self unchanged when it already has the dtype and device (and no copy
// was asked for), else a new contiguous tensor holding its values.
Tensor toImpl(const Tensor& self, ScalarType dtype, Device device, bool non_blocking, bool copy) {
  checkDefined("bp::to", self, "self");
  device = device.resolved();
  if (!copy && self.dtype() == dtype && self.device() == device) return self;
  Tensor out = emptyTensor(self.sizes(), dtype, device);
  return BP_STANDARD_OP("copy_", CopySig).callSkippingMeta(out, self, non_blocking);
}

Tensor toDtype(const Tensor& self, ScalarType dtype, bool non_blocking, bool copy) {
  checkDefined("bp::to.dtype", self, "self");
  return toImpl(self, dtype, self.device(), non_blocking, copy);
}
Tensor toDevice(const Tensor& self, Device device, ScalarType dtype, bool non_blocking, bool copy) {
  return toImpl(self, dtype, device, non_blocking, copy);
}
Tensor toOptions(const Tensor& self, std::optional<ScalarType> dtype, std::optional<Device> device, bool non_blocking,
                 bool copy) {
  checkDefined("bp::to.dtype_layout", self, "self");
  return toImpl(self, dtype.value_or(self.dtype()), device.value_or(self.device()), non_blocking, copy);
}
Tensor toOther(const Tensor& self, const Tensor& other, bool non_blocking, bool copy) {
  checkDefined("bp::to.other", other, "other");
  return toImpl(self, other.dtype(), other.device(), non_blocking, copy);
}

template <auto Fn>
KernelFunction fn() {
  return KernelFunction::makeFromFunction(CompileTimeFunction<Fn>());
}

}  // namespace

void addCreationOps(std::vector<StandardOp>& ops) {
  auto add = [&](std::string schema, KernelFunction meta, KernelFunction composite, const char* family = "creation") {
    ops.push_back(StandardOp{std::move(schema), std::move(meta), std::move(composite), family});
  };
  const std::string opts = "*, ScalarType? dtype=None, Device? device=None) -> Tensor";

  // Allocation and fills (Note [Creation ops on every device]).
  add("empty(int[] size, " + opts, {}, fn<&empty>());
  add("empty_strided(int[] size, int[] stride, " + opts, {}, fn<&emptyStrided>());
  add("fill_.Scalar(Tensor(a!) self, Scalar value) -> Tensor(a!)", fn<&fillMeta>(), {});
  add("zero_(Tensor(a!) self) -> Tensor(a!)", {}, fn<&zero_>());
  add("zeros(int[] size, " + opts, {}, fn<&zeros>());
  add("ones(int[] size, " + opts, {}, fn<&ones>());
  add("full(int[] size, Scalar fill_value, " + opts, {}, fn<&full>());
  add("empty_like(Tensor self, " + opts, {}, fn<&emptyLike>());
  add("zeros_like(Tensor self, " + opts, {}, fn<&zerosLike>());
  add("ones_like(Tensor self, " + opts, {}, fn<&onesLike>());
  add("full_like(Tensor self, Scalar fill_value, " + opts, {}, fn<&fullLike>());

  // arange: plugins implement arange.start_out.
  add("arange(Scalar end, " + opts, {}, fn<&arangeEnd>());
  add("arange.start(Scalar start, Scalar end, " + opts, {}, fn<&arangeStart>());
  add("arange.start_step(Scalar start, Scalar end, Scalar step=1, " + opts, {}, fn<&arangeStartStep>());
  add("arange.start_out(Scalar start, Scalar end, Scalar step=1, *, Tensor(a!) out) -> Tensor(a!)",
      fn<&arangeOutMeta>(), {});

  // eye, linspace: composites over arange.
  add("eye(int n, " + opts, {}, fn<&eye>());
  add("eye.m(int n, int m, " + opts, {}, fn<&eyeM>());
  add("linspace(Scalar start, Scalar end, int steps, " + opts, {}, fn<&linspace>());

  // Random draws (Note [Internal random kernels]).
  add("_philox_uniform_(Tensor(a!) self, float from, float to, int seed, int offset) -> Tensor(a!)",
      fn<&philoxUniformMeta>(), {});
  add("_philox_normal_(Tensor(a!) self, float mean, float std, int seed, int offset) -> Tensor(a!)",
      fn<&philoxNormalMeta>(), {});
  add("_philox_bernoulli_(Tensor(a!) self, float p, int seed, int offset) -> Tensor(a!)", fn<&philoxBernoulliMeta>(),
      {});
  add("uniform_(Tensor(a!) self, float from=0, float to=1) -> Tensor(a!)", {}, fn<&uniform_>());
  add("normal_(Tensor(a!) self, float mean=0, float std=1) -> Tensor(a!)", {}, fn<&normal_>());
  add("bernoulli_.float(Tensor(a!) self, float p=0.5) -> Tensor(a!)", {}, fn<&bernoulli_>());
  add("bernoulli.p(Tensor self, float p) -> Tensor", {}, fn<&bernoulliP>());
  add("rand(int[] size, " + opts, {}, fn<&rand>());
  add("randn(int[] size, " + opts, {}, fn<&randn>());
  add("rand_like(Tensor self, " + opts, {}, fn<&randLike>());
  add("randn_like(Tensor self, " + opts, {}, fn<&randnLike>());
  add("dropout(Tensor input, float p, bool train) -> Tensor", {}, fn<&dropout>(), "nn");

  // Copies (Note [Copies between devices]).
  add("_copy_on_device_(Tensor(a!) self, Tensor src) -> Tensor(a!)", fn<&copyOnDeviceMeta>(), {});
  add("copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)", {}, fn<&copy_>());
  add("to.dtype(Tensor(a) self, ScalarType dtype, bool non_blocking=False, bool copy=False) -> Tensor(a)", {},
      fn<&toDtype>());
  add("to.device(Tensor(a) self, Device device, ScalarType dtype, bool non_blocking=False, bool copy=False) -> "
      "Tensor(a)",
      {}, fn<&toDevice>());
  add("to.dtype_layout(Tensor(a) self, *, ScalarType? dtype=None, Device? device=None, bool non_blocking=False, "
      "bool copy=False) -> Tensor(a)",
      {}, fn<&toOptions>());
  add("to.other(Tensor(a) self, Tensor other, bool non_blocking=False, bool copy=False) -> Tensor(a)", {},
      fn<&toOther>());
  // Out= forms derived from the functional ones (Note [Derived out= forms]).
  const std::string out = "Tensor(a!) out) -> Tensor(a!)";
  for (const std::string name : {"empty", "zeros", "ones", "rand", "randn"}) {
    ops.push_back(derivedOut(name + ".out(int[] size, *, " + out, name));
    ops.push_back(derivedOut(name + "_like.out(Tensor self, *, " + out, name + "_like"));
  }
  ops.push_back(derivedOut("full.out(int[] size, Scalar fill_value, *, " + out, "full"));
  ops.push_back(derivedOut("full_like.out(Tensor self, Scalar fill_value, *, " + out, "full_like"));
  ops.push_back(derivedOut("arange.out(Scalar end, *, " + out, "arange"));
  ops.push_back(derivedOut("eye.out(int n, *, Tensor(a!) out) -> Tensor(a!)", "eye"));
  ops.push_back(derivedOut("eye.m_out(int n, int m, *, Tensor(a!) out) -> Tensor(a!)", "eye.m"));
  ops.push_back(
      derivedOut("linspace.out(Scalar start, Scalar end, int steps, *, Tensor(a!) out) -> Tensor(a!)", "linspace"));
  ops.push_back(
      derivedOut("bernoulli.float_out(Tensor self, float p=0.5, *, Tensor(a!) out) -> Tensor(a!)", "bernoulli.p"));
  // The in-place-only ops' functional forms, and their out= forms.
  ops.push_back(derivedFunctional("fill.Scalar(Tensor self, Scalar value) -> Tensor", "fill_.Scalar"));
  ops.push_back(
      derivedOut("fill.Scalar_out(Tensor self, Scalar value, *, Tensor(a!) out) -> Tensor(a!)", "fill.Scalar"));
  ops.push_back(derivedFunctional("zero(Tensor self) -> Tensor", "zero_"));
  ops.push_back(derivedOut("zero.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)", "zero"));
  ops.push_back(derivedFunctional("uniform(Tensor self, float from=0, float to=1) -> Tensor", "uniform_"));
  ops.push_back(
      derivedOut("uniform.out(Tensor self, float from=0, float to=1, *, Tensor(a!) out) -> Tensor(a!)", "uniform"));
  ops.push_back(derivedFunctional("normal_functional(Tensor self, float mean=0, float std=1) -> Tensor", "normal_"));
  ops.push_back(derivedOut("normal.out(Tensor self, float mean=0, float std=1, *, Tensor(a!) out) -> Tensor(a!)",
                           "normal_functional"));
  ops.push_back(derivedFunctional("copy(Tensor self, Tensor src, bool non_blocking=False) -> Tensor", "copy_"));
  ops.push_back(derivedOut(
      "copy.out(Tensor self, Tensor src, bool non_blocking=False, *, Tensor(a!) out) -> Tensor(a!)", "copy"));
}

}  // namespace backplane::ops
