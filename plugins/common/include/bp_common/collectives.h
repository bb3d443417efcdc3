#pragma once
// What the first-party collective engines (the mpi plugin for CPU tensors,
// NCCL in the CUDA plugin) share: the names of the comm:: forms they
// implement, the reductions, each call's signature (what the ranks compare
// before moving data: Note [Checked collectives] in plugins/mpi/mpi_plugin.cc),
// a group's name in errors, and the staging of a tensor the libraries cannot
// take as it is. Host code only.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "backplane/plugin.hpp"

namespace bp_common::comm {

enum class Kind : int64_t { AllReduce = 1, Broadcast, AllGather, ReduceScatter, AllToAll, Barrier, Send };
inline const char* kindName(Kind k) {
  switch (k) {
    case Kind::AllReduce: return "comm::all_reduce_";
    case Kind::Broadcast: return "comm::broadcast_";
    case Kind::AllGather: return "comm::all_gather.out";
    case Kind::ReduceScatter: return "comm::reduce_scatter.out";
    case Kind::AllToAll: return "comm::all_to_all.out";
    case Kind::Barrier: return "comm::barrier";
    case Kind::Send: return "comm::send";
  }
  return "comm::?";
}

enum class Reduction : int64_t { None = 0, Sum, Avg, Min, Max, Product };
inline Reduction parseReduction(std::string_view s) {
  if (s == "sum") return Reduction::Sum;
  if (s == "avg") return Reduction::Avg;
  if (s == "min") return Reduction::Min;
  if (s == "max") return Reduction::Max;
  if (s == "product") return Reduction::Product;
  bp::fail(BP_INVALID_ARGUMENT, "unknown reduction '" + std::string(s) + "'");
}
inline const char* reductionName(Reduction r) {
  switch (r) {
    case Reduction::None: return "";
    case Reduction::Sum: return "sum";
    case Reduction::Avg: return "avg";
    case Reduction::Min: return "min";
    case Reduction::Max: return "max";
    case Reduction::Product: return "product";
  }
  return "?";
}

constexpr int kSignatureDims = 6;
// One rank's call, fixed-size, so that one allgather of int64s carries
// every rank's.
struct Signature {
  int64_t kind = 0;
  int64_t dtype = -1;
  int64_t reduction = 0;
  int64_t root = -1;
  int64_t ndim = 0;
  int64_t numel = 0;
  int64_t sizes[kSignatureDims] = {};  // the first dims; a longer shape's tail is in numel
};
constexpr int kSignatureWords = sizeof(Signature) / sizeof(int64_t);
static_assert(sizeof(Signature) == kSignatureWords * sizeof(int64_t));

inline Signature signatureOf(Kind kind, const bp::Tensor* t, Reduction r, int64_t root) {
  Signature s;
  s.kind = static_cast<int64_t>(kind);
  s.reduction = static_cast<int64_t>(r);
  s.root = root;
  if (t != nullptr) {
    s.dtype = static_cast<int64_t>(t->dtype());
    s.ndim = t->dim();
    s.numel = t->numel();
    for (int64_t d = 0; d < t->dim() && d < kSignatureDims; ++d) s.sizes[d] = t->size(d);
  }
  return s;
}

inline std::string describe(const Signature& s) {
  std::string out = kindName(static_cast<Kind>(s.kind));
  if (s.dtype >= 0 && s.dtype <= BP_UINT64) {
    out += std::string(" on ") + bp::name(static_cast<bp::ScalarType>(s.dtype)) + " [";
    for (int64_t d = 0; d < s.ndim; ++d) {
      if (d) out += ", ";
      out += d < kSignatureDims ? std::to_string(s.sizes[d]) : std::string("...");
      if (d >= kSignatureDims) break;
    }
    out += "]";
    if (s.ndim > kSignatureDims) out += " (" + std::to_string(s.numel) + " elements)";
  }
  if (s.reduction) out += std::string(", op='") + reductionName(static_cast<Reduction>(s.reduction)) + "'";
  if (s.root >= 0) out += ", src=" + std::to_string(s.root);
  return out;
}

inline bool sameCall(const Signature& a, const Signature& b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// "the world (2 ranks)", "group 3 (world ranks [0, 2])".
inline std::string groupName(const BP_GroupInfo& g) {
  if (g.id == 0) return "the world (" + std::to_string(g.size) + " ranks)";
  std::string s = "group " + std::to_string(g.id) + " (world ranks [";
  for (int i = 0; i < g.size; ++i) s += (i ? ", " : "") + std::to_string(g.world_ranks[i]);
  return s + "])";
}

// The message of ranks whose signatures (`ranks`, one per group rank)
// differ, or "" when they agree.
inline std::string disagreement(const Signature* ranks, const BP_GroupInfo& g) {
  bool same = true;
  for (int r = 1; r < g.size; ++r) same = same && sameCall(ranks[r], ranks[0]);
  if (same) return {};
  std::string calls;
  for (int r = 0; r < g.size; ++r) calls += "\n  rank " + std::to_string(r) + ": " + describe(ranks[r]);
  return groupName(g) +
         ": the ranks' calls disagree; every rank must make the same collective with the same dtype and shape:" + calls;
}

// --- Staging: the libraries take contiguous buffers.

// A contiguous tensor on t's device with t's values (t itself when it is one).
inline bp::Tensor contiguousCopy(const bp::Tensor& t) {
  if (t.is_contiguous()) return t;
  static const bp::Operator copy = bp::Operator::find("copy_");
  bp::Tensor c = bp::Tensor::empty(t.sizes(), t.dtype(), t.device());
  copy.call(c, t, false);
  return c;
}
// Writes `from` back into `to` (after contiguousCopy; nothing when they are one).
inline void copyBack(const bp::Tensor& to, const bp::Tensor& from) {
  if (to.get() == from.get()) return;
  static const bp::Operator copy = bp::Operator::find("copy_");
  copy.call(to, from, false);
}

inline bool overlaps(const bp::Tensor& a, const bp::Tensor& b) {
  const auto* a0 = static_cast<const char*>(a.data_ptr());
  const auto* b0 = static_cast<const char*>(b.data_ptr());
  const size_t an = static_cast<size_t>(a.numel()) * a.element_size(),
               bn = static_cast<size_t>(b.numel()) * b.element_size();
  return an && bn && a0 < b0 + bn && b0 < a0 + an;
}

// self's values in a contiguous tensor that does not overlap `out`.
inline bp::Tensor sendBuffer(const bp::Tensor& self, const bp::Tensor& out) {
  if (self.is_contiguous() && !overlaps(self, out)) return self;
  static const bp::Operator copy = bp::Operator::find("copy_");
  bp::Tensor c = bp::Tensor::empty(self.sizes(), self.dtype(), self.device());
  copy.call(c, self, false);
  return c;
}

}  // namespace bp_common::comm
