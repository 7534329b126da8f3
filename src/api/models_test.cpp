// The model catalog (api/models.h) and what a job request is checked against:
// a real model folder (the shipped burst-small's config) under a temp root,
// with and without a sidecar; scopes picked, asked for and refused.
#include "api/models.h"

#include <gtest/gtest.h>

#include "api/job_request.h"
#include "core/fs.h"

namespace burst {
namespace {

namespace fs = std::filesystem;

class CatalogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = MakeTempDir("burst-catalog-test");
    for (const char* name : {"small", "locked"}) {
      fs::create_directories(root_ / name);
      fs::copy_file(fs::path(BURST_SOURCE_DIR) / "models/burst-small/config.json",
                    root_ / name / "config.json");
    }
    WriteFileAtomic(
        root_ / "locked.model.json",
        R"({"max_seq_len": 128, "lora_ranks": [8, 16], "methods": ["supervised"], "serverless": false})");
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

Status ThrownBy(const std::function<void()>& fn) { return Try(fn); }

TEST_F(CatalogTest, EntriesComeFromConfigAndSidecar) {
  std::vector<ModelInfo> cat = LoadCatalog({root_});
  ASSERT_EQ(cat.size(), 2u);
  const ModelInfo& locked = cat[0].id == "locked" ? cat[0] : cat[1];
  const ModelInfo& small = cat[0].id == "small" ? cat[0] : cat[1];
  EXPECT_EQ(small.architecture, "LlamaForCausalLM");
  EXPECT_EQ(small.max_seq_len, 1024) << "max_position_embeddings";
  EXPECT_TRUE(small.serverless);
  // 4096*256 tied embeddings + 4 layers of (attention + MLP + 2 norms) + final norm.
  const int64_t attn = 256 * 8 * 32 * 2 + 256 * 4 * 32 * 2;
  EXPECT_EQ(small.parameters, 4096 * 256 + 4 * (attn + 3 * 256 * 704 + 2 * 256) + 256);
  EXPECT_EQ(locked.max_seq_len, 128);
  EXPECT_EQ(locked.lora_ranks, (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(locked.methods, (std::vector<std::string>{"supervised"}));
  EXPECT_FALSE(locked.serverless);
  EXPECT_EQ(CatalogEntryFor(root_ / "locked", {root_}).max_seq_len, 128) << "found by folder too";
  Json j = locked.ToJson();
  EXPECT_EQ(j["object"], "model");
  EXPECT_EQ(j["lora_ranks"], Json({8, 16}));
}

TEST_F(CatalogTest, ABadSidecarBreaksItsModelOnlyAndNamesItsFileAndField) {
  WriteFileAtomic(root_ / "small.model.json", R"({"lora_rank": [8]})");
  std::vector<ModelInfo> cat = LoadCatalog({root_});
  ASSERT_EQ(cat.size(), 2u) << "the other model is still listed";
  const ModelInfo& small = cat[0].id == "small" ? cat[0] : cat[1];
  EXPECT_NE(small.error.find("small.model.json"), std::string::npos) << small.error;
  EXPECT_NE(small.error.find("lora_rank"), std::string::npos) << small.error;
  EXPECT_TRUE(small.ToJson().contains("error"));
  Status s = ThrownBy([&] { CatalogEntryFor(root_ / "small", {root_}, "small"); });
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.param(), "model");
  EXPECT_NE(s.message().find("lora_rank"), std::string::npos) << s.message();
  EXPECT_EQ(CatalogEntryFor(root_ / "locked", {root_}, "locked").max_seq_len, 128) << "locked is unaffected";
}

TEST_F(CatalogTest, AFamilyBurstCannotRunIsListedBrokenNamingTheField) {
  Json config = ParseJson(ReadFile(root_ / "small" / "config.json"), "config.json");
  config["model_type"] = "phi3";
  WriteFileAtomic(root_ / "small" / "config.json", config.dump());
  std::vector<ModelInfo> cat = LoadCatalog({root_});
  ASSERT_EQ(cat.size(), 2u);
  const ModelInfo& small = cat[0].id == "small" ? cat[0] : cat[1];
  EXPECT_NE(small.error.find("model_type \"phi3\" is not supported"), std::string::npos) << small.error;
  Status s = ThrownBy([&] { CatalogEntryFor(root_ / "small", {root_}, "small"); });
  EXPECT_EQ(s.param(), "model");
  EXPECT_NE(s.message().find("phi3"), std::string::npos) << s.message();
}

// Hub-style names: root/ORG/NAME is the model "ORG/NAME", its sidecar
// root/ORG/NAME.model.json; what is not a name is a path.
TEST_F(CatalogTest, HubStyleFoldersAreModelsNamedOrgSlashName) {
  fs::create_directories(root_ / "Qwen" / "Qwen3-8B");
  fs::copy_file(fs::path(BURST_SOURCE_DIR) / "models/burst-small/config.json",
                root_ / "Qwen/Qwen3-8B/config.json");
  WriteFileAtomic(root_ / "Qwen/Qwen3-8B.model.json", R"({"max_seq_len": 64})");
  fs::create_directories(root_ / ".hidden" / "x");
  fs::copy_file(fs::path(BURST_SOURCE_DIR) / "models/burst-small/config.json",
                root_ / ".hidden/x/config.json");
  std::vector<std::string> names;
  for (const auto& [name, dir] : ModelFolders(root_)) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"Qwen/Qwen3-8B", "locked", "small"}));
  std::vector<ModelInfo> cat = LoadCatalog({root_});
  ASSERT_EQ(cat.size(), 3u);
  EXPECT_EQ(cat[0].id, "Qwen/Qwen3-8B");
  EXPECT_EQ(cat[0].max_seq_len, 64) << "its sidecar";
  EXPECT_EQ(CatalogEntryFor(root_ / "Qwen/Qwen3-8B", {root_}, "Qwen/Qwen3-8B").max_seq_len, 64);
  EXPECT_EQ(CatalogEntryFor(root_ / "Qwen/Qwen3-8B", {root_}).id, "Qwen/Qwen3-8B") << "found by folder too";
  for (const char* ok : {"small", "Qwen/Qwen3-8B", "meta-llama/Llama-3.2-1B"})
    EXPECT_TRUE(IsModelName(ok)) << ok;
  for (const char* bad : {"", "/abs/path", "../up", "a/../b", "a/b/c", ".hidden/x", "a b", "Qwen/"})
    EXPECT_FALSE(IsModelName(bad)) << bad;
}

// One folder under two names: each name keeps its own limits.
TEST_F(CatalogTest, AnAliasKeepsItsOwnEntry) {
  fs::create_directory_symlink(root_ / "small", root_ / "small-dedicated");
  WriteFileAtomic(root_ / "small-dedicated.model.json", R"({"serverless": false})");
  EXPECT_TRUE(CatalogEntryFor(root_ / "small", {root_}, "small").serverless);
  EXPECT_FALSE(CatalogEntryFor(root_ / "small", {root_}, "small-dedicated").serverless);
}

TEST_F(CatalogTest, TrainingIsCheckedAndErrorsNameFieldAndAllowedValues) {
  const ModelInfo locked = CatalogEntryFor(root_ / "locked", {root_});
  EXPECT_TRUE(ThrownBy([&] {
                CheckTrainingAgainstCatalog(locked, "supervised", "lora", "cross_entropy", 16, 128);
              }).ok());
  Status rank =
      ThrownBy([&] { CheckTrainingAgainstCatalog(locked, "supervised", "lora", "cross_entropy", 4, 128); });
  EXPECT_EQ(rank.param(), "recipe.lora.rank");
  EXPECT_NE(rank.message().find("[8,16]"), std::string::npos) << rank.message();
  Status len =
      ThrownBy([&] { CheckTrainingAgainstCatalog(locked, "supervised", "lora", "cross_entropy", 8, 256); });
  EXPECT_EQ(len.param(), "recipe.max_seq_len");
  EXPECT_NE(len.message().find("1 to 128"), std::string::npos) << len.message();
  Status dpo = ThrownBy([&] { CheckTrainingAgainstCatalog(locked, "dpo", "lora", "dpo", 8, 128); });
  EXPECT_EQ(dpo.param(), "method.type");
  EXPECT_NE(dpo.message().find("[\"supervised\"]"), std::string::npos) << dpo.message();
}

TEST_F(CatalogTest, ScopeIsPickedAskedForOrRefusedNeverFallenBackFrom) {
  const ModelInfo small = CatalogEntryFor(root_ / "small", {root_});
  const ModelInfo locked = CatalogEntryFor(root_ / "locked", {root_});
  const auto dedicated = BillingScope::kDedicated, serverless = BillingScope::kServerless;
  EXPECT_EQ(ChooseScope(std::nullopt, small, "lora").scope, serverless);
  EXPECT_NE(ChooseScope(std::nullopt, small, "lora").reason.find("picked"), std::string::npos);
  EXPECT_EQ(ChooseScope(std::nullopt, small, "full").scope, dedicated)
      << "full fine-tunes are dedicated only";
  EXPECT_EQ(ChooseScope(std::nullopt, locked, "lora").scope, dedicated);
  EXPECT_NE(ChooseScope(std::nullopt, locked, "lora").reason.find("not eligible"), std::string::npos);
  EXPECT_EQ(ChooseScope(dedicated, small, "lora").scope, dedicated);
  EXPECT_EQ(ChooseScope(serverless, small, "lora").reason, "asked for");
  Status refused = ThrownBy([&] { ChooseScope(serverless, locked, "lora"); });
  EXPECT_EQ(refused.code(), Code::kInvalidArgument);
  EXPECT_EQ(refused.param(), "scope");
  EXPECT_NE(refused.message().find("not eligible"), std::string::npos) << refused.message();
  EXPECT_EQ(ThrownBy([&] { ChooseScope(serverless, small, "full"); }).param(), "scope");
  // The request's field: absent, one of the two names, or a 400.
  EXPECT_EQ(AskedScope(""), std::nullopt);
  EXPECT_EQ(AskedScope("serverless"), serverless);
  EXPECT_EQ(AskedScope("dedicated"), dedicated);
  Status spot = ThrownBy([&] { AskedScope("spot"); });
  EXPECT_EQ(spot.param(), "scope");
  EXPECT_EQ(spot.message(), "scope: must be \"serverless\" or \"dedicated\" (got \"spot\")");
}

// Serverless decided by model, LoRA rank and sequence length, as Baseten
// decides it; a model that needs a GPU has its work put on the pool's GPUs.
TEST_F(CatalogTest, ServerlessLimitsAndTheAccelerator) {
  WriteFileAtomic(root_ / "small.model.json",
                  R"({"serverless_max_lora_rank": 16, "serverless_max_seq_len": 512})");
  const ModelInfo small = CatalogEntryFor(root_ / "small", {root_});
  const auto serverless = BillingScope::kServerless;
  EXPECT_EQ(ChooseScope(std::nullopt, small, "lora", 16, 512).scope, serverless);
  const ScopeChoice big_rank = ChooseScope(std::nullopt, small, "lora", 32, 512);
  EXPECT_EQ(big_rank.scope, BillingScope::kDedicated);
  EXPECT_NE(big_rank.reason.find("serverless limit (16)"), std::string::npos) << big_rank.reason;
  Status long_seq = ThrownBy([&] { ChooseScope(serverless, small, "lora", 8, 1024); });
  EXPECT_EQ(long_seq.param(), "scope");
  EXPECT_NE(long_seq.message().find("max_seq_len 1024"), std::string::npos) << long_seq.message();
  EXPECT_NE(long_seq.message().find("(512)"), std::string::npos) << long_seq.message();
  const Json listed = small.ToJson();
  EXPECT_EQ(listed["serverless_max_lora_rank"], 16);
  EXPECT_EQ(listed["serverless_max_seq_len"], 512);
  EXPECT_EQ(listed["accelerator"], "cpu");

  EXPECT_EQ(listed["gpu"], Json());
  EXPECT_TRUE(CallDevicesFor(root_ / "small", "small", {root_}, SlotPool{}).value().empty())
      << "a CPU model's calls";
  CheckDeviceAgainstCatalog(small, false);

  // accelerator cuda alone: any GPU. Jobs on it must ask for one; its calls
  // run on the pool's GPUs, and a pool without them answers naming model.
  WriteFileAtomic(root_ / "small.model.json", R"({"accelerator": "cuda"})");
  const ModelInfo any = CatalogEntryFor(root_ / "small", {root_});
  EXPECT_EQ(any.ToJson()["gpu"], Json::array({"any"}));
  Status no_gpu = ThrownBy([&] { CheckDeviceAgainstCatalog(any, false); });
  EXPECT_EQ(no_gpu.param(), "gpu");
  EXPECT_NE(no_gpu.message().find("runs on a GPU"), std::string::npos) << no_gpu.message();
  CheckDeviceAgainstCatalog(any, true);
  SlotPool pool;
  pool.gpus = {{"h100", 2}, {"l40s", 1}};
  auto claims = CallDevicesFor(root_ / "small", "small", {root_}, pool);
  ASSERT_TRUE(claims.ok()) << claims.status().ToString();
  EXPECT_EQ(claims.value().size(), 2u);
  auto cpu_pool = CallDevicesFor(root_ / "small", "small", {root_}, SlotPool{});
  EXPECT_EQ(cpu_pool.status().param(), "model");
  EXPECT_NE(cpu_pool.status().message().find("which this server cannot give"), std::string::npos)
      << cpu_pool.status().ToString();

  // A type and count, in order of preference; accelerator follows.
  WriteFileAtomic(root_ / "small.model.json", R"({"gpu": ["l40s", "h100:2"]})");
  const ModelInfo typed = CatalogEntryFor(root_ / "small", {root_});
  EXPECT_EQ(typed.accelerator, "cuda");
  claims = CallDevicesFor(root_ / "small", "small", {root_}, pool);
  ASSERT_TRUE(claims.ok()) << claims.status().ToString();
  ASSERT_EQ(claims.value().size(), 2u);
  EXPECT_EQ(claims.value()[0], (DeviceClaim{"l40s", 1}));
  EXPECT_EQ(claims.value()[1], (DeviceClaim{"h100", 2}));

  for (const char* bad :
       {R"({"accelerator": "tpu"})", R"({"gpu": "h100:99"})", R"({"accelerator": "cpu", "gpu": "h100"})"}) {
    WriteFileAtomic(root_ / "small.model.json", bad);
    EXPECT_EQ(ThrownBy([&] { CatalogEntryFor(root_ / "small", {root_}, "small"); }).code(),
              Code::kInvalidArgument)
        << bad;
  }
}

// A job request goes through the catalog: the same body is fine on one model
// and a 400 naming the field on the other.
TEST_F(CatalogTest, JobRequestsAreCheckedAgainstTheCatalog) {
  auto md = Metadata::Open(":memory:");
  ASSERT_TRUE(md.ok());
  Org org = md.value()->CreateOrg("a").value();
  FileRecord f;
  f.id = "file-train";
  f.org_id = org.id;
  f.filename = "train.jsonl";
  f.purpose = "fine-tune";
  f.format = "messages";
  f.examples = 32;
  f.object_key = "orgs/x/files/file-train";
  ASSERT_TRUE(md.value()->CreateFile(f).ok());
  JobRequestContext ctx{org.id, md.value().get(), {root_}, 1, nullptr, 0, SlotPool{}};
  Json body = {{"model", "small"},
               {"training_file", "file-train"},
               {"recipe", {{"lora", {{"rank", 4}}}, {"max_seq_len", 256}}}};
  ParsedJob ok = ParseJobRequest(body, ctx);
  EXPECT_EQ(ok.spec["scope"], "serverless");
  body["model"] = "locked";
  Status s = ThrownBy([&] { ParseJobRequest(body, ctx); });
  EXPECT_EQ(s.param(), "recipe.lora.rank") << s.ToString();
  body["recipe"]["lora"]["rank"] = 8;
  s = ThrownBy([&] { ParseJobRequest(body, ctx); });
  EXPECT_EQ(s.param(), "recipe.max_seq_len") << s.ToString();
  body["recipe"]["max_seq_len"] = 128;
  ParsedJob locked = ParseJobRequest(body, ctx);
  EXPECT_EQ(locked.spec["scope"], "dedicated");
  body["scope"] = "serverless";
  EXPECT_EQ(ThrownBy([&] { ParseJobRequest(body, ctx); }).param(), "scope");
}

}  // namespace
}  // namespace burst
