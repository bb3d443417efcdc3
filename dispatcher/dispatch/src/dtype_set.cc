#include "backplane/dispatch/dtype_set.h"

#include "backplane/core/str_cat.h"

namespace backplane {

absl::StatusOr<DtypeSet> DtypeSet::fromMask(uint64_t mask) {
  if (mask & ~kKnownBits) {
    std::string unknown;
    for (int i = kNumScalarTypes; i < 64; ++i)
      if ((mask >> i) & 1) unknown += strCat(unknown.empty() ? "" : ", ", i);
    return absl::InvalidArgumentError(strCat("the declared dtypes (mask ", mask, ") name dtype number(s) ", unknown,
                                             ", which this host does not know (it knows 0..", kNumScalarTypes - 1,
                                             "); declare only BP_ScalarType values, or 0 for every dtype"));
  }
  DtypeSet s;
  s.mask_ = mask == kKnownBits ? 0 : mask;
  return s;
}

std::string DtypeSet::str() const {
  if (isAll()) return "all dtypes";
  std::string out;
  for (int i = 0; i < kNumScalarTypes; ++i) {
    if ((mask_ >> i) & 1) out += strCat(out.empty() ? "" : ", ", scalarTypeName(static_cast<ScalarType>(i)));
  }
  return out;
}

}  // namespace backplane
