// The ObjectStore suite every backend passes (object_store_suite.cpp): a
// test binary instantiates it for its backends, named by GetParam():
// "mem", "file", or "s3" (the bucket URL in BURST_TEST_S3_URL, credentials
// in AWS_*; each test gets a fresh prefix under it).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/fs.h"
#include "core/ids.h"
#include "store/object_store.h"

namespace burst {

class ObjectStoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("burst-store-test");
    store_ = Open();
  }
  void TearDown() override {
    store_.reset();
    fs::remove_all(dir_);
  }
  // A fresh prefix in the test bucket: s3://BUCKET/t-ID?endpoint=...
  static std::string S3Url() {
    const char* base = std::getenv("BURST_TEST_S3_URL");
    std::string url = base == nullptr ? "" : base;
    size_t q = url.find('?');
    std::string prefix = "/" + NewId("t");
    return q == std::string::npos ? url + prefix : url.substr(0, q) + prefix + url.substr(q);
  }
  std::unique_ptr<ObjectStore> Open() {
    std::string url = GetParam() == "file" ? "file://" + (dir_ / "store").string() : "mem://";
    if (GetParam() == "s3") url = S3Url();
    auto r = OpenObjectStore(url);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return std::move(r).value();
  }
  std::string MustGet(const std::string& key) {
    auto r = store_->Get(key);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r.value() : "";
  }
  std::vector<std::string> Keys(const std::string& prefix) {
    auto r = store_->List(prefix);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    std::vector<std::string> keys;
    if (r.ok())
      for (const auto& o : r.value()) keys.push_back(o.key);
    return keys;
  }

  fs::path dir_;
  std::unique_ptr<ObjectStore> store_;
};

}  // namespace burst
