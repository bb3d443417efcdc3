// Elementwise families: binary ops over every ordered dtype pair, Python
// numbers, unary ops on special values, clamp. One table row per op.
#include "backplane/ops/ops.h"
#include "cases.h"

namespace backplane::torch_parity {
namespace {

// A binary op: its functional, out= and in-place overloads ("" = none),
// trailing arguments, the check and the values it runs on.
struct Binary {
  const char* op;
  const char* out;
  const char* inplace;
  Args extra;
  Check check;
  Fill fill = Fill::Special;
  const char* other = "other";  // the second operand's name
};

std::vector<Binary> binaryOps() {
  return {
      {"add.Tensor", "add.out", "add_.Tensor", {}, exact()},
      {"sub.Tensor", "sub.out", "sub_.Tensor", {}, exact()},
      {"mul.Tensor", "mul.out", "mul_.Tensor", {}, exact()},
      {"div.Tensor", "div.out", "div_.Tensor", {}, exact()},
      {"maximum", "maximum.out", "", {}, exact()},
      {"minimum", "minimum.out", "", {}, exact()},
      {"pow.Tensor_Tensor", "pow.Tensor_Tensor_out", "pow_.Tensor", {}, close(4), Fill::Small, "exponent"},
      {"eq.Tensor", "eq.Tensor_out", "eq_.Tensor", {}, exact()},
      {"ne.Tensor", "ne.Tensor_out", "ne_.Tensor", {}, exact()},
      {"lt.Tensor", "lt.Tensor_out", "lt_.Tensor", {}, exact()},
      {"le.Tensor", "le.Tensor_out", "le_.Tensor", {}, exact()},
      {"gt.Tensor", "gt.Tensor_out", "gt_.Tensor", {}, exact()},
      {"ge.Tensor", "ge.Tensor_out", "ge_.Tensor", {}, exact()},
      // Issue 21 item 7: not yet in Backplane's table on main.
      {"div.Tensor_mode", "div.out_mode", "div_.Tensor_mode", {{"rounding_mode", Str("trunc")}}, exact()},
      {"div.Tensor_mode", "div.out_mode", "div_.Tensor_mode", {{"rounding_mode", Str("floor")}}, exact()},
      {"floor_divide", "floor_divide.out", "floor_divide_.Tensor", {}, exact()},
      {"remainder.Tensor", "remainder.Tensor_out", "remainder_.Tensor", {}, exact()},
      {"fmod.Tensor", "fmod.Tensor_out", "fmod_.Tensor", {}, exact()},
      {"true_divide.Tensor", "true_divide.out", "true_divide_.Tensor", {}, exact()},
      {"bitwise_and.Tensor", "bitwise_and.Tensor_out", "bitwise_and_.Tensor", {}, exact()},
      {"bitwise_or.Tensor", "bitwise_or.Tensor_out", "bitwise_or_.Tensor", {}, exact()},
      {"bitwise_xor.Tensor", "bitwise_xor.Tensor_out", "bitwise_xor_.Tensor", {}, exact()},
      {"logical_and", "logical_and.out", "logical_and_", {}, exact()},
      {"logical_or", "logical_or.out", "logical_or_", {}, exact()},
  };
}

std::string modeSuffix(const Args& extra) {
  for (const auto& [n, a] : extra)
    if (n == "rounding_mode") return "_" + a.s;
  return "";
}

// Every ordered dtype pair with dimensioned and 0-d operands; then, per
// dtype, non-contiguous operands, out= of several dtypes and the in-place
// form against every other dtype.
std::vector<Case> binaryCases() {
  std::vector<Case> cases;
  for (const Binary& b : binaryOps()) {
    const std::string g = b.op + modeSuffix(b.extra);
    const auto add = [&](const char* op, Args args, const std::string& group) {
      for (const auto& e : b.extra) args.push_back(e);
      cases.push_back({op, std::move(args), b.check, group});
    };
    uint32_t seed = 0;
    for (ScalarType x : dtypes()) {
      for (ScalarType y : dtypes()) {
        ++seed;
        add(b.op,
            {{"self", T(x, {4, 4}, b.fill, View::Contiguous, 0)}, {b.other, T(y, {4, 4}, b.fill, View::Contiguous, 1)}},
            g + "/pairs");
        add(b.op,
            {{"self", T(x, {4, 4}, b.fill, View::Contiguous, seed)},
             {b.other, T(y, {}, b.fill, View::Contiguous, seed)}},
            g + "/pairs");
        add(b.op,
            {{"self", T(x, {}, b.fill, View::Contiguous, seed + 3)},
             {b.other, T(y, {4, 4}, b.fill, View::Contiguous, 2)}},
            g + "/pairs");
        add(b.op,
            {{"self", T(x, {}, b.fill, View::Contiguous, seed)},
             {b.other, T(y, {}, b.fill, View::Contiguous, seed + 5)}},
            g + "/pairs");
        if (*b.inplace)
          add(b.inplace,
              {{"self", T(x, {4, 4}, b.fill, View::Contiguous, 0)}, {b.other, T(y, {4}, b.fill, View::Contiguous, 1)}},
              g + "/inplace");
      }
      add(b.op,
          {{"self", T(x, {3, 4}, b.fill, View::Transposed, 0)}, {b.other, T(x, {3, 4}, b.fill, View::Strided, 1)}},
          g + "/views");
      add(b.op,
          {{"self", T(x, {4, 4}, b.fill, View::Expanded, 2)}, {b.other, T(x, {4, 4}, b.fill, View::Transposed, 3)}},
          g + "/views");
      if (*b.inplace) {
        add(b.inplace,
            {{"self", T(x, {4, 3}, b.fill, View::Transposed, 0)}, {b.other, T(x, {3, 4}, b.fill, View::Strided, 1)}},
            g + "/views");
        // Writing through a broadcast view: PyTorch refuses (internal overlap).
        add(b.inplace,
            {{"self", T(x, {4, 4}, b.fill, View::Expanded, 0)}, {b.other, T(x, {4, 4}, b.fill, View::Contiguous, 1)}},
            g + "/views");
      }
      for (ScalarType o : {x, ScalarType::Float64, ScalarType::Int8, ScalarType::Bool}) {
        add(b.out,
            {{"self", T(x, {4, 4}, b.fill, View::Contiguous, 0)},
             {b.other, T(x, {4}, b.fill, View::Contiguous, 1)},
             {"out", T(o, {0}, Fill::Zeros)}},
            g + "/out");
      }
      // out= of the right dtype but a wrong, non-empty shape is resized (PyTorch warns).
      add(b.out,
          {{"self", T(x, {4, 4}, b.fill, View::Contiguous, 0)},
           {b.other, T(x, {4, 4}, b.fill, View::Contiguous, 1)},
           {"out", T(x, {4, 4}, Fill::Zeros, View::Transposed)}},
          g + "/out");
    }
  }
  return cases;
}

// Python numbers: `t op number` as PyTorch's .Scalar overloads take them.
struct ScalarOp {
  const char* op;
  const char* arg;  // the number's argument name
  Args extra;
  Check check;
};

std::vector<Scalar> numbers() {
  const double inf = std::numeric_limits<double>::infinity();
  return {Scalar(int64_t{0}),   Scalar(int64_t{2}), Scalar(int64_t{-3}), Scalar(int64_t{300}), Scalar(int64_t{1} << 40),
          Scalar(2.5),          Scalar(-0.0),       Scalar(0.1),         Scalar(1e5),          Scalar(1e300),
          Scalar(std::nan("")), Scalar(inf),        Scalar(-inf),        Scalar(true),         Scalar(false)};
}

std::vector<Case> scalarCases() {
  const std::vector<ScalarOp> ops = {
      {"eq.Scalar", "other", {}, exact()},
      {"ne.Scalar", "other", {}, exact()},
      {"lt.Scalar", "other", {}, exact()},
      {"le.Scalar", "other", {}, exact()},
      {"gt.Scalar", "other", {}, exact()},
      {"ge.Scalar", "other", {}, exact()},
      {"pow.Tensor_Scalar", "exponent", {}, close(4)},
      {"eq_.Scalar", "other", {}, exact()},
      {"pow_.Scalar", "exponent", {}, close(4)},
      {"fill_.Scalar", "value", {}, exact()},
      {"masked_fill.Scalar", "value", {{"mask", TV(ScalarType::Bool, {4}, {1, 0, 0, 1})}}, exact()},
      // Issue 21 item 7: the .Scalar overloads Backplane lacks on main.
      {"add.Scalar", "other", {}, exact()},
      {"sub.Scalar", "other", {}, exact()},
      {"mul.Scalar", "other", {}, exact()},
      {"div.Scalar", "other", {}, exact()},
      {"add_.Scalar", "other", {}, exact()},
      {"rsub.Scalar", "other", {}, exact()},
      {"remainder.Scalar", "other", {}, exact()},
      {"fmod.Scalar", "other", {}, exact()},
      {"floor_divide.Scalar", "other", {}, exact()},
      {"div.Scalar_mode", "other", {{"rounding_mode", Str("floor")}}, exact()},
      {"bitwise_and.Scalar", "other", {}, exact()},
  };
  std::vector<Case> cases;
  for (const ScalarOp& s : ops) {
    uint32_t seed = 0;
    for (ScalarType x : dtypes()) {
      for (const Scalar& n : numbers()) {
        ++seed;
        const Fill fill = std::string(s.op).starts_with("pow") ? Fill::Small : Fill::Special;
        Args args = {{"self", T(x, {4, 4}, fill, View::Contiguous, seed % 4)}, {s.arg, S(n)}};
        for (const auto& e : s.extra) args.push_back(e);
        cases.push_back({s.op, std::move(args), s.check});
        if (seed % 3 == 0) {  // 0-d self
          Args zero_d = {{"self", T(x, {}, fill, View::Contiguous, seed)}, {s.arg, S(n)}};
          for (const auto& e : s.extra) zero_d.push_back(e);
          cases.push_back({s.op, std::move(zero_d), s.check});
        }
      }
    }
  }
  // alpha of add/sub: an integer, a float (refused with integer tensors) and a bool.
  for (const char* op : {"add.Tensor", "sub.Tensor"}) {
    for (ScalarType x : dtypes()) {
      for (const Scalar& alpha : {Scalar(int64_t{2}), Scalar(2.5), Scalar(true), Scalar(int64_t{0})}) {
        cases.push_back({op,
                         {{"self", T(x, {4, 4}, Fill::Small, View::Contiguous, 0)},
                          {"other", T(x, {4, 4}, Fill::Small, View::Contiguous, 1)},
                          {"alpha", S(alpha)}},
                         close(1),
                         std::string(op) + "/alpha"});
      }
    }
  }
  return cases;
}

// Backplane's public C++ API for numbers (backplane/ops/ops.h: add(t, 2),
// 2 - t, ...) against the PyTorch overload Python reaches.
std::vector<Case> apiCases() {
  using Fn = std::function<std::vector<IValue>(const std::vector<IValue>&)>;
  const auto tensor = [](const IValue& v) { return Tensor(v.toTensor()); };
  const std::vector<std::tuple<const char*, const char*, Fn>> ops = {
      {"add.Scalar", "add(t, number)",
       [=](const std::vector<IValue>& a) -> std::vector<IValue> { return {add(tensor(a[0]), a[1].toScalar())}; }},
      {"sub.Scalar", "sub(t, number)",
       [=](const std::vector<IValue>& a) -> std::vector<IValue> { return {sub(tensor(a[0]), a[1].toScalar())}; }},
      {"mul.Scalar", "mul(t, number)",
       [=](const std::vector<IValue>& a) -> std::vector<IValue> { return {mul(tensor(a[0]), a[1].toScalar())}; }},
      {"div.Scalar", "div(t, number)",
       [=](const std::vector<IValue>& a) -> std::vector<IValue> { return {div(tensor(a[0]), a[1].toScalar())}; }},
      {"rsub.Scalar", "number - t",
       [=](const std::vector<IValue>& a) -> std::vector<IValue> { return {a[1].toScalar() - tensor(a[0])}; }},
  };
  std::vector<Case> cases;
  for (const auto& [op, label, fn] : ops) {
    uint32_t seed = 0;
    for (ScalarType x : dtypes()) {
      for (const Scalar& n : numbers()) {
        ++seed;
        Case c{op,
               {{"self", T(x, {4, 4}, Fill::Special, View::Contiguous, seed % 4)}, {"other", S(n)}},
               exact(),
               std::string("api ") + label};
        c.bp_api = fn;
        cases.push_back(c);
      }
    }
  }
  return cases;
}

// Unary ops: functional on every dtype (special values; contiguous,
// transposed, strided, 0-d), out= of three dtypes, in-place.
struct Unary {
  const char* op;
  const char* out;
  const char* inplace;
  Args extra;
  Check check;
};

std::vector<Case> unaryCases() {
  const Check tr = close(4, 4);  // transcendental
  const std::vector<Unary> ops = {
      {"neg", "neg.out", "neg_", {}, exact()},
      {"abs", "abs.out", "abs_", {}, exact()},
      {"exp", "exp.out", "exp_", {}, tr},
      {"log", "log.out", "log_", {}, tr},
      {"sqrt", "sqrt.out", "sqrt_", {}, tr},
      {"rsqrt", "rsqrt.out", "rsqrt_", {}, tr},
      {"sin", "sin.out", "sin_", {}, tr},
      {"cos", "cos.out", "cos_", {}, tr},
      {"tanh", "tanh.out", "tanh_", {}, tr},
      {"sigmoid", "sigmoid.out", "sigmoid_", {}, tr},
      {"relu", "", "relu_", {}, exact()},
      {"gelu", "gelu.out", "gelu_", {}, tr},
      {"gelu", "gelu.out", "gelu_", {{"approximate", Str("tanh")}}, tr},
      {"silu", "silu.out", "silu_", {}, tr},
      // Issue 21 item 7: not yet in Backplane's table on main.
      {"floor", "floor.out", "floor_", {}, exact()},
      {"ceil", "ceil.out", "ceil_", {}, exact()},
      {"round", "round.out", "round_", {}, exact()},
      {"round.decimals", "round.decimals_out", "round_.decimals", {{"decimals", I(2)}}, close(1)},
      {"trunc", "trunc.out", "trunc_", {}, exact()},
      {"sign", "sign.out", "sign_", {}, exact()},
      {"erf", "erf.out", "erf_", {}, tr},
      {"isnan", "", "", {}, exact()},
      {"isinf", "", "", {}, exact()},
      {"isfinite", "", "", {}, exact()},
      {"nan_to_num", "nan_to_num.out", "nan_to_num_", {}, exact()},
      {"nan_to_num",
       "nan_to_num.out",
       "nan_to_num_",
       {{"nan", F(1.5)}, {"posinf", F(100)}, {"neginf", F(-100)}},
       exact()},
      {"bitwise_not", "bitwise_not.out", "bitwise_not_", {}, exact()},
      {"logical_not", "logical_not.out", "logical_not_", {}, exact()},
      {"leaky_relu", "leaky_relu.out", "leaky_relu_", {{"negative_slope", S(0.2)}}, close(1)},
      {"hardtanh", "hardtanh.out", "hardtanh_", {{"min_val", S(-1.5)}, {"max_val", S(2)}}, exact()},
      {"elu", "elu.out", "elu_", {{"alpha", S(1.0)}}, tr},
      {"softplus", "softplus.out", "", {{"beta", S(1)}, {"threshold", S(20)}}, tr},
  };
  std::vector<Case> cases;
  for (const Unary& u : ops) {
    std::string g = u.op;
    for (const auto& [n, a] : u.extra)
      if (a.kind == Arg::Kind::String) g += "_" + a.s;
    if (!u.extra.empty() && u.extra[0].second.kind != Arg::Kind::String && g == "nan_to_num") g += "_values";
    const auto add = [&](const char* op, Args args) {
      for (const auto& e : u.extra) args.push_back(e);
      cases.push_back({op, std::move(args), u.check, g});
    };
    uint32_t seed = 0;
    for (ScalarType x : dtypes()) {
      add(u.op, {{"self", T(x, {4, 4}, Fill::Special, View::Contiguous, 0)}});
      add(u.op, {{"self", T(x, {4, 4}, Fill::Special, View::Contiguous, 3)}});
      add(u.op, {{"self", T(x, {3, 5}, Fill::Random, View::Transposed, 1)}});
      add(u.op, {{"self", T(x, {16}, Fill::Special, View::Strided, 2)}});
      add(u.op, {{"self", T(x, {4, 4}, Fill::Special, View::Expanded, 5)}});
      for (int k = 0; k < 4; ++k) add(u.op, {{"self", T(x, {}, Fill::Special, View::Contiguous, ++seed)}});
      if (*u.out)
        for (ScalarType o : {x, ScalarType::Float64, ScalarType::Int32})
          add(u.out, {{"self", T(x, {4, 4}, Fill::Special, View::Contiguous, 0)}, {"out", T(o, {0}, Fill::Zeros)}});
      if (*u.inplace) {
        add(u.inplace, {{"self", T(x, {4, 4}, Fill::Special, View::Contiguous, 0)}});
        add(u.inplace, {{"self", T(x, {4, 4}, Fill::Special, View::Transposed, 1)}});
      }
    }
  }
  return cases;
}

// clamp with integer, float, bool, None, out-of-range and NaN bounds.
std::vector<Case> clampCases() {
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<std::pair<Arg, Arg>> bounds = {
      {None(), None()},          {S(int64_t{0}), None()},
      {None(), S(int64_t{2})},   {S(int64_t{-1}), S(int64_t{2})},
      {S(2.5), None()},          {None(), S(int64_t{300})},
      {None(), S(1e300)},        {S(int64_t{-200}), None()},
      {S(std::nan("")), None()}, {S(int64_t{3}), S(int64_t{-1})},
      {S(-inf), S(inf)},         {S(true), None()},
      {S(-0.0), S(0.0)},         {S(int64_t{1} << 40), None()},
  };
  std::vector<Case> cases;
  uint32_t seed = 0;
  for (ScalarType x : dtypes()) {
    for (const auto& [lo, hi] : bounds) {
      ++seed;
      cases.push_back({"clamp",
                       {{"self", T(x, {4, 4}, Fill::Special, View::Contiguous, seed % 3)}, {"min", lo}, {"max", hi}},
                       exact(),
                       "clamp"});
      cases.push_back({"clamp_",
                       {{"self", T(x, {4, 4}, Fill::Special, View::Transposed, seed % 3)}, {"min", lo}, {"max", hi}},
                       exact(),
                       "clamp_"});
      cases.push_back({"clamp.out",
                       {{"self", T(x, {4, 4}, Fill::Special, View::Contiguous, 1)},
                        {"min", lo},
                        {"max", hi},
                        {"out", T(ScalarType::Float64, {0}, Fill::Zeros)}},
                       exact(),
                       "clamp.out"});
    }
  }
  return cases;
}

// where: condition dtypes, operand promotion, 0-d and broadcast operands.
std::vector<Case> whereCases() {
  std::vector<Case> cases;
  for (ScalarType x : dtypes())
    for (ScalarType y : dtypes()) {
      cases.push_back({"where.self",
                       {{"condition", TV(ScalarType::Bool, {4}, {1, 0, 1, 0})},
                        {"self", T(x, {4, 4}, Fill::Special, View::Contiguous, 0)},
                        {"other", T(y, {4, 1}, Fill::Special, View::Contiguous, 1)}},
                       exact(),
                       "where.self/pairs"});
      cases.push_back({"where.self",
                       {{"condition", TV(ScalarType::Bool, {4, 4}, {1, 0, 0})},
                        {"self", T(x, {}, Fill::Special, View::Contiguous, 3)},
                        {"other", T(y, {4, 4}, Fill::Special, View::Transposed, 1)}},
                       exact(),
                       "where.self/pairs"});
    }
  // A number for either value, or both: it promotes as a Python number.
  const std::vector<Arg> numbers = {S(int64_t{3}), S(-2.5), S(true)};
  for (ScalarType x : dtypes())
    for (const Arg& n : numbers) {
      cases.push_back({"where.ScalarOther",
                       {{"condition", TV(ScalarType::Bool, {4}, {1, 0, 1, 0})},
                        {"self", T(x, {4, 4}, Fill::Special, View::Transposed, 0)},
                        {"other", n}},
                       exact(),
                       "where.ScalarOther"});
      cases.push_back({"where.ScalarSelf",
                       {{"condition", TV(ScalarType::Bool, {4, 1}, {0, 1, 1, 0})},
                        {"self", n},
                        {"other", T(x, {}, Fill::Special, View::Contiguous, 2)}},
                       exact(),
                       "where.ScalarSelf"});
    }
  for (const Arg& a : numbers)
    for (const Arg& b : numbers)
      cases.push_back({"where.Scalar",
                       {{"condition", TV(ScalarType::Bool, {2, 3}, {1, 0, 0, 1, 1, 0})}, {"self", a}, {"other", b}},
                       exact(),
                       "where.Scalar"});
  // A uint8 condition is left out: libtorch 1.13 accepts it with a
  // deprecation warning, PyTorch 2.x refuses it, as Backplane does.
  for (ScalarType c : dtypes())
    if (scalarTypeName(c) != "uint8")
      cases.push_back({"where.self",
                       {{"condition", TV(c, {4}, {1, 0, 1, 0})},
                        {"self", T(ScalarType::Float32, {4}, Fill::Random)},
                        {"other", T(ScalarType::Float32, {4}, Fill::Random, View::Contiguous, 1)}},
                       exact(),
                       "where.self/condition"});
  return cases;
}

}  // namespace

Family binaryFamily() { return {"binary", binaryCases}; }
Family scalarFamily() {
  return {"python_numbers", [] {
            std::vector<Case> c = scalarCases();
            for (Case& a : apiCases()) c.push_back(std::move(a));
            return c;
          }};
}
Family unaryFamily() { return {"unary", unaryCases}; }
Family clampFamily() {
  return {"clamp_where", [] {
            std::vector<Case> c = clampCases();
            for (Case& a : whereCases()) c.push_back(std::move(a));
            return c;
          }};
}

}  // namespace backplane::torch_parity
