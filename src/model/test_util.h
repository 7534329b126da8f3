// Helpers shared by the model and train tests: temp folders, error
// expectations, tensor comparisons.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/fs.h"
#include "core/status.h"
#include "model/llama.h"
#include "model/presets.h"

namespace burst::test_util {

// A fresh temp folder, removed when the object goes out of scope.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "burst_model_test_") : path_(burst::MakeTempDir(prefix)) {}
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// max|a - b| / max(max|b|, 1e-6), computed in float64.
inline double RelErr(const torch::Tensor& a, const torch::Tensor& b) {
  torch::Tensor ad = a.detach().to(torch::kCPU, torch::kFloat64);
  torch::Tensor bd = b.detach().to(torch::kCPU, torch::kFloat64);
  if (ad.sizes() != bd.sizes()) return std::numeric_limits<double>::infinity();
  if (ad.numel() == 0) return 0.0;
  double diff = (ad - bd).abs().max().item<double>();
  double scale = std::max(bd.abs().max().item<double>(), 1e-6);
  return diff / scale;
}

inline double MaxAbs(const torch::Tensor& a) {
  return a.numel() ? a.detach().abs().max().item<double>() : 0.0;
}

// What ExpectBurstError caught. Not a bare Status, which is [[nodiscard]]:
// most callers assert through the call and have no use for it; the others
// take it as a Status (`Status s = ExpectBurstError(...)`).
struct CaughtError {
  burst::Status status;
  operator burst::Status() const { return status; }  // NOLINT: implicit by design
};

// Runs fn, expects a burst::Error with `code` whose message contains every
// string of `needles`; returns the Error's status (kOk when nothing matched).
inline CaughtError ExpectBurstError(const std::function<void()>& fn, burst::Code code,
                                    const std::vector<std::string>& needles = {}) {
  try {
    fn();
  } catch (const burst::Error& e) {
    EXPECT_EQ(burst::CodeName(e.status().code()), std::string(burst::CodeName(code)))
        << "message: " << e.what();
    for (const auto& n : needles) {
      EXPECT_NE(e.status().message().find(n), std::string::npos)
          << "expected \"" << n << "\" in: " << e.status().message();
    }
    return {e.status()};
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected burst::Error, got another exception: " << e.what();
    return {burst::Status(burst::Code::kInternal, e.what())};
  }
  ADD_FAILURE() << "expected burst::Error with code " << burst::CodeName(code) << ", nothing was thrown";
  return {burst::Status()};
}

// Fills a tensor in place with normal(mean, std) from a seeded generator.
inline void FillNormal(torch::Tensor& t, uint64_t seed, double mean, double std) {
  torch::NoGradGuard no_grad;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  t.normal_(mean, std, gen);
}

// Gives LoRA B (and A) random nonzero values so adapters change the output.
inline void RandomizeLora(LlamaModel& model, uint64_t seed, double b_std = 0.05, bool also_a = false,
                          double a_std = 0.1) {
  torch::NoGradGuard no_grad;
  uint64_t s = seed;
  for (auto& [name, slot] : model.LoraWeightSlots()) {
    bool is_b = name.find("lora_B") != std::string::npos;
    if (is_b)
      FillNormal(*slot, ++s, 0.0, b_std);
    else if (also_a)
      FillNormal(*slot, ++s, 0.0, a_std);
  }
}

// Gives the norm weights (ones after Random) values away from 1, so a forward
// that ignored them would be caught.
inline void RandomizeNorms(LlamaModel& model, uint64_t seed, double std = 0.2) {
  torch::NoGradGuard no_grad;
  uint64_t s = seed;
  for (auto& [name, slot] : model.BaseWeightSlots()) {
    if (name.find("norm") != std::string::npos) FillNormal(*slot, ++s, 1.0, std);
    if (name.find(".bias") != std::string::npos) FillNormal(*slot, ++s, 0.0, 0.1);
  }
}

// Random ids (B, T) int64 in [0, vocab).
inline torch::Tensor RandomIds(int64_t b, int64_t t, int64_t vocab, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return torch::randint(vocab, {b, t}, gen, torch::TensorOptions().dtype(torch::kInt64));
}

// The tiny preset (2 layers, 64 wide, GQA 4/2, head_dim 16) at a vocabulary.
inline LlamaConfig TinyConfig(int64_t vocab = 279, bool tied = false) {
  LlamaConfig c = PresetConfig(tied ? "tiny-tied" : "tiny", vocab);
  return c;
}

// TinyConfig(279) as `type` ("qwen2", "qwen3", "qwen3_moe", "gemma3_text";
// anything else: Llama's): Qwen 2's q/k/v biases; Qwen 3's q/k norms; the
// MoE's layer 0 sparse (4 experts, 2 a token, renormalised) and layer 1
// dense; Gemma 3's layer 0 sliding (its own rope base) and layer 1 global.
inline LlamaConfig FamilyConfig(const std::string& type) {
  LlamaConfig c = TinyConfig(279);
  c.model_type = type;
  c.qkv_bias = type == "qwen2";
  c.qk_norm = type == "qwen3" || type == "qwen3_moe";
  if (type == "gemma3_text") {
    c.gemma = true;
    c.qk_norm = true;
    c.query_pre_attn_scalar = 24;
    c.local_rope_theta = 10000.0;
    c.rope_theta = 1000000.0;
    c.sliding_layers = {true, false};
    c.attention_window = 64;
  }
  if (type == "qwen3_moe") {
    c.num_experts = 4;
    c.num_experts_per_tok = 2;
    c.moe_intermediate_size = 24;
    c.norm_topk_prob = true;
    c.mlp_only_layers = {1};
  }
  return c;
}

inline std::string SourceDir() { return BURST_SOURCE_DIR; }

}  // namespace burst::test_util
