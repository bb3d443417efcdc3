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

// A collective's spec: `samples` drawn from the op's own seed.
OpSpec collectiveSpec(const char* op, std::vector<Sample> (*samples)(Rng&), Reference reference) {
  OpSpec spec;
  spec.op = op;
  spec.family = "collectives";
  spec.samples = [op, samples] {
    Rng rng(seedFor(op));
    return samples(rng);
  };
  spec.reference = std::move(reference);
  return spec;
}

std::vector<Expected> nothing(const Sample&) { return {}; }
IValue group(int64_t id) { return IValue(id); }
Tensor floats3(Rng& rng) { return randomTensor(rng, {3}, ScalarType::Float32); }

std::vector<Sample> allReduceSamples(Rng& rng) {
  std::vector<Sample> out;
  for (ScalarType dt : kNumericTypes)
    for (const char* reduction : {"sum", "min", "max", "product"})
      pushLayouts(out, rng, dt, {IValue(reduction), group(0)}, true);
  for (ScalarType dt : kFloatTypes) pushLayouts(out, rng, dt, {IValue("avg"), group(0)}, true);
  pushLayouts(out, rng, ScalarType::Bool, {IValue("max"), group(0)}, true);
  out.push_back(raising("op='mean'", {floats3(rng), IValue("mean"), group(0)},
                        "the reductions are sum, avg, min, max and product"));
  out.push_back(raising("op='avg' on int64", {randomTensor(rng, {3}, ScalarType::Int64), IValue("avg"), group(0)},
                        "avg averages floating tensors"));
  out.push_back(raising("op='sum' on bool", {randomTensor(rng, {3}, ScalarType::Bool), IValue("sum"), group(0)},
                        "a bool tensor reduces with max or min"));
  out.push_back(raising("group 999", {floats3(rng), IValue("sum"), group(999)}, "no such process group"));
  return out;
}

std::vector<Sample> broadcastSamples(Rng& rng) {
  std::vector<Sample> out;
  for (ScalarType dt : kEveryType) pushLayouts(out, rng, dt, {IValue(int64_t{0}), group(0)}, true);
  out.push_back(raising("src=1 in a world of one", {floats3(rng), IValue(int64_t{1}), group(0)},
                        "src is not a rank of the group"));
  return out;
}

std::vector<Sample> allGatherSamples(Rng& rng) {
  std::vector<Sample> out;
  for (ScalarType dt : kEveryType) pushLayouts(out, rng, dt, {group(0)}, true);
  return out;
}

std::vector<Sample> reduceScatterSamples(Rng& rng) {
  std::vector<Sample> out;
  for (ScalarType dt : kNumericTypes) pushLayouts(out, rng, dt, {IValue("sum"), group(0)}, false);
  out.push_back(raising("0-d self", {randomTensor(rng, {}, ScalarType::Float32), IValue("sum"), group(0)},
                        "self is split along dim 0"));
  return out;
}

std::vector<Sample> allToAllSamples(Rng& rng) {
  std::vector<Sample> out;
  for (ScalarType dt : kEveryType) pushLayouts(out, rng, dt, {group(0)}, false);
  out.push_back(
      raising("0-d self", {randomTensor(rng, {}, ScalarType::Float32), group(0)}, "self is split along dim 0"));
  return out;
}

// send and recv_ need a peer, which a world of one has not: only their
// refusals are certified here.
std::vector<Sample> sendSamples(Rng& rng) {
  return {raising("dst=0, itself", {floats3(rng), IValue(int64_t{0}), IValue(int64_t{0}), group(0)},
                  "a rank cannot send to itself"),
          raising("tag 40000", {floats3(rng), IValue(int64_t{0}), IValue(int64_t{40000}), group(0)},
                  "tags are in [0, 32767]")};
}

std::vector<Sample> recvSamples(Rng& rng) {
  return {raising("src=0, itself", {floats3(rng), IValue(int64_t{0}), IValue(int64_t{0}), group(0)},
                  "a rank cannot receive from itself")};
}

std::vector<Sample> barrierSamples(Rng&) {
  return {makeSample("the world", {group(0)}), raising("group 999", {group(999)}, "no such process group")};
}

}  // namespace

void addCollectiveSpecs(std::vector<OpSpec>& specs) {
  OpSpec all_reduce = collectiveSpec("comm::all_reduce", allReduceSamples, identity);
  all_reduce.inplace = "comm::all_reduce_";
  specs.push_back(std::move(all_reduce));
  OpSpec broadcast = collectiveSpec("comm::broadcast", broadcastSamples, identity);
  broadcast.inplace = "comm::broadcast_";
  specs.push_back(std::move(broadcast));
  // all_gather, reduce_scatter and all_to_all: out= forms; in a world of
  // one, self (a 0-d self gathers into [1]).
  OpSpec all_gather = collectiveSpec("comm::all_gather", allGatherSamples, [](const Sample& s) {
    const Tensor& t = s.args[0].toTensor();
    return std::vector<Expected>{same(t, t.dim() == 0 ? Sizes{1} : sizesOf(t))};
  });
  all_gather.out = "comm::all_gather.out";
  specs.push_back(std::move(all_gather));
  OpSpec reduce_scatter = collectiveSpec("comm::reduce_scatter", reduceScatterSamples, identity);
  reduce_scatter.out = "comm::reduce_scatter.out";
  specs.push_back(std::move(reduce_scatter));
  OpSpec all_to_all = collectiveSpec("comm::all_to_all", allToAllSamples, identity);
  all_to_all.out = "comm::all_to_all.out";
  specs.push_back(std::move(all_to_all));
  specs.push_back(collectiveSpec("comm::send", sendSamples, nothing));
  specs.push_back(collectiveSpec("comm::recv_", recvSamples, nothing));
  specs.push_back(collectiveSpec("comm::barrier", barrierSamples, nothing));
}

}  // namespace backplane::conformance
