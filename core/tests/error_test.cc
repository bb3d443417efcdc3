// BP_CHECK blames the caller (kInvalidArgument); BP_INTERNAL_ASSERT reports a
// broken invariant as a Backplane bug (kInternal) with where it broke.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "backplane/core/error.h"

namespace backplane {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

template <typename F>
std::optional<Error> thrownError(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  return std::nullopt;
}

TEST(ErrorTest, CheckBlamesTheCaller) {
  const int rank = 3;
  std::optional<Error> e = thrownError([&] { BP_CHECK(rank < 2, "t() expects <= 2 dims, got ", rank); });
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(e->message(), "t() expects <= 2 dims, got 3");
  EXPECT_THAT(e->message(), Not(HasSubstr("Backplane bug")));
}

TEST(ErrorTest, InternalAssertReportsABackplaneBugWithItsPlace) {
  const int slots = 7;
  const int line = __LINE__ + 1;
  std::optional<Error> e = thrownError([&] { BP_INTERNAL_ASSERT(slots % 2 == 0, "table has ", slots, " slots"); });
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code(), absl::StatusCode::kInternal);
  EXPECT_THAT(e->message(), HasSubstr("table has 7 slots"));
  EXPECT_THAT(e->message(), HasSubstr("`slots % 2 == 0`"));
  EXPECT_THAT(e->message(), HasSubstr("error_test.cc:" + std::to_string(line)));
  EXPECT_THAT(e->message(), HasSubstr("Backplane bug"));
  EXPECT_THAT(e->message(), HasSubstr("please report it"));
  EXPECT_EQ(e->status().code(), absl::StatusCode::kInternal);
}

TEST(ErrorTest, InternalAssertWithoutAMessageStillNamesTheCondition) {
  bool ready = false;
  std::optional<Error> e = thrownError([&] { BP_INTERNAL_ASSERT(ready); });
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code(), absl::StatusCode::kInternal);
  EXPECT_THAT(e->message(), HasSubstr("`ready`"));
}

TEST(ErrorTest, PassingChecksDoNotEvaluateTheirMessage) {
  int evaluated = 0;
  auto part = [&] {
    ++evaluated;
    return "x";
  };
  EXPECT_NO_THROW(BP_CHECK(true, part()));
  EXPECT_NO_THROW(BP_INTERNAL_ASSERT(1 + 1 == 2, part()));
  EXPECT_EQ(evaluated, 0);
  EXPECT_THROW(BP_INTERNAL_ASSERT(false, part()), Error);
  EXPECT_EQ(evaluated, 1);
}

}  // namespace
}  // namespace backplane
