// SigV4 against the worked examples in the S3 API reference ("Signature
// calculations for the Authorization header", examplebucket, 2013-05-24).
#include "store/sigv4.h"

#include <gtest/gtest.h>

#include "core/fs.h"

namespace burst {
namespace {

const AwsCredentials kCreds{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""};
const std::time_t kWhen = 1369353600;  // 2013-05-24T00:00:00Z
const std::string kEmpty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

std::string Signature(const HeaderList& headers) {
  for (const auto& [k, v] : headers) {
    if (k == "Authorization") return v.substr(v.rfind("Signature=") + 10);
  }
  return "";
}

std::string Header(const HeaderList& headers, const std::string& name) {
  for (const auto& [k, v] : headers)
    if (k == name) return v;
  return "";
}

TEST(SigV4, GetObjectWithRange) {
  SigV4Request r{
      "GET", "/test.txt", {}, {{"Host", "examplebucket.s3.amazonaws.com"}, {"Range", "bytes=0-9"}}, kEmpty};
  HeaderList h = SignV4(r, kCreds, "us-east-1", "s3", kWhen);
  EXPECT_EQ(Signature(h), "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  EXPECT_EQ(Header(h, "Authorization"),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  EXPECT_EQ(Header(h, "x-amz-date"), "20130524T000000Z");
}

TEST(SigV4, PutObjectWithEncodedPathAndExtraHeaders) {
  std::string body = "Welcome to Amazon S3.";
  SigV4Request r{"PUT",
                 "/test$file.text",
                 {},
                 {{"Host", "examplebucket.s3.amazonaws.com"},
                  {"Date", "Fri, 24 May 2013 00:00:00 GMT"},
                  {"x-amz-storage-class", "REDUCED_REDUNDANCY"}},
                 Sha256Hex(body)};
  EXPECT_EQ(Signature(SignV4(r, kCreds, "us-east-1", "s3", kWhen)),
            "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
}

TEST(SigV4, SubresourceWithoutValue) {
  SigV4Request r{"GET", "/", {{"lifecycle", ""}}, {{"Host", "examplebucket.s3.amazonaws.com"}}, kEmpty};
  EXPECT_EQ(Signature(SignV4(r, kCreds, "us-east-1", "s3", kWhen)),
            "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
}

TEST(SigV4, QueryIsSortedWhateverTheOrderGiven) {
  SigV4Request r{
      "GET", "/", {{"prefix", "J"}, {"max-keys", "2"}}, {{"Host", "examplebucket.s3.amazonaws.com"}}, kEmpty};
  EXPECT_EQ(Signature(SignV4(r, kCreds, "us-east-1", "s3", kWhen)),
            "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

TEST(SigV4, SessionTokenIsSentAndSigned) {
  AwsCredentials temp = kCreds;
  temp.session_token = "FQoGZXIvYXdzEXAMPLE";
  SigV4Request r{"GET", "/", {}, {{"Host", "b.s3.amazonaws.com"}}, kEmpty};
  HeaderList h = SignV4(r, temp, "us-east-1", "s3", kWhen);
  EXPECT_EQ(Header(h, "x-amz-security-token"), "FQoGZXIvYXdzEXAMPLE");
  EXPECT_NE(Header(h, "Authorization").find("x-amz-security-token"), std::string::npos);
}

TEST(SigV4, UriEncoding) {
  EXPECT_EQ(UriEncode("a b/c~d=e", true), "a%20b/c~d%3De");
  EXPECT_EQ(UriEncode("a b/c", false), "a%20b%2Fc");
  EXPECT_EQ(CanonicalQuery({{"uploads", ""}, {"a", "x y"}}), "a=x%20y&uploads=");
}

}  // namespace
}  // namespace burst
