// bp::detail::ScalarTypeOf<T>, the table behind bp::scalarTypeOf<T>()
// (element_types.hpp).
// Not part of the API: names in bp::detail may change in any release.
#ifndef BACKPLANE_PLUGIN_DETAIL_SCALAR_TYPE_OF_HPP_
#define BACKPLANE_PLUGIN_DETAIL_SCALAR_TYPE_OF_HPP_

#include <cstdint>

#include "backplane/plugin/scalar_type.hpp"

namespace bp {

// element_types.hpp; only named here.
struct Half;
struct BFloat16;

namespace detail {
template <class T>
struct ScalarTypeOf {
  static constexpr bool kKnown = false;
};
#define BP_DETAIL_SCALAR_TYPE_OF(CPP, ST)                \
  template <>                                            \
  struct ScalarTypeOf<CPP> {                             \
    static constexpr bool kKnown = true;                 \
    static constexpr ScalarType kValue = ScalarType::ST; \
  };
BP_DETAIL_SCALAR_TYPE_OF(bool, Bool)
BP_DETAIL_SCALAR_TYPE_OF(uint8_t, UInt8)
BP_DETAIL_SCALAR_TYPE_OF(int8_t, Int8)
BP_DETAIL_SCALAR_TYPE_OF(int32_t, Int32)
BP_DETAIL_SCALAR_TYPE_OF(int64_t, Int64)
BP_DETAIL_SCALAR_TYPE_OF(Half, Float16)
BP_DETAIL_SCALAR_TYPE_OF(BFloat16, BFloat16)
BP_DETAIL_SCALAR_TYPE_OF(float, Float32)
BP_DETAIL_SCALAR_TYPE_OF(double, Float64)
BP_DETAIL_SCALAR_TYPE_OF(int16_t, Int16)
BP_DETAIL_SCALAR_TYPE_OF(uint16_t, UInt16)
BP_DETAIL_SCALAR_TYPE_OF(uint32_t, UInt32)
BP_DETAIL_SCALAR_TYPE_OF(uint64_t, UInt64)
#undef BP_DETAIL_SCALAR_TYPE_OF
}  // namespace detail

}  // namespace bp

#endif  // BACKPLANE_PLUGIN_DETAIL_SCALAR_TYPE_OF_HPP_
