// The HTTP layer's parsers and router, on bytes a client could send.
#include <gtest/gtest.h>

#include "api/http/multipart.h"
#include "api/http/request_parser.h"
#include "api/http/router.h"

namespace burst::http {
namespace {

struct Parsed {
  HeadResult result;
  Request req;
  size_t consumed = 0;
  ParseError err;
};

Parsed Parse(std::string_view bytes, HeadLimits limits = {}) {
  Parsed p;
  p.result = ParseRequestHead(bytes, limits, &p.req, &p.consumed, &p.err);
  return p;
}

TEST(RequestHead, ParsesMethodPathQueryHeadersAndFraming) {
  const std::string head =
      "POST /v1/files/a%20b?limit=5&after=x%2By&flag HTTP/1.1\r\n"
      "Host: x\r\nContent-Length: 12\r\nAuthorization:  Bearer k  \r\n\r\nBODY";
  Parsed p = Parse(head);
  ASSERT_EQ(p.result, HeadResult::kDone) << p.err.message;
  EXPECT_EQ(p.consumed, head.size() - 4);
  EXPECT_EQ(p.req.method, "POST");
  EXPECT_EQ(p.req.path, "/v1/files/a b");
  EXPECT_EQ(p.req.param("limit"), "5");
  EXPECT_EQ(p.req.param("after"), "x+y");
  EXPECT_TRUE(p.req.has_param("flag"));
  EXPECT_EQ(p.req.header("authorization"), "Bearer k");
  EXPECT_EQ(p.req.content_length, 12);
  EXPECT_FALSE(p.req.chunked);
  EXPECT_TRUE(p.req.keep_alive);
}

TEST(RequestHead, WaitsForTheBlankLineAndLimitsTheHead) {
  EXPECT_EQ(Parse("GET / HTTP/1.1\r\nHost: x\r\n").result, HeadResult::kIncomplete);
  HeadLimits small;
  small.max_head_bytes = 64;
  Parsed p = Parse("GET / HTTP/1.1\r\nX-Long: " + std::string(100, 'a') + "\r\n\r\n", small);
  EXPECT_EQ(p.result, HeadResult::kError);
  EXPECT_EQ(p.err.status, 431);
}

TEST(RequestHead, RefusesAmbiguousFraming) {
  // Two different lengths: a proxy and Burst could split the stream differently.
  Parsed p = Parse("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n");
  EXPECT_EQ(p.result, HeadResult::kError);
  EXPECT_EQ(p.err.status, 400);
  EXPECT_NE(p.err.message.find("two different Content-Length"), std::string::npos);
  EXPECT_EQ(Parse("POST / HTTP/1.1\r\nContent-Length: 5, 6\r\n\r\n").err.status, 400);
  EXPECT_EQ(Parse("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n").result,
            HeadResult::kDone);
  EXPECT_EQ(Parse("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n").err.status, 400);
  EXPECT_EQ(Parse("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n").err.status, 400);
  EXPECT_EQ(Parse("POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n").err.status,
            400);
  EXPECT_EQ(Parse("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n").err.status, 501);
  EXPECT_EQ(Parse("GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n").err.status, 400);  // folded
  EXPECT_EQ(Parse("GET / HTTP/1.1\r\nX : a\r\n\r\n").err.status, 400);       // space before colon
  EXPECT_EQ(Parse("GET / HTTP/1.1\r\nX: a\x01\r\n\r\n").err.status, 400);    // control byte
  EXPECT_EQ(Parse("GET / HTTP/2.0\r\n\r\n").err.status, 505);
  EXPECT_EQ(Parse("GET http://x/ HTTP/1.1\r\n\r\n").err.status, 400);
  EXPECT_EQ(Parse("GET /a%zz HTTP/1.1\r\n\r\n").err.status, 400);
  EXPECT_EQ(Parse("GET /a%00 HTTP/1.1\r\n\r\n").err.status, 400);
  EXPECT_EQ(Parse("GET /a?x=%4 HTTP/1.1\r\n\r\n").err.status, 400);
  EXPECT_EQ(Parse("POST / HTTP/1.1\r\nExpect: something\r\n\r\n").err.status, 417);
}

TEST(RequestHead, ConnectionAndExpect) {
  Parsed p = Parse("POST / HTTP/1.0\r\n\r\n");
  ASSERT_EQ(p.result, HeadResult::kDone);
  EXPECT_FALSE(p.req.keep_alive);
  EXPECT_EQ(p.req.content_length, -1);
  p = Parse("POST / HTTP/1.1\r\nConnection: close\r\nExpect: 100-continue\r\n\r\n");
  EXPECT_FALSE(p.req.keep_alive);
  EXPECT_TRUE(p.req.expect_continue);
}

TEST(Chunked, DecodesAcrossFeedsAndHonoursTheLimit) {
  const std::string body =
      "4\r\nWiki\r\n5;ext=1\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nTrailer: x\r\n\r\nNEXT";
  for (size_t split = 0; split <= body.size(); ++split) {
    ChunkedDecoder d(1000);
    std::string out;
    size_t used = d.Feed(std::string_view(body).substr(0, split), &out);
    if (!d.done()) used += d.Feed(std::string_view(body).substr(used), &out);
    ASSERT_TRUE(d.done()) << split;
    EXPECT_EQ(out, "Wikipedia in\r\n\r\nchunks.");
    EXPECT_EQ(body.substr(used), "NEXT");
  }
  ChunkedDecoder over(8);
  std::string out;
  over.Feed("5\r\nhello\r\n5\r\nworld\r\n0\r\n\r\n", &out);
  EXPECT_TRUE(over.failed());
  EXPECT_EQ(over.error().status, 413);
  ChunkedDecoder bad(100);
  bad.Feed("zz\r\n", &out);
  EXPECT_EQ(bad.error().status, 400);
  ChunkedDecoder long_data(100);
  long_data.Feed("2\r\nabc\r\n", &out);
  EXPECT_TRUE(long_data.failed());
}

TEST(Multipart, SplitsPartsWithNamesFilenamesAndTypes) {
  const std::string body =
      "preamble\r\n--XyZ\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nfine-tune\r\n"
      "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a \\\"b\\\".jsonl\"\r\n"
      "Content-Type: application/jsonl\r\n\r\n{\"text\": \"x\"}\n\r\n--XyZ--\r\n";
  auto boundary = MultipartBoundary("multipart/form-data; boundary=XyZ");
  ASSERT_TRUE(boundary);
  auto parts = ParseMultipart(body, *boundary);
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  ASSERT_EQ(parts.value().size(), 2u);
  const Part* file = FindPart(parts.value(), "file");
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(*file->filename, "a \"b\".jsonl");
  EXPECT_EQ(file->content_type, "application/jsonl");
  EXPECT_EQ(file->content, "{\"text\": \"x\"}\n");
  EXPECT_EQ(FindPart(parts.value(), "purpose")->content, "fine-tune");
  EXPECT_FALSE(FindPart(parts.value(), "purpose")->filename);
}

TEST(Multipart, ReadsRfc5987FilenamesAndRefusesMalformedBodies) {
  const std::string body =
      "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x\"; "
      "filename*=UTF-8''caf%C3%A9.jsonl\r\n\r\n"
      "data\r\n--b--";
  auto parts = ParseMultipart(body, "b");
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  EXPECT_EQ(*parts.value()[0].filename, "caf\xc3\xa9.jsonl");
  EXPECT_FALSE(ParseMultipart("--b\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\nunclosed", "b").ok());
  EXPECT_FALSE(ParseMultipart("no boundary here", "b").ok());
  EXPECT_FALSE(ParseMultipart("--b\r\nContent-Type: x\r\n\r\ndata\r\n--b--", "b").ok());  // no name
  std::string many;
  for (int i = 0; i < 20; ++i) many += "--b\r\nContent-Disposition: form-data; name=\"p\"\r\n\r\nx\r\n";
  many += "--b--";
  EXPECT_FALSE(ParseMultipart(many, "b").ok());
  EXPECT_FALSE(MultipartBoundary("application/json"));
  EXPECT_FALSE(MultipartBoundary("multipart/form-data"));
  EXPECT_EQ(*MultipartBoundary("Multipart/Form-Data; boundary=\"q q\""), "q q");
}

TEST(Router, MatchesSegmentsAndSays405) {
  Router r;
  r.Add("GET", "/v1/files/{}", 0, nullptr, [](Request&, Response&) {});
  r.Add("DELETE", "/v1/files/{}", 0, nullptr, [](Request&, Response&) {});
  r.Add("GET", "/v1/files/{}/content", 0, nullptr, [](Request&, Response&) {});
  std::vector<std::string> caps;
  Router::Match m = r.Find("GET", "/v1/files/file-abc/content", &caps);
  ASSERT_NE(m.route, nullptr);
  EXPECT_EQ(m.route->pattern, "/v1/files/{}/content");
  ASSERT_EQ(caps.size(), 2u);
  EXPECT_EQ(caps[1], "file-abc");
  m = r.Find("POST", "/v1/files/x", &caps);
  EXPECT_EQ(m.route, nullptr);
  EXPECT_EQ(m.status, 405);
  EXPECT_EQ(m.allow, "GET, DELETE");
  EXPECT_EQ(r.Find("GET", "/v1/files/a/b", &caps).status, 404);
  EXPECT_EQ(r.Find("GET", "/v1/files/a b", &caps).status, 404);
  EXPECT_EQ(r.Find("GET", "/v1/files/a%3Ab", &caps).status, 404);  // the parser decodes escapes first
  caps.clear();
  ASSERT_NE(r.Find("GET", "/v1/files/ftjob-a:step-2", &caps).route, nullptr);
  EXPECT_EQ(caps.back(), "ftjob-a:step-2");
  EXPECT_EQ(r.Find("GET", "/v1/files/", &caps).status, 404);
}

}  // namespace
}  // namespace burst::http
