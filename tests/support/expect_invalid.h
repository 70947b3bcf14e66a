// The check the validation tests share: a call fails with
// jit::Error(InvalidArgument) whose message names what to fix.
#pragma once
#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <initializer_list>
#include <string>

#include "jit/error.h"

namespace cujit_test {

// Runs fn, expects Error(InvalidArgument) whose message contains every needle.
inline void expect_invalid(const std::function<void()>& fn, std::initializer_list<std::string> needles) {
  try {
    fn();
    ADD_FAILURE() << "expected jit::Error(InvalidArgument), nothing was thrown";
  } catch (const jit::Error& e) {
    EXPECT_EQ(e.code(), jit::ErrorCode::InvalidArgument) << e.what();
    const std::string message = e.what();
    for (const std::string& needle : needles) {
      EXPECT_NE(message.find(needle), std::string::npos) << "message '" << message << "' lacks '" << needle << "'";
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected jit::Error, got another exception: " << e.what();
  }
}

}  // namespace cujit_test
