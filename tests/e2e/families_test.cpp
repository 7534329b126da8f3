// End to end, a family other than Llama: a tiny Qwen 3 mixture of experts
// that transformers itself writes (tests/reference/hf_ref.py make, the
// shipped model's tokenizer beside it) goes through a real `burst serve`
// and `burst worker`: a LoRA job from zero, a deployment of its checkpoint
// that answers, and a training loop over the Tinker protocol that lowers
// its loss; LoRA adapts the attention and the experts (as PEFT does).
#include <gtest/gtest.h>

#include "e2e_http.h"

namespace burst::e2e {
namespace {

// A Hub-style name: the model lies at ROOT/Qwen/tiny-qwen3-moe.
constexpr const char* kModel = "Qwen/tiny-qwen3-moe";

class FamiliesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new TempDir("burst-e2e-families");
    const fs::path models = root_->path() / "models", model = models / kModel;
    fs::create_directories(model.parent_path());
    // 4 experts of width 32, 2 a token, renormalised; layer 1 dense.
    const Json config = {{"model_type", "qwen3_moe"},
                         {"vocab_size", 4096},
                         {"hidden_size", 64},
                         {"intermediate_size", 96},
                         {"moe_intermediate_size", 32},
                         {"num_hidden_layers", 2},
                         {"num_attention_heads", 4},
                         {"num_key_value_heads", 2},
                         {"head_dim", 16},
                         {"num_experts", 4},
                         {"num_experts_per_tok", 2},
                         {"norm_topk_prob", true},
                         {"mlp_only_layers", {1}},
                         {"max_position_embeddings", 512},
                         {"tie_word_embeddings", true}};
    WriteFileAtomic(root_->path() / "config.json", config.dump());
    Process make({BURST_PYTHON, (SourceDir() / "tests/reference/hf_ref.py").string(), "make", "--config",
                  (root_->path() / "config.json").string(), "--out", model.string(), "--seed", "3", "--std",
                  "0.05"});
    const ProcResult made = make.Wait(300);
    if (made.exit_code != 0) {
      start_error_ = "transformers could not write the model: " + made.Describe();
      return;
    }
    for (const char* f : {"tokenizer.model", "tokenizer_config.json", "generation_config.json"})
      fs::copy_file(SourceDir() / "models/burst-small" / f, model / f, fs::copy_options::overwrite_existing);
    server_ =
        new ServeProcess("burst-e2e-families", {"--slots", "1", "--threads-per-slot", "1",
                                                "--scaledown-window", "1", "--model-root", models.string()});
    if (!server_->error().empty()) start_error_ = server_->error();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    delete root_;
    root_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(start_error_.empty()) << start_error_; }

  static Resp Send(const std::string& method, const std::string& path, const Json& body = Json()) {
    return server_->Send(method, path, body);
  }
  // A POST as the tinker SDK sends it.
  static Resp Tinker(const std::string& path, const Json& body) {
    return server_->Send("POST", path, body, {{"X-API-Key", "tml-" + server_->key()}});
  }
  // A future's answer, polled until it is no longer try_again.
  static Json Result(const Resp& submitted) {
    EXPECT_EQ(submitted.status, 200) << submitted.Describe();
    const std::string id = submitted.body.value("request_id", "");
    for (int i = 0; i < 30; ++i) {
      Resp r = Tinker("/api/v1/retrieve_future", {{"request_id", id}, {"allow_metadata_only", true}});
      if (r.status != 200 || r.body.value("type", "") != "try_again") return r.body;
    }
    ADD_FAILURE() << "future " << id << " never finished";
    return Json();
  }

  static TempDir* root_;
  static ServeProcess* server_;
  static std::string start_error_;
};

TempDir* FamiliesTest::root_ = nullptr;
ServeProcess* FamiliesTest::server_ = nullptr;
std::string FamiliesTest::start_error_;

TEST_F(FamiliesTest, AQwen3MoeLoraJobDeploysAndItsDeploymentAnswers) {
  Resp listed = Send("GET", "/v1/models/" + std::string(kModel));
  ASSERT_EQ(listed.status, 200) << listed.Describe();
  EXPECT_EQ(listed.body.value("architecture", ""), "Qwen3MoeForCausalLM") << listed.body.dump();

  WriteHead(SupportTrain(), server_->dir() / "train.jsonl", 24);
  const std::string file = server_->Upload(server_->dir() / "train.jsonl");
  ASSERT_FALSE(file.empty());
  Json recipe = {{"max_steps", 4}, {"batch_size", 4}, {"max_seq_len", 128}, {"checkpoint_every", 4}};
  // gate and up are one fused weight in a mixture of experts (as PEFT
  // adapts it): one without the other is refused up front, by name.
  recipe["lora"] = {{"rank", 4}, {"targets", {"q", "gate"}}};
  Resp split =
      Send("POST", "/v1/fine_tuning/jobs", {{"model", kModel}, {"training_file", file}, {"recipe", recipe}});
  EXPECT_EQ(split.status, 400) << split.Describe();
  EXPECT_EQ(split.body["error"]["param"], "recipe.lora.targets") << split.Describe();
  EXPECT_NE(split.raw.find("both or neither"), std::string::npos) << split.Describe();
  EXPECT_EQ(Send("GET", "/v1/fine_tuning/jobs").body["data"].size(), 0u)
      << "a refused request creates nothing";
  Json j;

  recipe["lora"] = {{"rank", 4}};  // every projection: the attention's and the experts'
  Resp job =
      Send("POST", "/v1/fine_tuning/jobs", {{"model", kModel}, {"training_file", file}, {"recipe", recipe}});
  ASSERT_EQ(job.status, 200) << job.Describe();
  const std::string id = job.body["id"];
  ASSERT_TRUE(WaitUntil(
      [&] {
        j = Send("GET", "/v1/fine_tuning/jobs/" + id).body;
        const std::string st = j.value("status", "");
        return st == "succeeded" || st == "failed" || st == "cancelled";
      },
      180, 100));
  ASSERT_EQ(j.value("status", ""), "succeeded") << j.dump();

  Resp created =
      Send("POST", "/v1/deployments",
           {{"name", "moe-bot"}, {"checkpoint", id + ":step-4"}, {"min_replicas", 0}, {"max_replicas", 1}});
  ASSERT_EQ(created.status, 200) << created.Describe();
  Resp chat = Send("POST", "/v1/chat/completions",
                   {{"model", "moe-bot"},
                    {"messages", {{{"role", "user"}, {"content", "My order has not arrived. Where is it?"}}}},
                    {"temperature", 0},
                    {"max_tokens", 6}});
  ASSERT_EQ(chat.status, 200) << chat.Describe();
  EXPECT_EQ(chat.body["usage"]["completion_tokens"], 6) << chat.body.dump();
  EXPECT_EQ(Send("DELETE", "/v1/deployments/moe-bot").status, 200);
}

TEST_F(FamiliesTest, ATrainingLoopOnQwen3MoeLowersItsLoss) {
  Resp session = Tinker("/api/v1/create_session", {{"tags", Json::array()},
                                                   {"user_metadata", Json::object()},
                                                   {"sdk_version", "0.25.0"},
                                                   {"type", "create_session"}});
  ASSERT_EQ(session.status, 200) << session.Describe();
  Json create = {{"session_id", session.body["session_id"]},
                 {"model_seq_id", 0},
                 {"base_model", kModel},
                 {"lora_config", {{"rank", 4}, {"seed", 1}}},  // the SDK's defaults: the experts train too
                 {"type", "create_model"}};
  Json model = Result(Tinker("/api/v1/create_model", create));
  const std::string run = model.value("model_id", "");
  ASSERT_FALSE(run.empty()) << model.dump();
  const std::vector<int64_t> in = {5, 17, 42, 9, 100, 7, 7, 300, 12, 44, 45},
                             tgt = {17, 42, 9, 100, 7, 7, 300, 12, 44, 45, 46};
  const Json datum = {
      {"model_input", {{"chunks", {{{"tokens", in}, {"type", "encoded_text"}}}}}},
      {"loss_fn_inputs",
       {{"target_tokens", {{"data", tgt}, {"dtype", "int64"}, {"shape", {tgt.size()}}}},
        {"weights",
         {{"data", std::vector<float>(tgt.size(), 1.0f)}, {"dtype", "float32"}, {"shape", {tgt.size()}}}}}}};
  std::vector<double> losses;
  for (int64_t step = 0; step < 3; ++step) {
    Json fb = Result(Tinker("/api/v1/forward_backward",
                            {{"forward_backward_input", {{"data", {datum}}, {"loss_fn", "cross_entropy"}}},
                             {"model_id", run},
                             {"seq_id", 2 * step + 1}}));
    ASSERT_TRUE(fb.contains("metrics")) << fb.dump();
    losses.push_back(fb["metrics"]["loss:sum"].get<double>());
    Json op = Result(Tinker("/api/v1/optim_step", {{"adam_params",
                                                    {{"learning_rate", 5e-3},
                                                     {"beta1", 0.9},
                                                     {"beta2", 0.95},
                                                     {"eps", 1e-12},
                                                     {"weight_decay", 0.0},
                                                     {"grad_clip_norm", 0.0}}},
                                                   {"model_id", run},
                                                   {"seq_id", 2 * step + 2},
                                                   {"type", "optim_step"}}));
    ASSERT_TRUE(op.is_object()) << op.dump();
  }
  EXPECT_LT(losses[2], losses[0]) << "three optim_steps on the same datum must lower its loss";
}

}  // namespace
}  // namespace burst::e2e
