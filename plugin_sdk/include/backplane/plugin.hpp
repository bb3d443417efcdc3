// Backplane plugin SDK: a thin, header-only RAII C++ layer over the stable C
// ABI in plugin_api.h (as oneDNN's dnnl.hpp is over dnnl.h). Vendors write
// kernels and devices in C++; everything that crosses into the host goes
// through plugin_api.h, so a plugin built with any C++17 compiler and any
// standard library loads into any host of the same ABI major.
//
// Requirements: C++17 or later; includes only the headers under
// backplane/plugin/, plugin_api.h, float16_conversions.h and standard
// headers; nothing here depends on the host's C++ headers.
//
// The smallest complete plugin is samples/minimal_plugin/minimal_plugin.cc
// (also shown in README.md, "The minimal plugin"): a bp::HostMemoryBackend
// device, one native `.out` kernel written with bp::forEach and registered
// for float32 only (bp::Dtypes), and every other operator and dtype through
// the host's CPU fallback. samples/vendor_plugin (toyaccel) is the model for
// a device whose memory the host cannot read.
//
// This header is the map. The SDK lives in backplane/plugin/, one header per
// part; each compiles on its own, and this one includes the public ones in
// the order below. Include this one: the parts are how the SDK is laid out,
// not a promise that the split stays as it is.
//
// The public surface:
//   errors.hpp          bp::Error, fail, check, BP_PLUGIN_CHECK; Note [Exceptions at the ABI boundary]
//   host.hpp            bp::host() (the host's table), pluginHandle, throwIfError, logMessage, deviceTypeName
//   scalar_type.hpp     ScalarType, elementSize, name, and the dtype sets (kAllScalarTypes, ...)
//   element_types.hpp   Half, BFloat16, and scalarTypeOf<T>(): the C++ type of each ScalarType
//   value_types.hpp     Device, ArrayView (IntList, DoubleList), Scalar, DispatchKeys
//   tensor.hpp          Tensor: references, metadata, data_ptr, device_ptr, empty; Note [Host and device addresses]
//   kernel.hpp          Kernel, kernel(&f), kernel<&f>(), kernelSignature: typed kernels as BP_KernelFns
//   operator.hpp        Operator: find an operator, call or redispatch it, typed or boxed
//   elementwise.hpp     forEach, forEachElement, StridedSpan, hostSpan, spanAt; Note [Strided loops]
//   device_backend.hpp  DeviceBackend (memory, copies, streams, events) and HostMemoryBackend
//   library.hpp         Library (registerDevice, def, impl, implWhenDefined, fallback) and Dtypes
//   entry_points.hpp    BACKPLANE_PLUGIN and BACKPLANE_PLUGIN_SHUTDOWN
//
// The machinery in bp::detail, not API, reached through the headers above:
//   detail/concat.hpp              message parts streamed into one string
//   detail/host_table.hpp          the plugin's copy of the host table (Note [Per-plugin state]); exceptions into
//                                  host errors
//   detail/scalar_type_of.hpp      the C++ type -> ScalarType table behind scalarTypeOf
//   detail/call_packing.hpp        Operator::call's arguments packed into BP_Values
//   detail/value_traits.hpp        ArgTraits / ReturnTraits: each kernel parameter and return type
//   detail/kernel_adapter.hpp      KernelTraits and the BP_KernelFn that runs a typed kernel (Note [Borrowed
//                                  kernel arguments])
//   detail/strided_loop.hpp        the loop behind forEach
//   detail/device_trampolines.hpp  the BP_DeviceTypeDesc functions that call a DeviceBackend
//   detail/plugin_init.hpp         the bodies of the entry points (Note [Plugin init checks])
#ifndef BACKPLANE_PLUGIN_HPP_
#define BACKPLANE_PLUGIN_HPP_

// In the table's order, not sorted.
// clang-format off
#include "backplane/plugin/errors.hpp"
#include "backplane/plugin/host.hpp"
#include "backplane/plugin/scalar_type.hpp"
#include "backplane/plugin/element_types.hpp"
#include "backplane/plugin/value_types.hpp"
#include "backplane/plugin/tensor.hpp"
#include "backplane/plugin/kernel.hpp"
#include "backplane/plugin/operator.hpp"
#include "backplane/plugin/elementwise.hpp"
#include "backplane/plugin/device_backend.hpp"
#include "backplane/plugin/library.hpp"
#include "backplane/plugin/entry_points.hpp"
// clang-format on

#endif  // BACKPLANE_PLUGIN_HPP_
