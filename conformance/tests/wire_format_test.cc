// The conformance worker's wire format (wire_format.h): what a parent
// accepts from a worker's line, field by field.
#include "backplane/conformance/wire_format.h"

#include <cmath>
#include <limits>
#include <string>

#include <gtest/gtest.h>

namespace backplane::conformance {
namespace {

Result failed() {
  Result r;
  r.op = "bp::add.out";
  r.form = "out";
  r.backend = "cpu";
  r.kernel = KernelKind::Native;
  r.outcome = Outcome::Fail;
  r.samples = 2;
  r.sample = "broadcast\t[2, 1]";
  r.message = "element 5 is 1\nexpected 2\\";
  r.max_abs_error = 1.0 / 3;
  r.max_rel_error = std::numeric_limits<double>::infinity();
  return r;
}

// Replaces field `i` (0: the tag) of an encoded line.
std::string withField(std::string line, size_t i, const std::string& value) {
  size_t start = 0;
  for (size_t k = 0; k < i; ++k) start = line.find('\t', start) + 1;
  const size_t end = line.find('\t', start);
  return line.replace(start, end - start, value);
}

TEST(WireFormat, ResultRoundTripsEveryField) {
  const Result r = failed();
  const std::optional<Result> back = decodeResult(encodeResult(r));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->sample, r.sample);
  EXPECT_EQ(back->message, r.message);
  EXPECT_EQ(back->max_abs_error, r.max_abs_error);
  EXPECT_EQ(back->max_rel_error, r.max_rel_error);
  Result nan = r;
  nan.max_abs_error = std::nan("");
  const std::optional<Result> nan_back = decodeResult(encodeResult(nan));
  ASSERT_TRUE(nan_back.has_value());
  EXPECT_TRUE(std::isnan(nan_back->max_abs_error));
}

// The error fields are numbers as a whole: the decoder used strtod, which
// stopped at a NUL byte, skipped blanks and read an empty field as 0.
TEST(WireFormat, ErrorFieldsAreWholeNumbers) {
  const std::string line = encodeResult(failed());
  ASSERT_TRUE(decodeResult(withField(line, 9, "0.5")).has_value());
  ASSERT_TRUE(decodeResult(withField(line, 10, "1e-07")).has_value());
  for (const std::string& bad :
       {std::string("1\0junk", 6), std::string(" 1"), std::string(""), std::string("1x"), std::string("0x1p3")}) {
    EXPECT_FALSE(decodeResult(withField(line, 9, bad)).has_value()) << "max_abs_error '" << bad << "'";
    EXPECT_FALSE(decodeResult(withField(line, 10, bad)).has_value()) << "max_rel_error '" << bad << "'";
  }
}

TEST(WireFormat, SampleStartRoundTrips) {
  const SampleStart s{12, 2, 3, "name\twith\ttabs\\"};
  const std::optional<SampleStart> back = decodeSampleStart(encodeSampleStart(s));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->item, 12u);
  EXPECT_EQ(back->form, 2u);
  EXPECT_EQ(back->number, 3);
  EXPECT_EQ(back->sample, s.sample);
  EXPECT_FALSE(decodeSampleStart("sample\t1\t0\t1\tname\\q").has_value()) << "an unknown escape";
}

}  // namespace
}  // namespace backplane::conformance
