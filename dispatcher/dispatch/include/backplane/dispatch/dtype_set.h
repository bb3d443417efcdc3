#pragma once
// DtypeSet: the dtypes a native kernel declares it serves (Note [Declared
// dtypes] in operator_entry.h). The host's form of the plugin ABI's
// BP_KernelDesc.dtypes and of plugin.hpp's bp::Dtypes.

#include <cstdint>
#include <initializer_list>
#include <string>

#include "absl/status/statusor.h"
#include "backplane/core/scalar_type.h"

namespace backplane {

class DtypeSet {
 public:
  // Bit i stands for ScalarType i; these are the bits of the known dtypes.
  static constexpr uint64_t kKnownBits = (uint64_t{1} << kNumScalarTypes) - 1;

  // Every dtype (what a registration that declares nothing serves).
  constexpr DtypeSet() = default;
  constexpr DtypeSet(std::initializer_list<ScalarType> types) {
    for (ScalarType t : types) mask_ |= bit(t);
    if (mask_ == kKnownBits) mask_ = 0;
  }
  static constexpr DtypeSet all() { return DtypeSet(); }
  // From the ABI's encoding (bit i = ScalarType i, 0 = every dtype); fails
  // on bits for dtypes this host does not know, naming them.
  static absl::StatusOr<DtypeSet> fromMask(uint64_t mask);

  constexpr bool isAll() const { return mask_ == 0; }
  constexpr bool contains(ScalarType t) const { return mask_ == 0 || (mask_ & bit(t)) != 0; }
  // The ABI's encoding: bit i = ScalarType i, 0 = every dtype. A set naming
  // every known dtype is stored as 0, so isAll() holds for it too.
  constexpr uint64_t mask() const { return mask_; }
  // "float16, float32" (in ScalarType order), or "all dtypes".
  std::string str() const;

  friend constexpr bool operator==(DtypeSet a, DtypeSet b) { return a.mask_ == b.mask_; }

 private:
  static constexpr uint64_t bit(ScalarType t) { return uint64_t{1} << static_cast<int>(t); }
  uint64_t mask_ = 0;
};

}  // namespace backplane
