// Conformance specs of the collectives (Note [Collectives are operators] in
// backplane/runtime/collectives.h), in the world a conformance run has: one
// process, rank 0 of 1. There every collective's result is known without a
// peer: an all_reduce of one rank is its input, whatever the reduction; a
// broadcast from rank 0, an all_gather, a reduce_scatter and an all_to_all
// return self (a 0-d self gathers into [1]). So the specs certify that a
// backend's engine (or the CPU engine it falls back to) moves every dtype
// and layout intact and that each rank's own arguments are refused before
// anything is sent; the multi-rank results are certified under mpirun by
// plugins/mpi/tests.
#include <string>
#include <utility>
#include <vector>

#include "backplane/conformance/spec.h"

namespace backplane::conformance {
namespace {

using Sizes = std::vector<int64_t>;

// Shapes and layouts: empty, 0-d (where the op takes one), a matrix, and a
// transposed (non-contiguous) matrix.
void pushLayouts(std::vector<Sample>& out, Rng& rng, ScalarType dt, std::vector<IValue> rest, bool zero_dim) {
  auto with = [&](Tensor self) {
    std::vector<IValue> args{std::move(self)};
    args.insert(args.end(), rest.begin(), rest.end());
    return args;
  };
  out.push_back(makeSample("[3, 4]" + dtypeSuffix(dt), with(randomTensor(rng, {3, 4}, dt))));
  out.push_back(makeSample("transposed [4, 3]" + dtypeSuffix(dt), with(randomTensor(rng, {3, 4}, dt).t())));
  out.push_back(makeSample("empty [0, 2]" + dtypeSuffix(dt), with(randomTensor(rng, {0, 2}, dt))));
  if (zero_dim) out.push_back(makeSample("0-d" + dtypeSuffix(dt), with(randomTensor(rng, {}, dt))));
}

Expected same(const Tensor& t, Sizes sizes) { return Expected{std::move(sizes), t.dtype(), valuesOf(t)}; }

std::vector<Expected> identity(const Sample& s) {
  const Tensor& t = s.args[0].toTensor();
  return {same(t, sizesOf(t))};
}

void addAllReduce(std::vector<OpSpec>& specs) {
  OpSpec spec;
  spec.op = "comm::all_reduce";
  spec.family = "collectives";
  spec.samples = [op = spec.op] {
    Rng rng(seedFor(op));
    std::vector<Sample> out;
    for (ScalarType dt : kNumericTypes)
      for (const char* reduction : {"sum", "min", "max", "product"})
        pushLayouts(out, rng, dt, {IValue(reduction), IValue(int64_t{0})}, true);
    for (ScalarType dt : kFloatTypes) pushLayouts(out, rng, dt, {IValue("avg"), IValue(int64_t{0})}, true);
    pushLayouts(out, rng, ScalarType::Bool, {IValue("max"), IValue(int64_t{0})}, true);
    out.push_back(raising("op='mean'",
                          {randomTensor(rng, {3}, ScalarType::Float32), IValue("mean"), IValue(int64_t{0})},
                          "the reductions are sum, avg, min, max and product"));
    out.push_back(raising("op='avg' on int64",
                          {randomTensor(rng, {3}, ScalarType::Int64), IValue("avg"), IValue(int64_t{0})},
                          "avg averages floating tensors"));
    out.push_back(raising("op='sum' on bool",
                          {randomTensor(rng, {3}, ScalarType::Bool), IValue("sum"), IValue(int64_t{0})},
                          "a bool tensor reduces with max or min"));
    out.push_back(raising("group 999",
                          {randomTensor(rng, {3}, ScalarType::Float32), IValue("sum"), IValue(int64_t{999})},
                          "no such process group"));
    return out;
  };
  spec.reference = identity;
  spec.inplace = "comm::all_reduce_";
  specs.push_back(std::move(spec));
}

void addBroadcast(std::vector<OpSpec>& specs) {
  OpSpec spec;
  spec.op = "comm::broadcast";
  spec.family = "collectives";
  spec.samples = [op = spec.op] {
    Rng rng(seedFor(op));
    std::vector<Sample> out;
    for (ScalarType dt : kEveryType) pushLayouts(out, rng, dt, {IValue(int64_t{0}), IValue(int64_t{0})}, true);
    out.push_back(raising("src=1 in a world of one",
                          {randomTensor(rng, {3}, ScalarType::Float32), IValue(int64_t{1}), IValue(int64_t{0})},
                          "src is not a rank of the group"));
    return out;
  };
  spec.reference = identity;
  spec.inplace = "comm::broadcast_";
  specs.push_back(std::move(spec));
}

// all_gather, reduce_scatter and all_to_all: out= forms; self in one rank.
void addBlockOps(std::vector<OpSpec>& specs) {
  {
    OpSpec spec;
    spec.op = "comm::all_gather";
    spec.family = "collectives";
    spec.samples = [op = spec.op] {
      Rng rng(seedFor(op));
      std::vector<Sample> out;
      for (ScalarType dt : kEveryType) pushLayouts(out, rng, dt, {IValue(int64_t{0})}, true);
      return out;
    };
    spec.reference = [](const Sample& s) {
      const Tensor& t = s.args[0].toTensor();
      return std::vector<Expected>{same(t, t.dim() == 0 ? Sizes{1} : sizesOf(t))};
    };
    spec.out = "comm::all_gather.out";
    specs.push_back(std::move(spec));
  }
  {
    OpSpec spec;
    spec.op = "comm::reduce_scatter";
    spec.family = "collectives";
    spec.samples = [op = spec.op] {
      Rng rng(seedFor(op));
      std::vector<Sample> out;
      for (ScalarType dt : kNumericTypes) pushLayouts(out, rng, dt, {IValue("sum"), IValue(int64_t{0})}, false);
      out.push_back(raising("0-d self", {randomTensor(rng, {}, ScalarType::Float32), IValue("sum"), IValue(int64_t{0})},
                            "self is split along dim 0"));
      return out;
    };
    spec.reference = identity;
    spec.out = "comm::reduce_scatter.out";
    specs.push_back(std::move(spec));
  }
  {
    OpSpec spec;
    spec.op = "comm::all_to_all";
    spec.family = "collectives";
    spec.samples = [op = spec.op] {
      Rng rng(seedFor(op));
      std::vector<Sample> out;
      for (ScalarType dt : kEveryType) pushLayouts(out, rng, dt, {IValue(int64_t{0})}, false);
      out.push_back(raising("0-d self", {randomTensor(rng, {}, ScalarType::Float32), IValue(int64_t{0})},
                            "self is split along dim 0"));
      return out;
    };
    spec.reference = identity;
    spec.out = "comm::all_to_all.out";
    specs.push_back(std::move(spec));
  }
}

// send and recv_ need a peer, which a world of one has not: only their
// refusals are certified here.
void addPointToPoint(std::vector<OpSpec>& specs) {
  {
    OpSpec spec;
    spec.op = "comm::send";
    spec.family = "collectives";
    spec.samples = [op = spec.op] {
      Rng rng(seedFor(op));
      return std::vector<Sample>{raising("dst=0, itself",
                                         {randomTensor(rng, {3}, ScalarType::Float32), IValue(int64_t{0}),
                                          IValue(int64_t{0}), IValue(int64_t{0})},
                                         "a rank cannot send to itself"),
                                 raising("tag 40000",
                                         {randomTensor(rng, {3}, ScalarType::Float32), IValue(int64_t{0}),
                                          IValue(int64_t{40000}), IValue(int64_t{0})},
                                         "tags are in [0, 32767]")};
    };
    spec.reference = [](const Sample&) { return std::vector<Expected>{}; };
    specs.push_back(std::move(spec));
  }
  {
    OpSpec spec;
    spec.op = "comm::recv_";
    spec.family = "collectives";
    spec.samples = [op = spec.op] {
      Rng rng(seedFor(op));
      return std::vector<Sample>{raising(
          "src=0, itself",
          {randomTensor(rng, {3}, ScalarType::Float32), IValue(int64_t{0}), IValue(int64_t{0}), IValue(int64_t{0})},
          "a rank cannot receive from itself")};
    };
    spec.reference = [](const Sample&) { return std::vector<Expected>{}; };
    specs.push_back(std::move(spec));
  }
}

void addBarrier(std::vector<OpSpec>& specs) {
  OpSpec spec;
  spec.op = "comm::barrier";
  spec.family = "collectives";
  spec.samples = [] {
    return std::vector<Sample>{makeSample("the world", {IValue(int64_t{0})}),
                               raising("group 999", {IValue(int64_t{999})}, "no such process group")};
  };
  spec.reference = [](const Sample&) { return std::vector<Expected>{}; };
  specs.push_back(std::move(spec));
}

}  // namespace

void addCollectiveSpecs(std::vector<OpSpec>& specs) {
  addAllReduce(specs);
  addBroadcast(specs);
  addBlockOps(specs);
  addPointToPoint(specs);
  addBarrier(specs);
}

}  // namespace backplane::conformance
