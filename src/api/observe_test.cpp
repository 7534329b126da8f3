// Access-log lines (api/observe.h): text lines whose fields a forged path
// cannot shift or split, JSON lines with every field, and the workers' own
// polls left out unless they fail.
#include "api/observe.h"

#include <gtest/gtest.h>

#include "db/metadata.h"

namespace burst {
namespace {

http::RequestRecord Record() {
  http::RequestRecord r;
  r.method = "GET";
  r.route = "/v1/files/{}";
  r.path = "/v1/files/file-1";
  r.request_id = "req-abc-7";
  r.remote_address = "10.0.0.2";
  r.status = 404;
  r.seconds = 0.0123;
  return r;
}

TEST(AccessLog, TextLinesKeepTheirFields) {
  http::RequestRecord r = Record();
  std::any key = ApiKey{"key-1", "org-9", "k", "p", 0, false};
  r.principal = &key;
  const std::string line = AccessLogLine(r, LogFormat::kText);
  EXPECT_NE(line.find(" GET /v1/files/file-1 404 12.3ms org=org-9 id=req-abc-7 remote=10.0.0.2"),
            std::string::npos)
      << line;
  r.path = "/v1/x\nburst serve: access forged 200";
  r.principal = nullptr;
  const std::string forged = AccessLogLine(r, LogFormat::kText);
  EXPECT_EQ(forged.find('\n'), std::string::npos) << forged;
  EXPECT_NE(forged.find("/v1/x?burst?serve:?access?forged?200 404"), std::string::npos) << forged;
  EXPECT_NE(forged.find("org=-"), std::string::npos) << "no key: no organisation";
}

TEST(AccessLog, JsonLinesHaveEveryField) {
  http::RequestRecord r = Record();
  const Json j = Json::parse(AccessLogLine(r, LogFormat::kJson));
  EXPECT_EQ(j["event"], "access");
  EXPECT_EQ(j["route"], "/v1/files/{}");
  EXPECT_EQ(j["path"], "/v1/files/file-1");
  EXPECT_EQ(j["status"], 404);
  EXPECT_NEAR(j["duration_ms"].get<double>(), 12.3, 1e-9);
  EXPECT_TRUE(j["org"].is_null());
  EXPECT_EQ(j["request_id"], "req-abc-7");
  EXPECT_EQ(j["remote"], "10.0.0.2");
  EXPECT_EQ(j["time"].get<std::string>().size(), 20u) << j["time"];
}

TEST(AccessLog, TheWorkersPollsAreLoggedOnlyWhenTheyFail) {
  http::RequestRecord r = Record();
  r.route = "/internal/v1/lease";
  r.status = 204;
  EXPECT_EQ(AccessLogLine(r, LogFormat::kText), "");
  r.status = 401;
  EXPECT_NE(AccessLogLine(r, LogFormat::kJson), "");
}

}  // namespace
}  // namespace burst
