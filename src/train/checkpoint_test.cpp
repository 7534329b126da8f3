// Checkpoint manifests: a committed folder verifies, and a manifest read
// back from the store with wrong types, escaping names or changed files is
// kDataLoss (the reader falls back to the previous checkpoint), never a
// JSON library exception or a file hashed outside the folder.
#include "train/checkpoint.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/fs.h"

namespace burst {
namespace {

class ManifestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("burst-manifest-");
    ckpt_ = dir_ / "step-1";
    fs::create_directories(ckpt_ / "sub");
    WriteFileAtomic(ckpt_ / "a.bin", "weights");
    WriteFileAtomic(ckpt_ / "sub/b.json", "{}");
    WriteFileAtomic(dir_ / "secret", "outside");
  }
  void TearDown() override { fs::remove_all(dir_); }
  void WriteManifest(const std::string& text) { WriteFileAtomic(ckpt_ / "manifest.json", text); }
  void ExpectDataLoss(const std::string& needle) {
    Status s = VerifyManifest(ckpt_, "peft-lora");
    EXPECT_EQ(s.code(), Code::kDataLoss) << s.ToString();
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
  }

  fs::path dir_, ckpt_;
};

TEST_F(ManifestTest, CommittedFolderVerifies) {
  CommitManifest(ckpt_, "peft-lora", {{"step", 1}});
  EXPECT_TRUE(VerifyManifest(ckpt_, "peft-lora").ok());
  EXPECT_EQ(VerifyManifest(ckpt_, "burst-state").code(), Code::kDataLoss);
  WriteFileAtomic(ckpt_ / "a.bin", "weighTs");
  ExpectDataLoss("sha256 differs");
  WriteFileAtomic(ckpt_ / "a.bin", "short");
  ExpectDataLoss("size differs");
}

TEST_F(ManifestTest, MalformedManifestsAreDataLoss) {
  const std::string sha = Sha256File(ckpt_ / "a.bin");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{not json", "unreadable"},
      {std::string(200, '[') + std::string(200, ']'), "unreadable"},
      {R"([1, 2])", "not a Burst manifest"},
      {R"({"format": "peft-lora", "version": "1", "files": {}})", "not a Burst manifest"},
      {R"({"format": "peft-lora", "version": 1, "files": []})", "not a Burst manifest"},
      {R"({"format": 7, "version": 1, "files": {}})", "format 7"},
      {R"({"format": "peft-lora", "version": 1, "files": {"a.bin": 5}})", "lacks bytes"},
      {R"({"format": "peft-lora", "version": 1, "files": {"a.bin": {"bytes": -7, "sha256": "x"}}})",
       "lacks bytes"},
      {R"({"format": "peft-lora", "version": 1, "files": {"a.bin": {"bytes": 7, "sha256": 1}}})",
       "lacks bytes"},
      {R"({"format": "peft-lora", "version": 1, "files": {"../secret": {"bytes": 7, "sha256": "x"}}})",
       "outside"},
      {R"({"format": "peft-lora", "version": 1, "files": {"sub/../../secret": {"bytes": 7, "sha256": "x"}}})",
       "outside"},
      {R"({"format": "peft-lora", "version": 1, "files": {"/etc/passwd": {"bytes": 7, "sha256": "x"}}})",
       "outside"},
      {R"({"format": "peft-lora", "version": 1, "files": {"sub": {"bytes": 7, "sha256": ")" + sha + R"("}}})",
       "missing"},
  };
  for (const auto& [text, needle] : cases) {
    SCOPED_TRACE(text.substr(0, 120));
    WriteManifest(text);
    ExpectDataLoss(needle);
  }
}

}  // namespace
}  // namespace burst
