// End-to-end tests of `burst serve`: the real binary as a process, spoken to
// over real HTTP with a real client, as a user's script or the OpenAI client
// would.
#include <gtest/gtest.h>
#include <httplib.h>

#include <regex>

#include "e2e_util.h"

namespace burst::e2e {
namespace {

class ServeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = MakeTempDir("burst-e2e-serve");
    Start();
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(data_);
  }

  // Starts `burst serve` on a free port and waits until it listens.
  void Start() {
    server_ = std::make_unique<Process>(std::vector<std::string>{
        BurstBinary(), "serve", "--data", data_.string(), "--listen", "127.0.0.1:0", "--max-body-mb", "1"});
    std::regex listening("listening on http://127\\.0\\.0\\.1:([0-9]+)");
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    std::smatch m;
    std::string out;
    while (std::chrono::steady_clock::now() < deadline) {
      out = server_->StdoutSoFar();
      if (std::regex_search(out, m, listening)) break;
      ASSERT_TRUE(server_->Running()) << server_->Wait(1).Describe();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_TRUE(std::regex_search(out, m, listening)) << "burst serve did not start:\n" << out;
    port_ = std::stoi(m[1]);
    client_ = std::make_unique<httplib::Client>("127.0.0.1", port_);
    key_ = Slurp(data_ / "admin.key");
    while (!key_.empty() && key_.back() == '\n') key_.pop_back();
  }

  httplib::Headers Auth(const std::string& key) { return {{"Authorization", "Bearer " + key}}; }

  httplib::Result Upload(const std::string& name, const std::string& content,
                         const std::string& purpose = "fine-tune") {
    httplib::MultipartFormDataItems items = {{"purpose", purpose, "", ""},
                                             {"file", content, name, "application/jsonl"}};
    return client_->Post("/v1/files", Auth(key_), items);
  }

  static Json Body(const httplib::Result& r) { return Json::parse(r->body); }

  // Every error answer has the contract's shape.
  static void ExpectError(const httplib::Result& r, int status, const std::string& code,
                          const std::string& message_part = "") {
    ASSERT_TRUE(r) << "no HTTP answer";
    EXPECT_EQ(r->status, status) << r->body;
    Json j = Json::parse(r->body);
    ASSERT_TRUE(j.contains("error")) << r->body;
    EXPECT_EQ(j["error"].value("code", ""), code) << r->body;
    EXPECT_TRUE(j["error"].contains("message") && j["error"].contains("param")) << r->body;
    if (!message_part.empty()) {
      EXPECT_TRUE(Contains(j["error"].value("message", ""), message_part)) << r->body;
    }
  }

  fs::path data_;
  std::unique_ptr<Process> server_;
  std::unique_ptr<httplib::Client> client_;
  int port_ = 0;
  std::string key_;
};

TEST_F(ServeTest, FirstStartWritesAnAdminKeyOnce) {
  EXPECT_EQ(key_.rfind("burst-", 0), 0u) << key_;
  EXPECT_EQ(fs::status(data_ / "admin.key").permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_TRUE(Contains(server_->StdoutSoFar(), key_));
  // A restart keeps the key and does not print it again.
  server_->Signal(SIGTERM);
  ProcResult first = server_->Wait(30);
  EXPECT_TRUE(first.ok()) << first.Describe();
  EXPECT_TRUE(Contains(first.out, "stopped"));
  Start();
  EXPECT_FALSE(Contains(server_->StdoutSoFar(), key_));
  auto r = client_->Get("/v1/files", Auth(key_));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

// The data folder holds every organisation's files and records: its user's
// only. A looser one (an earlier version's) is tightened at the next start.
TEST_F(ServeTest, TheDataFolderIsItsUsersOnlyAndALooserOneIsTightened) {
  auto r = Upload("valid.jsonl", Slurp(SupportValid()));
  ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
  auto mode = [](const fs::path& p) {
    return static_cast<unsigned>(fs::status(p).permissions() & fs::perms::all);
  };
  auto check = [&] {
    EXPECT_EQ(mode(data_), 0700u);
    EXPECT_EQ(mode(data_ / "admin.key"), 0600u);
    for (const char* f : {"meta.db", "meta.db-wal", "meta.db-shm"}) {
      if (fs::exists(data_ / f)) {
        EXPECT_EQ(mode(data_ / f), 0600u) << f;
      }
    }
    int objects = 0;
    EXPECT_EQ(mode(data_ / "store"), 0700u);
    for (const auto& e : fs::recursive_directory_iterator(data_ / "store")) {
      if (e.is_directory()) {
        EXPECT_EQ(mode(e.path()), 0700u) << e.path();
      }
      if (e.is_regular_file()) {
        EXPECT_EQ(mode(e.path()), 0600u) << e.path();
        ++objects;
      }
    }
    EXPECT_GE(objects, 1) << "the uploaded file is in the store";
  };
  check();
  server_->Signal(SIGTERM);
  ASSERT_TRUE(server_->Wait(30).ok());
  for (const fs::path& p : {data_, data_ / "store"}) fs::permissions(p, fs::perms(0755));
  for (const fs::path& p : {data_ / "meta.db", data_ / "admin.key"}) fs::permissions(p, fs::perms(0644));
  Start();
  check();
  const std::string err = server_->StderrSoFar();
  EXPECT_TRUE(Contains(err, data_.string() + " had mode 0755")) << err;
  EXPECT_TRUE(Contains(err, (data_ / "meta.db").string() + " had mode 0644")) << err;
}

TEST_F(ServeTest, FilesUploadListGetContentDelete) {
  const std::string content = Slurp(SupportValid());
  auto up = Upload("valid.jsonl", content);
  ASSERT_TRUE(up);
  ASSERT_EQ(up->status, 200) << up->body;
  Json f = Body(up);
  EXPECT_EQ(f["object"], "file");
  EXPECT_EQ(f["bytes"], static_cast<int64_t>(content.size()));
  EXPECT_EQ(f["filename"], "valid.jsonl");
  EXPECT_EQ(f["purpose"], "fine-tune");
  EXPECT_EQ(f["sha256"], Sha256Hex(content));
  EXPECT_EQ(f["examples"], static_cast<int64_t>(Lines(content).size()));
  const std::string id = f["id"];

  auto second = Upload("second.jsonl", "{\"text\":\"hello\"}\n");
  ASSERT_EQ(second->status, 200) << second->body;
  auto list = client_->Get("/v1/files?limit=1", Auth(key_));
  ASSERT_EQ(list->status, 200) << list->body;
  Json page = Body(list);
  ASSERT_EQ(page["data"].size(), 1u);
  EXPECT_EQ(page["data"][0]["filename"], "second.jsonl");  // newest first
  EXPECT_EQ(page["has_more"], true);
  auto rest =
      client_->Get("/v1/files?limit=10&after=" + page["data"][0]["id"].get<std::string>(), Auth(key_));
  ASSERT_EQ(Body(rest)["data"].size(), 1u);
  EXPECT_EQ(Body(rest)["data"][0]["id"], id);
  EXPECT_EQ(Body(rest)["has_more"], false);

  auto got = client_->Get("/v1/files/" + id, Auth(key_));
  ASSERT_EQ(got->status, 200);
  EXPECT_EQ(Body(got)["id"], id);
  auto bytes = client_->Get("/v1/files/" + id + "/content", Auth(key_));
  ASSERT_EQ(bytes->status, 200);
  EXPECT_EQ(bytes->body, content);

  // It survives a restart of the server.
  server_->Signal(SIGTERM);
  ASSERT_TRUE(server_->Wait(30).ok());
  Start();
  EXPECT_EQ(client_->Get("/v1/files/" + id + "/content", Auth(key_))->body, content);

  auto del = client_->Delete("/v1/files/" + id, Auth(key_));
  ASSERT_EQ(del->status, 200) << del->body;
  EXPECT_EQ(Body(del)["deleted"], true);
  ExpectError(client_->Get("/v1/files/" + id, Auth(key_)), 404, "not_found");
  ExpectError(client_->Delete("/v1/files/" + id, Auth(key_)), 404, "not_found");
}

TEST_F(ServeTest, BadUploadsAreRejectedWithTheLineAndStoreNothing) {
  ExpectError(
      Upload("bad.jsonl", "{\"text\":\"ok\"}\n{\"messages\":[{\"role\":\"bot\",\"content\":\"x\"}]}\n"), 400,
      "invalid_argument", "bad.jsonl:2");
  ExpectError(Upload("broken.jsonl", "{\"text\":\"ok\"}\n{not json\n"), 400, "invalid_argument",
              "broken.jsonl:2");
  ExpectError(Upload("x.jsonl", "{\"text\":\"ok\"}\n", "assistants"), 400, "invalid_argument", "purpose");
  ExpectError(Upload("big.jsonl", std::string(2 << 20, 'x')), 413, "resource_exhausted");
  auto list = client_->Get("/v1/files", Auth(key_));
  ASSERT_EQ(list->status, 200);
  EXPECT_TRUE(Body(list)["data"].empty()) << list->body;
  // Nothing reached the object store either.
  size_t objects = 0;
  for (auto it = fs::recursive_directory_iterator(data_ / "store" / "objects");
       it != fs::recursive_directory_iterator(); ++it)
    objects += it->is_regular_file();
  EXPECT_EQ(objects, 0u);
}

TEST_F(ServeTest, KeysAreCheckedAndErrorsHaveOneShape) {
  ExpectError(client_->Get("/v1/files"), 401, "unauthenticated");
  ExpectError(client_->Get("/v1/files", Auth("burst-not-a-key")), 401, "unauthenticated");
  ExpectError(client_->Get("/v1/files?limit=0", Auth(key_)), 400, "invalid_argument", "limit");
  ExpectError(client_->Get("/v1/no-such-route", Auth(key_)), 404, "not_found");
  ExpectError(client_->Get("/v1/files/file-doesnotexist", Auth(key_)), 404, "not_found");
  auto health = client_->Get("/v1/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

// Organisations an operator creates while the server runs (`burst orgs
// create` on its data folder, another process) work at once, one after
// another: the server never reads a stale database.
TEST_F(ServeTest, OrganisationsCreatedWhileServingWorkAtOnce) {
  for (int k = 1; k <= 3; ++k) {
    ProcResult made =
        RunBurst({"orgs", "create", "team" + std::to_string(k), "--data", data_.string(), "--json"}, 60);
    ASSERT_EQ(made.exit_code, 0) << made.Describe();
    const std::string key = Json::parse(made.out).value("api_key", "");
    auto r = client_->Get("/v1/files", Auth(key));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << "organisation " << k << ": " << r->body;
  }
}

TEST_F(ServeTest, FilesFromTheCommandLine) {
  const std::string url = "http://127.0.0.1:" + std::to_string(port_);
  auto burst = [&](std::vector<std::string> args) {
    args.insert(args.end(), {"--url", url, "--api-key", key_});
    return RunBurst(args, 60);
  };
  ProcResult up = burst({"files", "upload", SupportValid().string(), "--json"});
  ASSERT_TRUE(up.ok()) << up.Describe();
  Json f = Json::parse(up.out);
  const std::string id = f["id"];
  EXPECT_EQ(f["examples"], static_cast<int64_t>(Lines(Slurp(SupportValid())).size()));

  ProcResult list = burst({"files", "list"});
  ASSERT_TRUE(list.ok()) << list.Describe();
  EXPECT_TRUE(Contains(list.out, id)) << list.out;
  EXPECT_TRUE(Contains(list.out, "valid.jsonl")) << list.out;

  fs::path copy = data_ / "copy.jsonl";
  ProcResult content = burst({"files", "content", id, "-o", copy.string()});
  ASSERT_TRUE(content.ok()) << content.Describe();
  EXPECT_EQ(Slurp(copy), Slurp(SupportValid()));

  fs::path bad = data_ / "bad.jsonl";
  WriteText(bad, "{\"text\":\"ok\"}\n{\"prompt\":\"p\"}\n");
  ProcResult rejected = burst({"files", "upload", bad.string()});
  EXPECT_EQ(rejected.exit_code, 1) << rejected.Describe();
  EXPECT_TRUE(Contains(rejected.err, "bad.jsonl:2")) << rejected.Describe();
  EXPECT_TRUE(Contains(rejected.err, "completion")) << rejected.Describe();

  ProcResult del = burst({"files", "delete", id});
  ASSERT_TRUE(del.ok()) << del.Describe();
  ProcResult gone = burst({"files", "get", id});
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_TRUE(Contains(gone.err, "no file " + id)) << gone.Describe();

  // No key, or nobody listening: errors that say what to do.
  ProcResult nokey = RunBurst({"files", "list", "--url", url}, 60);
  EXPECT_EQ(nokey.exit_code, 1);
  EXPECT_TRUE(Contains(nokey.err, "BURST_API_KEY")) << nokey.Describe();
  ProcResult down = RunBurst({"files", "list", "--url", "http://127.0.0.1:1", "--api-key", key_}, 60);
  EXPECT_EQ(down.exit_code, 1);
  EXPECT_TRUE(Contains(down.err, "cannot reach http://127.0.0.1:1")) << down.Describe();
}

TEST_F(ServeTest, BadFlagsAndABusyPortFailClearly) {
  fs::path other = data_ / "other";
  ProcResult listen = RunBurst({"serve", "--data", other.string(), "--listen", "nohost"}, 60);
  EXPECT_EQ(listen.exit_code, 1);
  EXPECT_TRUE(Contains(listen.err, "HOST:PORT")) << listen.Describe();
  ProcResult threads =
      RunBurst({"serve", "--data", other.string(), "--listen", "127.0.0.1:0", "--http-threads", "0"}, 60);
  EXPECT_EQ(threads.exit_code, 1);
  EXPECT_TRUE(Contains(threads.err, "--http-threads")) << threads.Describe();
  ProcResult busy =
      RunBurst({"serve", "--data", other.string(), "--listen", "127.0.0.1:" + std::to_string(port_)}, 60);
  EXPECT_EQ(busy.exit_code, 1);
  EXPECT_TRUE(Contains(busy.err, "cannot listen on 127.0.0.1:" + std::to_string(port_))) << busy.Describe();
  // The running server is untouched.
  auto r = client_->Get("/v1/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

}  // namespace
}  // namespace burst::e2e
