// For tests: a GoogleTest environment that starts the real S3 service
// (s3_test_service.h) before a test binary's tests and stops it after;
// BURST_TEST_S3_PORT picks radosgw's port (7480 by default).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>

#include "store/s3_test_service.h"

namespace burst {

class S3TestEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    int port = 7480;
    if (const char* p = std::getenv("BURST_TEST_S3_PORT")) port = std::atoi(p);
    Status s = service_.Start(port);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  void TearDown() override { service_.Stop(); }

 private:
  S3TestService service_;
};

}  // namespace burst
