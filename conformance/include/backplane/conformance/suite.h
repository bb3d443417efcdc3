#pragma once
// A conformance run on one backend, as units that a worker process runs one
// at a time and reports over a pipe (the `backplane conformance` command).
//
// Note [Device API checks]
// Before its ops, a backend's device type is checked through the same
// DeviceInterface calls the core makes: allocations of 0 bytes, of odd
// sizes and of kLargeAllocationBytes are usable to their last byte and do
// not overlap, an impossible size is refused with kResourceExhausted;
// host <-> device and device -> device copies of whole blocks and of
// unaligned ranges at offsets, memset and zero-byte copies leave exactly
// the right bytes; synchronize on every device; streams where the type has
// them (setCurrentStream takes effect on its device alone, work queued on a
// created stream is finished by synchronizeStream) and events (recorded,
// synchronized, queryEvent reports completion without the host blocking, an
// event orders two streams); with several devices, copies between them.
// Each group is its own check (device.streams, device.events), listed only
// for a type whose capabilities() have it.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backplane/conformance/runner.h"
#include "backplane/conformance/spec.h"
#include "backplane/conformance/wire_format.h"
#include "backplane/core/device.h"

namespace backplane::conformance {

inline constexpr size_t kLargeAllocationBytes = size_t{256} << 20;
inline constexpr size_t kImpossibleAllocationBytes = size_t{1} << 60;

// The device checks that apply to `type` (several_devices only with two or
// more devices), by name ("device.allocate", ...).
std::vector<std::string> deviceCheckNames(DeviceType type);
// Runs one device check on every device of `type`.
Result runDeviceCheck(const std::string& name, DeviceType type);

// One unit of a run: a device check, an op spec (all of its forms) or an
// ONNX node test.
// Note [Uncertified operators]
// An op with a native kernel on the backend (a plugin's own operator, or a
// standard one the suite has no spec for) that no spec covers, as its
// functional, in-place or out= form, is an item of its own: it runs nothing
// and reports Outcome::Uncertified in every report (the summary lists them),
// so a run never passes over a kernel in silence. Not a failure, but under
// --strict, which certifies only what was checked. --ops and --native
// select them as they do specs.
struct Item {
  std::string name;              // "device.allocate", the spec's op, or "onnx::test_add_bcast"
  const OpSpec* spec = nullptr;  // null for a device check, a node test or an uncertified op
  std::string onnx_test = {};    // the node test's directory (Note [ONNX node tests])
  bool uncertified = false;      // an op with a native kernel and no spec
};

// The items of a run on `type`: its device checks (unless
// `device_checks` is false: a run on a second device of the type repeats
// none), then every spec, keeping those whose name or any of whose form's
// op names `ops_regex` matches (an ECMAScript regex searched anywhere in
// the name; empty keeps all). Throws Error(kInvalidArgument) for a bad regex.
//
// With `onnx_root` (--onnx DIR) the items are instead the ONNX node tests
// found under it (onnx::findNodeTests), named "onnx::<test>", those that
// `ops_regex` matches; Error(kInvalidArgument) if it is no directory.
// With `native_only` (--native), a spec is kept only if one of its forms has
// a native kernel on `type` (an impl registered for its backend key: the
// plugin's own kernels, with or without declared dtypes); its other forms
// run with it, so a functional form that is a composite over a native .out
// is certified too. The device checks are kept as without it.
std::vector<Item> selectItems(DeviceType type, const std::string& ops_regex, bool device_checks = true,
                              const std::string& onnx_root = "", bool native_only = false);

// ONNX node tests' results: form kOnnxForm; a test whose op_type has no
// entry in the mapping is unsupported with a message starting
// kNoMappingPrefix (kUnloadablePrefix below); a listed expected failure that passed has a note
// holding kUnexpectedPassNote.
inline constexpr const char* kOnnxForm = "onnx";
inline constexpr std::string_view kNoMappingPrefix = "no mapping for ONNX op_type";
// ... and a test Backplane cannot represent (unsupported) one starting:
inline constexpr std::string_view kUnloadablePrefix = "cannot load this test: ";
inline constexpr std::string_view kUnexpectedPassNote = "passed, but is listed as an expected failure";

// Runs one ONNX node test on `device`: every data set's inputs copied to
// the device, the node run through the mapping (onnx_ops.h), its outputs
// compared with the expected ones (Note [ONNX node tests]). One Result:
// op "onnx::<test>", form "onnx", note the node's op_type (and opset).
Result runOnnxTest(const std::string& dir, Device device);

// Runs an item: an op spec's forms from `first_form` on, on `device`
// (runSpec, telling `observer`); a device check on every device of
// device.type.
std::vector<Result> runItem(const Item& item, Device device, size_t first_form = 0, const SpecObserver& observer = {});

// The worker's wire format (encodeResult, decodeResult, SampleStart):
// wire_format.h, included above.

}  // namespace backplane::conformance
