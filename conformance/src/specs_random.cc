// Conformance specs of the random family (Note [Conformance specs]).
//
// Note [Random specs]
// The internal Philox kernels (_philox_uniform_, _philox_normal_,
// _philox_bernoulli_) are the contract a backend implements for native
// random numbers (Note [Internal random kernels]): their values follow from
// (seed, offset, index) alone (Note [The Philox stream]), so their specs
// have exact references computed with the SDK's philox.h.
//
// The public draws (uniform_, normal_, bernoulli_, rand, randn, rand_like,
// randn_like, dropout) take their seed and offset from the process-wide
// generator, so their specs judge the results with a Checker, on two
// promises:
//   * the distribution (PyTorch's semantics): the range, and the mean and
//     variance of 4096 or more draws within 6 standard errors (a chance
//     failure is about 2e-9 per check) plus the dtype's rounding; that
//     catches a kernel that ignores from/to, scales by the wrong std or
//     draws with the wrong p;
//   * determinism (backplane/ops/random.h): a draw's values are the
//     Philox stream at the blocks it reserved, the same on every device.
//     The checker runs right after the call, so those blocks are the last
//     ones reserved: it reads the generator's state (no operator) and
//     recomputes them. A draw that reserves the wrong number of blocks, or
//     uses another generator, fails this check.
// rand and randn get `device=` as the host device, which the runner
// replaces with the backend's (as the factories of specs_creation.cc).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "backplane/conformance/spec.h"
#include "backplane/ops/random.h"
#include "backplane/philox.h"

namespace backplane::conformance {
namespace {

namespace philox = bp::philox;

// A draw: uniform in [a, b), normal with mean a and std b, or bernoulli
// with p = a.
enum class Dist { Uniform, Normal, Bernoulli };
struct Draw {
  Dist dist;
  double a, b;
};

philox::DrawKind kindOf(const Draw& d, ScalarType dtype) {
  return d.dist != Dist::Bernoulli && dtype == ScalarType::Float64 ? philox::DrawKind::Wide : philox::DrawKind::Narrow;
}

// Element `lane` of a draw's block, as a tensor of `dtype` holds it: the
// arithmetic of Note [The Philox stream], in float for 32-bit draws.
double element(const Draw& d, ScalarType dtype, const philox::Words& block, int lane) {
  const bool wide = kindOf(d, dtype) == philox::DrawKind::Wide;
  switch (d.dist) {
    case Dist::Uniform: {
      // Rounding into the dtype may reach `to`, which becomes `from`: the
      // range stays half-open.
      double from = d.a, to = d.b, v;
      if (wide) {
        v = from + philox::wideUniform(block, lane) * (to - from);
      } else {
        const float f = static_cast<float>(from), t = static_cast<float>(to);
        v = f + philox::narrowUniform(block, lane) * (t - f);
        from = f, to = t;
      }
      v = roundTo(dtype, v);
      return v >= to && from < to ? roundTo(dtype, from) : v;
    }
    case Dist::Normal:
      if (wide) return d.a + d.b * philox::wideNormal(block, lane);
      return roundTo(dtype, static_cast<float>(d.a) + static_cast<float>(d.b) * philox::narrowNormal(block, lane));
    case Dist::Bernoulli: return philox::uniformWord(block.w[lane]) < d.a ? 1 : 0;
  }
  return 0;
}

// The `n` values of a draw from (seed, offset), in row-major order.
std::vector<double> streamValues(const Draw& d, ScalarType dtype, int64_t n, uint64_t seed, uint64_t offset) {
  const int64_t k = philox::elementsPerBlock(kindOf(d, dtype));
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; i += k) {
    const philox::Words block = philox::streamBlock(seed, offset + static_cast<uint64_t>(i / k));
    for (int64_t lane = 0; lane < k && i + lane < n; ++lane) {
      out[static_cast<size_t>(i + lane)] = element(d, dtype, block, static_cast<int>(lane));
    }
  }
  return out;
}

// A factory's device= argument: the host device, which the runner replaces
// with the backend's.
// self followed by the other arguments.
std::vector<IValue> withSelf(Tensor self, const std::vector<IValue>& rest) {
  std::vector<IValue> args = {IValue(std::move(self))};
  args.insert(args.end(), rest.begin(), rest.end());
  return args;
}

// Draws at least this large also have their moments checked.
constexpr int64_t kMomentSize = 64 * 64;

// A parameter set of a draw: the arguments after self, and a name.
struct Params {
  std::string name;
  std::vector<IValue> args;
};

// The samples of an op whose first argument is the tensor it draws into
// (or like): every parameter set on kMomentSize elements of every dtype,
// the layouts (0-d, empty, a partial Philox block, strided) with the first
// set, and one large tensor.
std::vector<Sample> drawSamples(const std::string& op, const std::vector<ScalarType>& dtypes,
                                const std::vector<Params>& params) {
  Rng rng(seedFor(op));
  std::vector<Sample> out;
  auto push = [&](std::string name, Tensor self, const Params& p) {
    out.push_back(makeSample(std::move(name) + ", " + p.name, withSelf(std::move(self), p.args)));
  };
  for (ScalarType dt : dtypes) {
    const std::string suffix = dtypeSuffix(dt);
    for (const Params& p : params) push("[64,64]" + suffix, randomTensor(rng, {64, 64}, dt), p);
    push("0-d" + suffix, randomTensor(rng, {}, dt), params[0]);
    push("7 elements (a partial block)" + suffix, randomTensor(rng, {7}, dt), params[0]);
    push("empty [0,4]" + suffix, randomTensor(rng, {0, 4}, dt), params[0]);
    push("transposed [40,30]" + suffix, randomTensor(rng, {30, 40}, dt).transpose(0, 1), params[0]);
    push("sliced [30,20] (step 2)" + suffix, randomTensor(rng, {30, 40}, dt).slice(1, 1, std::nullopt, 2), params[0]);
  }
  push("large [1100,1000] float32", emptyTensor({1100, 1000}, ScalarType::Float32), params[0]);
  return out;
}

// A must-raise sample whose self is a small float32 tensor (or `dtype`).
Sample raisingOn(const std::string& name, const std::vector<IValue>& rest, const std::string& reason,
                 ScalarType dtype = ScalarType::Float32) {
  Rng rng(seedFor(name));
  return raising(name, withSelf(randomTensor(rng, {2, 3}, dtype), rest), reason);
}
Sample expandedSelf(const std::vector<IValue>& rest) {
  Rng rng(seedFor("expanded self"));
  return raising("expanded self", withSelf(randomTensor(rng, {1, 4}, ScalarType::Float32).expand({3, 4}), rest),
                 "self's elements overlap");
}

// The result of a draw into self: self's shape and dtype.
std::vector<Expected> likeSelf(const Sample& s) {
  const Tensor& self = s.args[0].toTensor();
  return {Expected{sizesOf(self), self.dtype(), {}}};
}

// --- The Philox kernels: exact references.

// (self, a, [b,] seed, offset): bernoulli has p alone.
void addPhilox(std::vector<OpSpec>& specs, const std::string& name, Dist dist, const std::vector<ScalarType>& dtypes,
               const std::vector<std::pair<double, double>>& params, std::vector<Sample> bad) {
  const size_t nparams = dist == Dist::Bernoulli ? 1 : 2;
  auto tail = [nparams](std::pair<double, double> p, int64_t seed, int64_t offset) {
    std::vector<IValue> t = {IValue(p.first)};
    if (nparams == 2) t.emplace_back(p.second);
    t.emplace_back(seed);
    t.emplace_back(offset);
    return t;
  };
  OpSpec spec;
  spec.op = "bp::" + name;
  spec.family = "random";
  spec.samples = [op = spec.op, dtypes, params, nparams, tail, bad] {
    std::vector<Params> sets;
    for (auto p : params) {
      std::ostringstream n;
      n << "(" << p.first;
      if (nparams == 2) n << ", " << p.second;
      n << ") seed 42";
      sets.push_back({n.str(), tail(p, 42, 0)});
    }
    sets.push_back({"offset 2^33 + 3 (the counter's high word)", tail(params[0], 42, (int64_t{1} << 33) + 3)});
    // The generator's seeds are uint64; the kernel gets them as int.
    sets.push_back({"seed with the top bit set", tail(params[0], std::numeric_limits<int64_t>::min() + 12345, 9)});
    std::vector<Sample> out = drawSamples(op, dtypes, sets);
    out.insert(out.end(), bad.begin(), bad.end());
    out.push_back(expandedSelf(tail(params[0], 42, 0)));
    out.push_back(raisingOn("negative offset", tail(params[0], 42, -1), "offset must be >= 0"));
    return out;
  };
  spec.reference = [dist, nparams](const Sample& s) {
    const Tensor& self = s.args[0].toTensor();
    const Draw d{dist, s.args[1].toDouble(), nparams == 2 ? s.args[2].toDouble() : 0};
    const auto seed = static_cast<uint64_t>(s.args[1 + nparams].toInt());
    const auto offset = static_cast<uint64_t>(s.args[2 + nparams].toInt());
    std::vector<Expected> e = likeSelf(s);
    e[0].values = streamValues(d, self.dtype(), self.numel(), seed, offset);
    return e;
  };
  specs.push_back(std::move(spec));
}

// --- The public draws: statistics and the stream (Note [Random specs]).

// Empty when |got - want| <= 6 standard errors + slack.
std::string within(const char* what, double got, double want, double se, double slack) {
  if (std::fabs(got - want) <= 6 * se + slack) return "";
  std::ostringstream os;
  os << "the " << what << " is " << got << ", expected " << want << " within " << 6 * se + slack;
  return os.str();
}

// The distribution of values `v` of a draw `d` into `dtype`.
std::string checkDistribution(const std::vector<double>& v, const Draw& d, ScalarType dtype) {
  for (double x : v) {
    const bool ok = d.dist == Dist::Uniform     ? (x >= d.a && x < d.b) || (d.a == d.b && x == d.a)
                    : d.dist == Dist::Bernoulli ? x == 0 || x == 1
                                                : !std::isnan(x);
    if (!ok) {
      std::ostringstream os;
      os << "the value " << x << " is outside the distribution's support";
      return os.str();
    }
  }
  if (static_cast<int64_t>(v.size()) < kMomentSize) return "";  // too few draws for the moments to mean much
  const double n = static_cast<double>(v.size());
  double sum = 0, sq = 0, in_one_std = 0;
  for (double x : v) sum += x;
  const double mean = sum / n;
  for (double x : v) {
    sq += (x - mean) * (x - mean);
    in_one_std += std::fabs(x - d.a) < d.b;
  }
  const double var = sq / n;
  double want_mean = 0, want_var = 0, var_se = 0, scale = 0;
  switch (d.dist) {
    case Dist::Uniform: {
      const double w = d.b - d.a;
      want_mean = (d.a + d.b) / 2, want_var = w * w / 12, var_se = w * w * std::sqrt(1 / (180 * n));
      scale = std::max(std::fabs(d.a), std::fabs(d.b));
      break;
    }
    case Dist::Normal:
      want_mean = d.a, want_var = d.b * d.b, var_se = want_var * std::sqrt(2 / n);
      scale = std::fabs(d.a) + 4 * d.b;
      break;
    case Dist::Bernoulli:
      want_mean = d.a, want_var = d.a * (1 - d.a), var_se = std::sqrt(want_var / n);
      scale = 1;
      break;
  }
  const double eps = machineEpsilon(dtype);
  std::string why = within("mean", mean, want_mean, std::sqrt(want_var / n), eps * scale);
  if (why.empty()) why = within("variance", var, want_var, var_se, 2 * eps * scale * scale);
  if (why.empty() && d.dist == Dist::Normal && d.b > 0) {
    // The moments alone would pass a uniform of the right variance.
    const double p = 0.682689492137;
    why = within("fraction within one std of the mean", in_one_std / n, p, std::sqrt(p * (1 - p) / n), 0.01);
  }
  return why;
}

// Empty when `got` holds `want` within the dtype's tolerance.
std::string compareValues(const std::vector<double>& got, const std::vector<double>& want, ScalarType dtype,
                          const std::string& what) {
  const Tolerance tol = defaultTolerance(dtype);
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::fabs(got[i] - want[i]) <= tol.atol + tol.rtol * std::fabs(want[i])) continue;
    std::ostringstream os;
    os << "element " << i << " is " << got[i] << ", " << what << " gives " << want[i];
    return os.str();
  }
  return "";
}

// The values of the draw just made of `n` elements (Note [Random specs]):
// the stream at the last blocks reserved.
std::vector<double> lastDraw(const Draw& d, ScalarType dtype, int64_t n, std::string& source) {
  const RandomState now = randomState();
  const uint64_t offset = now.offset - philox::blocksFor(n, kindOf(d, dtype));
  source = "the Philox stream (seed " + std::to_string(now.seed) + ", offset " + std::to_string(offset) + ")";
  return streamValues(d, dtype, n, now.seed, offset);
}

std::string checkDraw(const Draw& d, const Tensor& got) {
  const std::vector<double> v = valuesOf(got);
  std::string why = checkDistribution(v, d, got.dtype());
  if (!why.empty() || v.empty()) return why;
  std::string source;
  const std::vector<double> want = lastDraw(d, got.dtype(), got.numel(), source);
  return compareValues(v, want, got.dtype(), source);
}

// An op drawing `dist` into (or like) its first argument; `draw` reads a
// sample's parameters, `result` gives the result's shape and dtype.
void addDraw(std::vector<OpSpec>& specs, const std::string& op, std::function<std::vector<Sample>()> samples,
             std::function<Draw(const Sample&)> draw, Reference result) {
  OpSpec spec;
  spec.op = op;
  spec.family = "random";
  spec.samples = std::move(samples);
  spec.reference = std::move(result);
  spec.check = [draw](const Sample& s, const std::vector<Tensor>& got) { return checkDraw(draw(s), got[0]); };
  specs.push_back(std::move(spec));
}

// uniform_, normal_ (self, a=0, b=1) and bernoulli_.float (self, p=0.5).
// `defaults` is the draw a sample asks for when it leaves them off.
void addInplaceDraw(std::vector<OpSpec>& specs, const std::string& op, Draw defaults,
                    const std::vector<ScalarType>& dtypes, const std::vector<Params>& params, std::vector<Sample> bad) {
  auto samples = [op, dtypes, params, bad] {
    std::vector<Sample> out = drawSamples(op, dtypes, params);
    out.insert(out.end(), bad.begin(), bad.end());
    out.push_back(expandedSelf(params[0].args));
    return out;
  };
  auto draw = [defaults](const Sample& s) {
    Draw d = defaults;
    if (s.args.size() > 1) d.a = s.args[1].toDouble();
    if (s.args.size() > 2) d.b = s.args[2].toDouble();
    return d;
  };
  addDraw(specs, op, samples, draw, likeSelf);
}

// rand_like, randn_like (self, dtype=None, device=None): as rand and randn,
// with the given dtype or self's, which must be floating, on the given
// device or self's.
void addLikeDraw(std::vector<OpSpec>& specs, const std::string& op, Dist dist) {
  auto samples = [op] {
    const std::vector<Params> params = {{"dtype=None", {IValue()}}};
    std::vector<Sample> out = drawSamples(op, kFloatTypes, params);
    Rng rng(seedFor(op));
    out.push_back(makeSample("[64,64] int32, dtype=float64",
                             {IValue(randomTensor(rng, {64, 64}, ScalarType::Int32)), IValue(ScalarType::Float64)}));
    out.push_back(makeSample("expanded [3,4] float16, dtype=None",
                             {IValue(randomTensor(rng, {1, 4}, ScalarType::Float16).expand({3, 4})), IValue()}));
    out.push_back(makeSample("[64,64] float32, device= the backend's",
                             {IValue(randomTensor(rng, {64, 64}, ScalarType::Float32)), IValue(), backendDevice()}));
    out.push_back(raisingOn("int64 self, dtype=None", {IValue()}, "an integral dtype", ScalarType::Int64));
    out.push_back(raisingOn("dtype=int32", {IValue(ScalarType::Int32)}, "an integral dtype"));
    return out;
  };
  auto result = [](const Sample& s) {
    std::vector<Expected> e = likeSelf(s);
    if (!s.args[1].isNone()) e[0].dtype = s.args[1].toScalarType();
    return e;
  };
  addDraw(
      specs, op, samples,
      [dist](const Sample&) {
        return Draw{dist, 0, 1};
      },
      result);
}

// rand, randn (size, dtype=None, device=None): uniform in [0, 1) or
// standard normal, float32 unless dtype= names another floating dtype.
void addFactoryDraw(std::vector<OpSpec>& specs, const std::string& op, Dist dist) {
  auto samples = [] {
    std::vector<Sample> out;
    auto args = [](std::vector<int64_t> size, std::optional<ScalarType> dtype) {
      return std::vector<IValue>{IValue(std::move(size)), IValue(dtype), backendDevice()};
    };
    auto push = [&](std::string name, std::vector<int64_t> size, std::optional<ScalarType> dtype) {
      out.push_back(makeSample(std::move(name), args(std::move(size), dtype)));
    };
    for (ScalarType dt : kFloatTypes) {
      const std::string suffix = dtypeSuffix(dt);
      push("[64,64]" + suffix, {64, 64}, dt);
      push("0-d" + suffix, {}, dt);
      push("7 elements (a partial block)" + suffix, {7}, dt);
      push("empty [0,4]" + suffix, {0, 4}, dt);
    }
    push("[4,32,32] dtype=None is float32", {4, 32, 32}, std::nullopt);
    push("0-d dtype=None is float32", {}, std::nullopt);
    push("large [1100,1000] float32", {1100, 1000}, ScalarType::Float32);
    out.push_back(raising("dtype=int32", args({2, 3}, ScalarType::Int32), "an integral dtype"));
    out.push_back(raising("dtype=bool", args({2, 3}, ScalarType::Bool), "an integral dtype"));
    out.push_back(raising("negative size [2,-1]", args({2, -1}, std::nullopt), "sizes must be >= 0"));
    return out;
  };
  auto result = [](const Sample& s) {
    const IValue& dtype = s.args[1];
    return std::vector<Expected>{
        Expected{s.args[0].toIntList(), dtype.isNone() ? ScalarType::Float32 : dtype.toScalarType(), {}}};
  };
  addDraw(
      specs, op, samples,
      [dist](const Sample&) {
        return Draw{dist, 0, 1};
      },
      result);
}

// dropout (input, p, train): the input itself when not training or p = 0,
// else input * mask / (1 - p) with mask ~ Bernoulli(1 - p) (Note [Random
// specs]: the mask is the last draw).
std::string checkDropout(const Sample& s, const Tensor& got) {
  const Tensor& input = s.args[0].toTensor();
  const double p = s.args[1].toDouble();
  const bool train = s.args[2].toBool();
  const ScalarType dt = input.dtype();
  const std::vector<double> x = valuesOf(input), v = valuesOf(got);
  if (!train || p == 0) return compareValues(v, x, dt, "the input");
  if (p == 1) return compareValues(v, std::vector<double>(v.size(), 0), dt, "p = 1");
  // The mask is scaled in the input's dtype, then multiplied.
  const double scale = roundTo(dt, 1 / (1 - p));
  std::vector<double> scaled(x.size()), kept(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    scaled[i] = roundTo(dt, x[i] * scale);
    kept[i] = v[i] != 0;
    if (kept[i] != 0 && !compareValues({v[i]}, {scaled[i]}, dt, "input / (1 - p)").empty()) {
      std::ostringstream os;
      os << "element " << i << " is " << v[i] << "; a dropout keeps input / (1 - p) = " << scaled[i] << " or 0";
      return os.str();
    }
  }
  const Draw mask{Dist::Bernoulli, 1 - p, 0};
  std::string why = checkDistribution(kept, mask, ScalarType::Float64);
  if (!why.empty()) return "the kept elements: " + why;
  std::string source;
  std::vector<double> want = lastDraw(mask, dt, input.numel(), source);
  for (size_t i = 0; i < want.size(); ++i) want[i] *= scaled[i];
  return compareValues(v, want, dt, "the mask from " + source);
}

void addDropout(std::vector<OpSpec>& specs) {
  OpSpec spec;
  spec.op = "bp::dropout";
  spec.family = "nn";
  spec.samples = [op = spec.op] {
    Rng rng(seedFor(op));
    std::vector<Sample> out;
    // Inputs away from zero, so a kept element is never 0.
    const Range away{0.5, 2};
    auto push = [&](std::string name, Tensor input, double p, bool train) {
      out.push_back(makeSample(std::move(name), {IValue(std::move(input)), IValue(p), IValue(train)}));
    };
    for (ScalarType dt : kFloatTypes) {
      const std::string suffix = dtypeSuffix(dt);
      // Scales 1 / (1 - p) exact in every dtype.
      for (const char* p : {"0.5", "0.2", "0.75"}) {
        push("[64,64] p=" + std::string(p) + suffix, randomTensor(rng, {64, 64}, dt, away), std::stod(p), true);
      }
      push("[3,4] not training" + suffix, randomTensor(rng, {3, 4}, dt), 0.5, false);
      push("transposed [40,30] p=0.5" + suffix, randomTensor(rng, {30, 40}, dt, away).transpose(0, 1), 0.5, true);
    }
    push("[64,64] p=0.3 float32", randomTensor(rng, {64, 64}, ScalarType::Float32, away), 0.3, true);
    push("0-d p=0.5 float32", randomTensor(rng, {}, ScalarType::Float32, away), 0.5, true);
    push("7 elements p=0.5 float64", randomTensor(rng, {7}, ScalarType::Float64, away), 0.5, true);
    push("empty [0,4] p=0.5 float32", randomTensor(rng, {0, 4}, ScalarType::Float32), 0.5, true);
    push("sliced [30,20] (step 2) p=0.5 float32",
         randomTensor(rng, {30, 40}, ScalarType::Float32, away).slice(1, 0, std::nullopt, 2), 0.5, true);
    push("p=0 returns the input", randomTensor(rng, {3, 4}, ScalarType::Float32), 0, true);
    push("p=1 zeroes everything", randomTensor(rng, {3, 4}, ScalarType::Float32), 1, true);
    push("int32 input, not training", randomTensor(rng, {3, 4}, ScalarType::Int32), 0.5, false);
    push("large [1100,1000] p=0.5 float32", randomTensor(rng, {1100, 1000}, ScalarType::Float32, away), 0.5, true);
    out.push_back(raisingOn("p=1.5", {IValue(1.5), IValue(true)}, "p must be in [0, 1]"));
    out.push_back(raisingOn("p=-0.1, not training", {IValue(-0.1), IValue(false)}, "p must be in [0, 1]"));
    out.push_back(raisingOn("int32 input, training", {IValue(0.5), IValue(true)}, "dropout needs a floating dtype",
                            ScalarType::Int32));
    return out;
  };
  spec.reference = likeSelf;
  spec.check = [](const Sample& s, const std::vector<Tensor>& got) { return checkDropout(s, got[0]); };
  specs.push_back(std::move(spec));
}

}  // namespace

void addRandomSpecs(std::vector<OpSpec>& specs) {
  const double inf = std::numeric_limits<double>::infinity();
  // Ranges of power-of-two width: from + u * (to - from) is then exact, on
  // every backend, whether or not its compiler fuses the multiply-add.
  addPhilox(specs, "_philox_uniform_", Dist::Uniform, kFloatTypes, {{-3, 5}, {2, 2.5}, {1, 1}},
            {raisingOn("int32 self", {IValue(0.0), IValue(1.0), IValue(1), IValue(0)}, "an integral dtype",
                       ScalarType::Int32),
             raisingOn("from > to", {IValue(5.0), IValue(-3.0), IValue(1), IValue(0)}, "from must be <= to"),
             raisingOn("infinite to", {IValue(0.0), IValue(inf), IValue(1), IValue(0)}, "to must be finite")});
  addPhilox(specs, "_philox_normal_", Dist::Normal, kFloatTypes, {{0, 1}, {1.5, 0.25}, {-2, 0}},
            {raisingOn("int32 self", {IValue(0.0), IValue(1.0), IValue(1), IValue(0)}, "an integral dtype",
                       ScalarType::Int32),
             raisingOn("std < 0", {IValue(0.0), IValue(-1.0), IValue(1), IValue(0)}, "std must be >= 0")});
  addPhilox(specs, "_philox_bernoulli_", Dist::Bernoulli, kAllTypes, {{0.5, 0}, {0.1, 0}, {0, 0}, {1, 0}},
            {raisingOn("p=1.5", {IValue(1.5), IValue(1), IValue(0)}, "p must be in [0, 1]"),
             raisingOn("p=-0.5", {IValue(-0.5), IValue(1), IValue(0)}, "p must be in [0, 1]")});

  addInplaceDraw(specs, "bp::uniform_", {Dist::Uniform, 0, 1}, kFloatTypes,
                 {{"from=-3, to=5", {IValue(-3.0), IValue(5.0)}},
                  {"from=2, to=2.5", {IValue(2.0), IValue(2.5)}},
                  {"from=to=1", {IValue(1.0), IValue(1.0)}},
                  {"defaults [0, 1)", {}}},
                 {raisingOn("int32 self", {IValue(0.0), IValue(1.0)}, "an integral dtype", ScalarType::Int32),
                  raisingOn("from > to", {IValue(5.0), IValue(-3.0)}, "from must be <= to"),
                  raisingOn("NaN from", {IValue(std::nan("")), IValue(1.0)}, "from must be finite")});
  addInplaceDraw(specs, "bp::normal_", {Dist::Normal, 0, 1}, kFloatTypes,
                 {{"mean=1.5, std=0.25", {IValue(1.5), IValue(0.25)}},
                  {"mean=-2, std=3", {IValue(-2.0), IValue(3.0)}},
                  {"std=0", {IValue(0.5), IValue(0.0)}},
                  {"defaults (0, 1)", {}}},
                 {raisingOn("int64 self", {IValue(0.0), IValue(1.0)}, "an integral dtype", ScalarType::Int64),
                  raisingOn("std < 0", {IValue(0.0), IValue(-1.0)}, "std must be >= 0")});
  addInplaceDraw(specs, "bp::bernoulli_.float", {Dist::Bernoulli, 0.5, 0}, kAllTypes,
                 {{"p=0.1", {IValue(0.1)}}, {"p=0", {IValue(0.0)}}, {"p=1", {IValue(1.0)}}, {"default p=0.5", {}}},
                 {raisingOn("p=1.5", {IValue(1.5)}, "p must be in [0, 1]"),
                  raisingOn("p=-0.5", {IValue(-0.5)}, "p must be in [0, 1]")});
  // bernoulli.p (self, p): the in-place draw's samples into a new tensor
  // like self; its out= form is bernoulli.float_out.
  addDraw(
      specs, "bp::bernoulli.p",
      [] {
        std::vector<Sample> out = drawSamples(
            "bp::bernoulli.p", kAllTypes, {{"p=0.1", {IValue(0.1)}}, {"p=0", {IValue(0.0)}}, {"p=1", {IValue(1.0)}}});
        out.push_back(raisingOn("p=1.5", {IValue(1.5)}, "p must be in [0, 1]"));
        out.push_back(raisingOn("p=-0.5", {IValue(-0.5)}, "p must be in [0, 1]"));
        return out;
      },
      [](const Sample& s) {
        return Draw{Dist::Bernoulli, s.args[1].toDouble(), 0};
      },
      likeSelf);
  addFactoryDraw(specs, "bp::rand", Dist::Uniform);
  addFactoryDraw(specs, "bp::randn", Dist::Normal);
  addLikeDraw(specs, "bp::rand_like", Dist::Uniform);
  addLikeDraw(specs, "bp::randn_like", Dist::Normal);
  addDropout(specs);
}

}  // namespace backplane::conformance
