#pragma once
// The conformance worker's wire format (Note [Conformance workers] in
// src/workers.cc): a Result, and the sample a worker is about to run, as one
// line of text each, and back. Its own file (src/wire_format.cc), which
// needs only libbackplane, so that the fuzz target fuzz_conformance_wire
// links it alone (Note [Fuzzing] in docs/design.md).

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "backplane/conformance/runner.h"

namespace backplane::conformance {

// A Result as one line of text (no newline) and back: fields separated by
// tabs, with backslash, tab, newline and carriage return escaped.
// decodeResult returns nothing for a line that is not an encoded Result;
// whatever it returns encodes to a line that decodes to the same Result.
std::string encodeResult(const Result& r);
std::optional<Result> decodeResult(std::string_view line);

// The sample a worker is about to run: item `item`'s form `form` (formsOf
// order), its sample number `number` (1-based, as Result::samples counts)
// named `sample`. As a line the same way as a Result, and back.
struct SampleStart {
  size_t item = 0;
  size_t form = 0;
  int number = 0;
  std::string sample;
};
std::string encodeSampleStart(const SampleStart& s);
std::optional<SampleStart> decodeSampleStart(std::string_view line);

}  // namespace backplane::conformance
