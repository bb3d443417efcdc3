#pragma once
// Checking the errors that Backplane's calls throw: every test that expects
// a backplane::Error uses these, so a message that changes is checked the
// same way everywhere.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "backplane/core/error.h"

namespace backplane::testing {

// The message of the backplane::Error that `fn` throws, or a marker saying
// that it threw none (which HasSubstr(...) on it then shows).
template <typename Fn>
std::string errorOf(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.message();
  }
  return "<no backplane::Error thrown>";
}

// Expects `fn` to throw a backplane::Error whose message contains every part.
template <typename Fn>
void expectError(Fn&& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    for (const auto& p : parts) EXPECT_THAT(e.message(), ::testing::HasSubstr(p));
  }
}

// The same, and the Error's code must be `code`.
template <typename Fn>
void expectError(Fn&& fn, absl::StatusCode code, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.message();
    for (const auto& p : parts) EXPECT_THAT(e.message(), ::testing::HasSubstr(p));
  }
}

}  // namespace backplane::testing
