// For tests that run a reference program (tests/reference/*.py with the
// project's interpreter) and read what it prints.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace burst::test_util {

// The standard output of `cmd` (run by the shell); a failed start or a
// non-zero exit fails the calling test, naming the command and its output.
inline std::string CommandOutput(const std::string& cmd) {
  std::string out;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  EXPECT_NE(pipe, nullptr) << cmd;
  if (pipe == nullptr) return out;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  EXPECT_EQ(::pclose(pipe), 0) << cmd << "\n" << out.substr(0, 2000);
  return out;
}

}  // namespace burst::test_util
