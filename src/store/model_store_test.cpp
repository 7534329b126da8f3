#include "store/model_store.h"

#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "core/fs.h"
#include "core/json.h"

namespace burst {
namespace {

namespace fs = std::filesystem;

void Write(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << text;
}

class ModelStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("burst-model-store-test");
    model_ = dir_ / "base";
    fs::create_directories(model_);
    Write(model_ / "config.json", R"({"model_type": "llama"})");
    Write(model_ / "model.safetensors", std::string(3000, '\x07'));
    Write(model_ / "tokenizer.model", "tok");
    Write(model_ / ".hidden", "not shipped");
    store_ = NewMemStore();
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_, model_;
  std::unique_ptr<ObjectStore> store_;
};

TEST_F(ModelStoreTest, PublishThenFetchGivesTheSameFilesAndUploadsOnce) {
  ModelPublisher pub(*store_);
  auto prefix = pub.Publish(model_);
  ASSERT_TRUE(prefix.ok()) << prefix.status().ToString();
  EXPECT_EQ(prefix.value().rfind("models/", 0), 0u);
  EXPECT_EQ(pub.uploads(), 1);
  // The manifest is there, with the three files (the dot file is not).
  auto manifest = store_->Get(prefix.value() + "manifest.json");
  ASSERT_TRUE(manifest.ok());
  EXPECT_EQ(ParseJson(manifest.value(), "m")["files"].size(), 3u);
  EXPECT_EQ(store_->Stat(prefix.value() + "files/.hidden").status().code(), Code::kNotFound);

  // Again, and from another publisher (a restarted control plane): no upload.
  EXPECT_EQ(pub.Publish(model_).value(), prefix.value());
  ModelPublisher other(*store_);
  EXPECT_EQ(other.Publish(model_).value(), prefix.value());
  EXPECT_EQ(pub.uploads() + other.uploads(), 1);

  // The folder removed: a worker still gets it, byte for byte.
  const std::string config = ReadFile(model_ / "config.json");
  const std::string weights_sha = Sha256File(model_ / "model.safetensors");
  fs::remove_all(model_);
  bool fetched = false;
  auto local = FetchModel(*store_, prefix.value(), dir_ / "cache", &fetched);
  ASSERT_TRUE(local.ok()) << local.status().ToString();
  EXPECT_TRUE(fetched);
  EXPECT_EQ(ReadFile(local.value() / "config.json"), config);
  EXPECT_EQ(Sha256File(local.value() / "model.safetensors"), weights_sha);
  EXPECT_EQ(ReadFile(local.value() / "tokenizer.model"), "tok");
  // A second fetch uses the cached copy.
  auto again = FetchModel(*store_, prefix.value(), dir_ / "cache", &fetched);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(fetched);
  EXPECT_EQ(again.value(), local.value());
}

TEST_F(ModelStoreTest, AChangedFolderIsANewModel) {
  ModelPublisher pub(*store_);
  const std::string first = pub.Publish(model_).value();
  Write(model_ / "model.safetensors", std::string(3001, '\x07'));
  const std::string second = pub.Publish(model_).value();
  EXPECT_NE(first, second);
  EXPECT_EQ(pub.uploads(), 2);
  auto a = FetchModel(*store_, first, dir_ / "cache");
  auto b = FetchModel(*store_, second, dir_ / "cache");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(fs::file_size(a.value() / "model.safetensors"), 3000u);
  EXPECT_EQ(fs::file_size(b.value() / "model.safetensors"), 3001u);
}

TEST_F(ModelStoreTest, ACorruptObjectFailsTheFetchAndLeavesNoFolder) {
  ModelPublisher pub(*store_);
  const std::string prefix = pub.Publish(model_).value();
  ASSERT_TRUE(store_->Put(prefix + "files/model.safetensors", std::string(3000, '\x08')).ok());
  auto r = FetchModel(*store_, prefix, dir_ / "cache");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kDataLoss);
  EXPECT_NE(r.status().message().find("model.safetensors"), std::string::npos) << r.status().ToString();
  EXPECT_TRUE(fs::is_empty(dir_ / "cache")) << "no complete-looking folder, no temp folder";
}

TEST_F(ModelStoreTest, AnUnpublishedOrMalformedPrefixIsAClearError) {
  const std::string missing = ModelPrefix(std::string(64, 'a'));
  auto r = FetchModel(*store_, missing, dir_ / "cache");
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_NE(r.status().message().find(missing), std::string::npos);
  for (const char* bad : {"models/../x/", "orgs/o/files/f", "models/abc/", ""}) {
    EXPECT_EQ(FetchModel(*store_, bad, dir_ / "cache").status().code(), Code::kInvalidArgument) << bad;
  }
}

TEST_F(ModelStoreTest, ManifestsAreCheckedBeforeAnyDownload) {
  const std::string digest = ScanModelFolder(model_).value().digest;
  const std::string good = ScanModelFolder(model_).value().Text();
  EXPECT_TRUE(ParseModelManifest(good, digest, "m").ok());
  EXPECT_EQ(ParseModelManifest(good, std::string(64, 'b'), "m").status().code(), Code::kDataLoss);
  Json j = ParseJson(good, "m");
  for (const auto& [field, value] : std::vector<std::pair<std::string, Json>>{
           {"name", "../../etc/passwd"}, {"name", ".x"}, {"size", -1}, {"sha256", "xyz"}}) {
    Json bad = j;
    bad["files"][0][field] = value;
    auto r = ParseModelManifest(bad.dump(), digest, "store manifest.json");
    EXPECT_FALSE(r.ok()) << field << "=" << value.dump();
    EXPECT_NE(r.status().message().find("store manifest.json"), std::string::npos);
  }
  Json unknown = j;
  unknown["extra"] = 1;
  EXPECT_FALSE(ParseModelManifest(unknown.dump(), digest, "m").ok());
  EXPECT_FALSE(ParseModelManifest("{not json", digest, "m").ok());
  // A manifest too large to be one is refused before it is read.
  const std::string big_digest(64, 'c');
  ASSERT_TRUE(
      store_->Put(ModelPrefix(big_digest) + "manifest.json", std::string(kMaxModelManifestBytes + 1, ' '))
          .ok());
  EXPECT_EQ(FetchModel(*store_, ModelPrefix(big_digest), dir_ / "cache").status().code(), Code::kDataLoss);
}

TEST_F(ModelStoreTest, FoldersThatCannotBeShippedSaySo) {
  fs::create_directories(model_ / "sub");
  auto r = ScanModelFolder(model_);
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("sub"), std::string::npos);
  fs::remove_all(model_ / "sub");
  Write(model_ / "bad name.txt", "x");
  r = ScanModelFolder(model_);
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("bad name.txt"), std::string::npos);
  fs::remove(model_ / "bad name.txt");
  ModelPublisher pub(*store_);
  EXPECT_EQ(pub.Publish(dir_ / "nope").status().code(), Code::kNotFound);
  EXPECT_EQ(store_->List("").value().size(), 0u) << "nothing half-published";
}

TEST_F(ModelStoreTest, ConcurrentFetchesOnOneNodeShareOneCompleteFolder) {
  const std::string prefix = ModelPublisher(*store_).Publish(model_).value();
  std::vector<std::thread> threads;
  std::vector<Result<fs::path>> got(4, Status(Code::kInternal, "not run"));
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] { got[i] = FetchModel(*store_, prefix, dir_ / "cache"); });
  }
  for (auto& t : threads) t.join();
  for (const auto& g : got) {
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    EXPECT_EQ(Sha256File(g.value() / "model.safetensors"), Sha256File(model_ / "model.safetensors"));
  }
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(dir_ / "cache")) entries += e.is_directory() ? 1 : 0;
  EXPECT_EQ(entries, 1u) << "no temp folders left behind";
}

}  // namespace
}  // namespace burst
