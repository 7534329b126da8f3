// The shared ObjectStore suite on s3://, against a real radosgw started here
// (tests/s3/s3-up.sh), and what only the S3 store does: multipart uploads,
// clear errors for wrong credentials, a missing bucket or a dead endpoint.
#include <gtest/gtest.h>

#include "store/object_store_suite.h"
#include "store/s3_store.h"
#include "store/s3_test_env.h"

namespace burst {
namespace {

namespace fs = std::filesystem;

const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new S3TestEnvironment);

INSTANTIATE_TEST_SUITE_P(Backends, ObjectStoreTest, ::testing::Values("s3"),
                         [](const auto& info) { return info.param; });

std::string Endpoint() { return std::getenv("BURST_TEST_S3_ENDPOINT"); }

S3Config Config(const std::string& prefix) {
  auto c = ParseS3Url("s3://burst-test/" + prefix + "?endpoint=" + Endpoint());
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  S3Config config = c.value();
  config.creds = AwsCredentials{std::getenv("AWS_ACCESS_KEY_ID"), std::getenv("AWS_SECRET_ACCESS_KEY"), ""};
  return config;
}

std::unique_ptr<ObjectStore> Must(Result<std::unique_ptr<ObjectStore>> r) {
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

// The ETag S3 gives an object: "<md5>-N" when it went up in N parts.
std::string ETag(const S3Config& c, const std::string& key) {
  S3Http http(c);
  S3Request req;
  req.method = "HEAD";
  req.object = c.prefix + key;
  auto r = http.Send(req, key);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r.value().etag : "";
}

TEST(S3Store, LargeObjectsGoUpInParallelPartsAndComeBackWhole) {
  S3Config c = Config(NewId("big"));
  c.part_bytes = 5 << 20;
  c.parallel_parts = 3;
  auto store = Must(NewS3Store(c));
  ASSERT_NE(store, nullptr);
  fs::path dir = MakeTempDir("burst-s3-big");
  std::string data(23 << 20, '\0');
  uint32_t x = 12345;
  for (char& ch : data) {
    x = x * 1664525u + 1013904223u;
    ch = static_cast<char>(x >> 24);
  }
  WriteFileAtomic(dir / "in.bin", data);
  ASSERT_TRUE(store->PutFile("ckpt/model.safetensors", dir / "in.bin").ok());
  EXPECT_EQ(ETag(c, "ckpt/model.safetensors").find("-5\""), 32u + 1u) << "5 parts of 5 MiB";
  ASSERT_TRUE(store->GetToFile("ckpt/model.safetensors", dir / "out.bin").ok());
  EXPECT_EQ(Sha256File(dir / "out.bin"), Sha256Hex(data));
  EXPECT_EQ(store->Stat("ckpt/model.safetensors").value().size, static_cast<int64_t>(data.size()));

  ASSERT_TRUE(store->Put("ckpt/from-memory", std::string_view(data).substr(0, 11 << 20)).ok());
  EXPECT_NE(ETag(c, "ckpt/from-memory").find("-3\""), std::string::npos);
  auto got = store->Get("ckpt/from-memory");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(got.value() == std::string_view(data).substr(0, 11 << 20));
  // No unfinished uploads are left behind.
  S3Http http(c);
  S3Request list;
  list.query = {{"uploads", ""}};
  auto uploads = http.Send(list, "uploads");
  ASSERT_TRUE(uploads.ok()) << uploads.status().ToString();
  for (std::string_view u : XmlElements(uploads.value().body, "Upload")) {
    EXPECT_NE(XmlText(u, "Key").rfind(c.prefix, 0), 0u) << "an unfinished upload: " << u;
  }
  fs::remove_all(dir);
}

TEST(S3Store, AWrongSecretFailsAtOpenNamingBucketAndEndpoint) {
  S3Config c = Config("x");
  c.creds = AwsCredentials{"BURSTTESTKEY", "not-the-secret", ""};
  auto r = NewS3Store(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnauthenticated) << r.status().ToString();
  EXPECT_NE(r.status().message().find("s3://burst-test at " + Endpoint()), std::string::npos)
      << r.status().message();
  EXPECT_EQ(r.status().param(), "store");
  EXPECT_EQ(r.status().message().find("not-the-secret"), std::string::npos) << "the secret is never shown";

  c.creds = AwsCredentials{"NOSUCHKEY", "whatever", ""};
  EXPECT_EQ(NewS3Store(c).status().code(), Code::kUnauthenticated);
}

TEST(S3Store, AMissingBucketIsNamed) {
  auto c = ParseS3Url("s3://no-such-bucket?endpoint=" + Endpoint());
  ASSERT_TRUE(c.ok());
  auto r = NewS3Store(c.value());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound) << r.status().ToString();
  EXPECT_NE(r.status().message().find("s3://no-such-bucket"), std::string::npos) << r.status().message();
}

TEST(S3Store, ADeadEndpointIsUnavailableAfterRetries) {
  auto c = ParseS3Url("s3://burst-test?endpoint=http://127.0.0.1:1");
  ASSERT_TRUE(c.ok());
  S3Config cfg = c.value();
  cfg.max_attempts = 2;
  auto r = NewS3Store(cfg);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_NE(r.status().message().find("http://127.0.0.1:1"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("2 times"), std::string::npos) << r.status().message();
}

TEST(S3Store, MissingCredentialsAreNamed) {
  S3Config c = Config("x");
  c.creds = AwsCredentials{};  // so NewS3Store looks in the environment
  std::string id = std::getenv("AWS_ACCESS_KEY_ID");
  ::unsetenv("AWS_ACCESS_KEY_ID");
  auto r = NewS3Store(c);
  ::setenv("AWS_ACCESS_KEY_ID", id.c_str(), 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnauthenticated);
  EXPECT_NE(r.status().message().find("AWS_ACCESS_KEY_ID"), std::string::npos);
}

TEST(S3Url, ParsesAndRefusesClearly) {
  auto c = ParseS3Url("s3://my-bucket/some/prefix/?endpoint=http://h:9000/&region=eu-west-1");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c.value().bucket, "my-bucket");
  EXPECT_EQ(c.value().prefix, "some/prefix/");
  EXPECT_EQ(c.value().endpoint, "http://h:9000");
  EXPECT_EQ(c.value().region, "eu-west-1");
  EXPECT_EQ(S3StoreUrl(c.value()), "s3://my-bucket/some/prefix?endpoint=http://h:9000&region=eu-west-1");
  EXPECT_EQ(ParseS3Url("s3://My_Bucket").status().param(), "store");
  EXPECT_EQ(ParseS3Url("s3://ok-bucket?secret=x").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseS3Url("s3://ok-bucket/a/../b").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseS3Url("s3://ok-bucket?endpoint=ftp://x").status().param(), "s3_endpoint");
}

}  // namespace
}  // namespace burst
