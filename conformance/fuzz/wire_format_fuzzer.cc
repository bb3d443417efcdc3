// Fuzz target fuzz_conformance_wire (Note [Fuzzing] in docs/design.md): the
// conformance worker's wire format (wire_format.h), which the parent of a
// `backplane conformance` run decodes from a worker that may be dying in
// the middle of a line.
//
// Properties checked (a violation aborts, which libFuzzer and the replay
// ctest report as a crash): whatever decodeResult / decodeSampleStart
// accept re-encodes to a line that decodes to an equal value, and that line
// is stable (encoding the second decode gives the same line). The input is
// one line as the parent's reader hands it over (split at '\n'; the
// fuzzer's input may hold several, each decoded on its own).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "backplane/conformance/wire_format.h"

namespace {

using backplane::conformance::Result;
using backplane::conformance::SampleStart;

[[noreturn]] void fail(std::string_view what, std::string_view line, std::string_view detail) {
  std::fprintf(stderr, "fuzz_conformance_wire: %.*s\n  line:   %.*s\n  detail: %.*s\n", static_cast<int>(what.size()),
               what.data(), static_cast<int>(line.size()), line.data(), static_cast<int>(detail.size()), detail.data());
  std::abort();
}

// Errors of NaN compare equal to NaN: "nan" decodes to a NaN each time.
bool sameDouble(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || (a == b && std::signbit(a) == std::signbit(b));
}

bool sameResult(const Result& a, const Result& b) {
  return a.op == b.op && a.form == b.form && a.backend == b.backend && a.kernel == b.kernel && a.outcome == b.outcome &&
         a.samples == b.samples && a.sample == b.sample && a.message == b.message &&
         sameDouble(a.max_abs_error, b.max_abs_error) && sameDouble(a.max_rel_error, b.max_rel_error) &&
         a.dtypes == b.dtypes && a.declined == b.declined && a.note == b.note;
}

bool sameSample(const SampleStart& a, const SampleStart& b) {
  return a.item == b.item && a.form == b.form && a.number == b.number && a.sample == b.sample;
}

void checkLine(std::string_view line) {
  if (std::optional<Result> r = backplane::conformance::decodeResult(line)) {
    const std::string encoded = backplane::conformance::encodeResult(*r);
    if (encoded.find('\n') != std::string::npos) fail("an encoded Result holds a newline", line, encoded);
    std::optional<Result> again = backplane::conformance::decodeResult(encoded);
    if (!again) fail("a decoded Result re-encodes to a line that does not decode", line, encoded);
    if (!sameResult(*r, *again)) fail("a Result changed across a round trip", line, encoded);
    const std::string reencoded = backplane::conformance::encodeResult(*again);
    if (reencoded != encoded) fail("a Result encodes differently after a round trip", encoded, reencoded);
  }
  if (std::optional<SampleStart> s = backplane::conformance::decodeSampleStart(line)) {
    const std::string encoded = backplane::conformance::encodeSampleStart(*s);
    if (encoded.find('\n') != std::string::npos) fail("an encoded SampleStart holds a newline", line, encoded);
    std::optional<SampleStart> again = backplane::conformance::decodeSampleStart(encoded);
    if (!again) fail("a decoded SampleStart re-encodes to a line that does not decode", line, encoded);
    if (!sameSample(*s, *again)) fail("a SampleStart changed across a round trip", line, encoded);
    const std::string reencoded = backplane::conformance::encodeSampleStart(*again);
    if (reencoded != encoded) fail("a SampleStart encodes differently after a round trip", encoded, reencoded);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  size_t start = 0;
  while (true) {
    const size_t nl = input.find('\n', start);
    checkLine(input.substr(start, nl == std::string_view::npos ? nl : nl - start));
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  return 0;
}
