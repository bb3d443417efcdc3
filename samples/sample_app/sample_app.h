#pragma once
// What the sample apps (samples/encoder, samples/sparse_lidar) share: their
// command-line parsing, the lines they print about a run (the device, what
// fell back), and the comparison of a result against its expected values.
// Shared so that every app takes flags and reports the same way.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "backplane/runtime/profiler.h"
#include "backplane/runtime/runtime.h"

namespace sample {

// A flag whose value must be a finite number > 0 ("--lr 3e-4").
struct PositiveNumber {
  double* target;
};
// Where a flag's value goes: a string, an integer parsed from all of the
// value, or a positive number.
using FlagTarget = std::variant<std::string*, int64_t*, uint64_t*, PositiveNumber>;

// Parses argv[1..] as "--name value" or "--name=value" into `flags` (by
// name, "--device"). Returns false and sets `error` ("unknown argument
// '--x'", "--batch needs an integer, got 'a'", "--lr needs a positive
// number, got '-1'", "--seed needs a value") on
// the first argument that does not parse; targets of flags not given keep
// their values.
bool parseFlags(int argc, char** argv, const std::map<std::string_view, FlagTarget>& flags, std::string& error);

// "cuda:0 (NVIDIA H100), from --device auto; devices present: cuda:0, cpu":
// the device, its name, where the choice came from (`device_flag` as given,
// or BACKPLANE_DEVICE when it replaced "auto": Note [Choosing a device]) and
// which devices there are.
std::string deviceLine(const backplane::Runtime& rt, std::string_view device_flag, backplane::Device dev);

// The ops that fell back to the CPU, with their calls and the bytes copied,
// or "nothing fell back".
std::string fallbackLine(const backplane::OpReport& report);

// Where two results differ most.
struct Difference {
  double max_abs = 0;  // +infinity if either side has a NaN or an infinity
  int64_t index = -1;  // row-major element index of the maximum; -1 when equal
};
// Compares element by element; a and b must have the same size (throws
// backplane::Error otherwise).
Difference compareResults(const std::vector<double>& actual, const std::vector<double>& expected);

}  // namespace sample
