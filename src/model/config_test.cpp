// config.json of each family Burst runs: what sets the family apart, the
// class transformers loads it with, and every config Burst cannot run
// exactly refused naming the field.
#include "model/config.h"

#include <gtest/gtest.h>

#include "core/status.h"

namespace burst {
namespace {

Json Base(const std::string& model_type) {
  return {{"model_type", model_type}, {"vocab_size", 100},      {"hidden_size", 64},
          {"intermediate_size", 96},  {"num_hidden_layers", 4}, {"num_attention_heads", 4},
          {"num_key_value_heads", 2}};
}

// The error FromJson throws for `j` (kOk when it reads).
Status Refusal(const Json& j) {
  try {
    LlamaConfig::FromJson(j, "m/config.json");
  } catch (const Error& e) {
    return e.status();
  }
  return Status();
}

TEST(Config, EachFamilyReadsWhatSetsItApart) {
  const LlamaConfig llama = LlamaConfig::FromJson(Base("llama"), "c");
  EXPECT_EQ(llama.Architecture(), "LlamaForCausalLM");
  EXPECT_FALSE(llama.HasQkvBias() || llama.qk_norm || llama.attention_window);
  EXPECT_EQ(llama.head_dim, 16);

  const LlamaConfig qwen2 = LlamaConfig::FromJson(Base("qwen2"), "c");
  EXPECT_EQ(qwen2.Architecture(), "Qwen2ForCausalLM");
  EXPECT_TRUE(qwen2.HasQkvBias()) << "Qwen 2's q, k and v always have biases";
  EXPECT_FALSE(qwen2.attention_bias) << "its o projection has none";

  Json q3 = Base("qwen3");
  const LlamaConfig qwen3 = LlamaConfig::FromJson(q3, "c");
  EXPECT_EQ(qwen3.Architecture(), "Qwen3ForCausalLM");
  EXPECT_TRUE(qwen3.qk_norm);
  EXPECT_FALSE(qwen3.HasQkvBias());
  EXPECT_EQ(qwen3.head_dim, 128) << "Qwen3Config's default, not hidden / heads";
  q3["attention_bias"] = true;
  q3["head_dim"] = 32;
  const LlamaConfig biased = LlamaConfig::FromJson(q3, "c");
  EXPECT_TRUE(biased.attention_bias && biased.HasQkvBias());
  EXPECT_EQ(biased.head_dim, 32);

  Json m = Base("mistral");
  m["attention_bias"] = true;  // not a Mistral field: transformers gives it no biases
  EXPECT_FALSE(LlamaConfig::FromJson(m, "c").HasQkvBias());
  EXPECT_EQ(LlamaConfig::FromJson(m, "c").Architecture(), "MistralForCausalLM");
}

TEST(Config, WrittenBackAsTheSameFamily) {
  for (const char* type : {"llama", "mistral", "qwen2", "qwen3"}) {
    Json j = Base(type);
    j["head_dim"] = 16;
    j["architectures"] = {"Whatever"};
    const LlamaConfig c = LlamaConfig::FromJson(j, "c");
    const Json out = c.ToJson();
    EXPECT_EQ(out.at("model_type"), type);
    EXPECT_EQ(out.at("architectures"), Json::array({c.Architecture()}));
    const LlamaConfig again = LlamaConfig::FromJson(out, "c");
    EXPECT_EQ(again.HasQkvBias(), c.HasQkvBias()) << type;
    EXPECT_EQ(again.qk_norm, c.qk_norm) << type;
    EXPECT_EQ(again.NumParameters(), c.NumParameters()) << type;
  }
}

TEST(Config, SlidingWindowsAreFoundAsTransformersFindsThem) {
  Json m = Base("mistral");
  m["sliding_window"] = 4096;
  EXPECT_EQ(LlamaConfig::FromJson(m, "c").attention_window, 4096) << "Mistral: every layer";
  m["sliding_window"] = nullptr;
  EXPECT_EQ(LlamaConfig::FromJson(m, "c").attention_window, 0);

  Json q = Base("qwen2");
  q["sliding_window"] = 64;
  EXPECT_EQ(LlamaConfig::FromJson(q, "c").attention_window, 0) << "use_sliding_window is off by default";
  q["use_sliding_window"] = true;
  q["max_window_layers"] = 4;
  EXPECT_EQ(LlamaConfig::FromJson(q, "c").attention_window, 0) << "no layer from max_window_layers on";
  q["max_window_layers"] = 2;
  EXPECT_EQ(LlamaConfig::FromJson(q, "c").attention_window, 64);

  Json t = Base("qwen3");
  t["sliding_window"] = 32;
  t["layer_types"] = {"full_attention", "sliding_attention", "full_attention", "full_attention"};
  EXPECT_EQ(LlamaConfig::FromJson(t, "c").attention_window, 32) << "layer_types decides over the flags";
  t["layer_types"] = {"full_attention", "full_attention", "full_attention", "full_attention"};
  EXPECT_EQ(LlamaConfig::FromJson(t, "c").attention_window, 0);
}

TEST(Config, MixturesOfExpertsReadAsTheirFamiliesWriteThem) {
  Json q = Base("qwen3_moe");
  q["num_experts"] = 8;
  q["num_experts_per_tok"] = 2;
  q["moe_intermediate_size"] = 24;
  q["decoder_sparse_step"] = 2;
  q["mlp_only_layers"] = {3};
  const LlamaConfig moe = LlamaConfig::FromJson(q, "c");
  EXPECT_EQ(moe.Architecture(), "Qwen3MoeForCausalLM");
  EXPECT_TRUE(moe.qk_norm);
  EXPECT_EQ(moe.head_dim, 16) << "Qwen 3 MoE's head_dim defaults to hidden / heads";
  EXPECT_FALSE(moe.norm_topk_prob) << "its config's default";
  EXPECT_FALSE(moe.IsMoeLayer(0));
  EXPECT_TRUE(moe.IsMoeLayer(1)) << "every decoder_sparse_step-th layer";
  EXPECT_FALSE(moe.IsMoeLayer(2));
  EXPECT_FALSE(moe.IsMoeLayer(3)) << "mlp_only_layers stay dense";
  EXPECT_EQ(moe.ExpertWeightName(1, -1), "model.layers.1.mlp.gate.weight");
  EXPECT_EQ(moe.ExpertWeightName(1, 7, "up"), "model.layers.1.mlp.experts.7.up_proj.weight");
  const int64_t attn = 64 * 64 * 2 + 64 * 32 * 2 + 2 * 16, dense = 3 * 64 * 96,
                sparse = 8 * (3 * 64 * 24 + 64);
  EXPECT_EQ(moe.NumParameters(), 3 * (attn + dense + 2 * 64) + (attn + sparse + 2 * 64) + 64 + 2 * 100 * 64);
  const LlamaConfig again = LlamaConfig::FromJson(moe.ToJson(), "c");
  EXPECT_EQ(again.NumParameters(), moe.NumParameters()) << "written back whole";
  EXPECT_EQ(again.mlp_only_layers, moe.mlp_only_layers);
  q.erase("num_experts");
  q["num_local_experts"] = 6;  // as transformers 5 writes a Qwen 3 MoE config
  EXPECT_EQ(LlamaConfig::FromJson(q, "c").num_experts, 6);

  Json m = Base("mixtral");
  m["num_local_experts"] = 4;
  const LlamaConfig mixtral = LlamaConfig::FromJson(m, "c");
  EXPECT_EQ(mixtral.Architecture(), "MixtralForCausalLM");
  EXPECT_TRUE(mixtral.norm_topk_prob) << "Mixtral's router always renormalises";
  EXPECT_EQ(mixtral.num_experts_per_tok, 2);
  EXPECT_EQ(mixtral.moe_intermediate_size, 96) << "its experts are intermediate_size wide";
  EXPECT_TRUE(mixtral.IsMoeLayer(0) && mixtral.IsMoeLayer(3));
  EXPECT_EQ(mixtral.ExpertWeightName(0, 2, "gate"), "model.layers.0.block_sparse_moe.experts.2.w1.weight");
  EXPECT_EQ(mixtral.ExpertWeightName(0, 2, "up"), "model.layers.0.block_sparse_moe.experts.2.w3.weight");
  EXPECT_EQ(mixtral.ExpertWeightName(0, 2, "down"), "model.layers.0.block_sparse_moe.experts.2.w2.weight");
  EXPECT_EQ(LlamaConfig::FromJson(mixtral.ToJson(), "c").num_experts, 4);
}

TEST(Config, Gemma3ReadsItsLayersRopeBasesAndScalesAsTransformersDoes) {
  Json g = Base("gemma3_text");
  g["sliding_window_pattern"] = 2;
  const LlamaConfig gemma = LlamaConfig::FromJson(g, "c");
  EXPECT_EQ(gemma.Architecture(), "Gemma3ForCausalLM");
  EXPECT_TRUE(gemma.gemma && gemma.qk_norm && gemma.tie_word_embeddings) << "Gemma ties by default";
  EXPECT_EQ(gemma.head_dim, 256) << "its config class's default";
  EXPECT_EQ(gemma.query_pre_attn_scalar, 256.0);
  EXPECT_EQ(gemma.sliding_layers, (std::vector<bool>{true, false, true, false})) << "every 2nd layer global";
  EXPECT_EQ(gemma.attention_window, 4096) << "its config class's default window";
  EXPECT_EQ(gemma.rope_theta, 1e6);
  EXPECT_EQ(gemma.local_rope_theta, 1e4);
  // transformers 5's rope_parameters by layer type.
  g["rope_parameters"] = {{"full_attention", {{"rope_type", "linear"}, {"factor", 8.0}, {"rope_theta", 5e5}}},
                          {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 2e4}}}};
  const LlamaConfig v5 = LlamaConfig::FromJson(g, "c");
  EXPECT_EQ(v5.rope_theta, 5e5);
  EXPECT_EQ(v5.local_rope_theta, 2e4);
  EXPECT_EQ(v5.rope_scaling.value("factor", 0.0), 8.0) << "the global layers' scaling";
  const LlamaConfig again = LlamaConfig::FromJson(v5.ToJson(), "c");
  EXPECT_EQ(again.sliding_layers, v5.sliding_layers);
  EXPECT_EQ(again.local_rope_theta, v5.local_rope_theta);
  EXPECT_EQ(again.rope_scaling.value("factor", 0.0), 8.0);
  EXPECT_TRUE(v5.ToJson()["query_pre_attn_scalar"].is_number_integer()) << "transformers takes an integer";
  for (const char* field :
       {"attn_logit_softcapping", "final_logit_softcapping", "use_bidirectional_attention"}) {
    Json bad = Base("gemma3_text");
    bad[field] = std::string(field) == "use_bidirectional_attention" ? Json(true) : Json(30.0);
    EXPECT_EQ(Refusal(bad).param(), field);
  }
  Json zero = Base("gemma3_text");
  zero["sliding_window_pattern"] = 0;  // would divide by zero
  EXPECT_EQ(Refusal(zero).param(), "sliding_window_pattern");
  Json act = Base("gemma3_text");
  act["hidden_activation"] = "silu";
  EXPECT_EQ(Refusal(act).param(), "hidden_activation");
}

TEST(Config, WhatBurstCannotRunExactlyIsRefusedByField) {
  struct Bad {
    Json config;
    std::string param, says;
  };
  Json phi = Base("phi3");
  Json gelu = Base("llama");
  gelu["hidden_act"] = "gelu";
  Json mlp_bias = Base("llama");
  mlp_bias["mlp_bias"] = true;
  Json yarn = Base("qwen3");
  yarn["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 4.0}};
  Json types = Base("qwen3");
  types["layer_types"] = {"full_attention", "chunked_attention", "full_attention", "full_attention"};
  Json short_types = Base("qwen3");
  short_types["layer_types"] = {"full_attention"};
  Json no_window = Base("qwen3");
  no_window["layer_types"] = {"sliding_attention", "full_attention", "full_attention", "full_attention"};
  Json jitter = Base("mixtral");
  jitter["router_jitter_noise"] = 0.01;
  Json aux = Base("qwen3_moe");
  aux["output_router_logits"] = true;
  Json too_many = Base("qwen3_moe");
  too_many["num_experts"] = 4;
  too_many["num_experts_per_tok"] = 5;
  for (const Bad& b : std::vector<Bad>{{phi, "model_type", "phi3"},
                                       {jitter, "router_jitter_noise", "0.01"},
                                       {aux, "output_router_logits", "auxiliary loss"},
                                       {too_many, "num_experts_per_tok", "1..num_experts (4)"},
                                       {gelu, "hidden_act", "gelu"},
                                       {mlp_bias, "mlp_bias", "mlp_bias"},
                                       {yarn, "rope_scaling", "dynamic"},
                                       {types, "layer_types", "chunked_attention"},
                                       {short_types, "layer_types", "one type per layer"},
                                       {no_window, "sliding_window", "sliding_window"}}) {
    const Status s = Refusal(b.config);
    EXPECT_FALSE(s.ok()) << b.config.dump();
    EXPECT_EQ(s.param(), b.param) << s.message();
    EXPECT_NE(s.message().find(b.says), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("m/config.json"), std::string::npos) << "names the file: " << s.message();
  }
}

}  // namespace
}  // namespace burst
