// End-to-end tests of `burst export --gguf`: the real binary writes GGUF
// files (f32, f16, q8_0) of the shipped SentencePiece model and of a tiny
// byte-level BPE model with a LoRA adapter merged in; Hugging Face's reader
// (@huggingface/gguf, tests/reference/gguf_check.mjs) and the gguf Python
// package (llama.cpp's, gguf_check.py) read them back and compare every
// tensor with the same model exported as a Hugging Face folder; the vocabulary is checked against
// sentencepiece's Python module and the tokenizer.json it came from.
#include <gtest/gtest.h>

#include <set>

#include "e2e_gguf.h"

namespace burst::e2e {
namespace {

// What every export of a model says of it, from its config.json.
void ExpectLlamaMetadata(const Json& m, const Json& config, int file_type) {
  EXPECT_EQ(m["general.architecture"], "llama");
  EXPECT_EQ(m["general.file_type"], file_type);
  EXPECT_EQ(m["llama.block_count"], config["num_hidden_layers"]);
  EXPECT_EQ(m["llama.embedding_length"], config["hidden_size"]);
  EXPECT_EQ(m["llama.feed_forward_length"], config["intermediate_size"]);
  EXPECT_EQ(m["llama.attention.head_count"], config["num_attention_heads"]);
  EXPECT_EQ(m["llama.attention.head_count_kv"], config["num_key_value_heads"]);
  EXPECT_EQ(m["llama.context_length"], config["max_position_embeddings"]);
  EXPECT_EQ(m["llama.vocab_size"], config["vocab_size"]);
  EXPECT_NEAR(m["llama.rope.freq_base"].get<double>(), config["rope_theta"].get<double>(), 1e-3);
  EXPECT_NEAR(m["llama.attention.layer_norm_rms_epsilon"].get<double>(), config["rms_norm_eps"].get<double>(),
              1e-9);
}

// The tensor types: 1-D in f32; 2-D in the asked type, q8_0 falling back to
// f16 where a row does not split into blocks of 32.
void ExpectTypes(const Json& check, int two_d) {
  for (const Json& t : check["tensors"]) {
    const auto& ne = t["ne"];
    int want = ne.size() == 1 ? 0 : (two_d == 8 && ne[0].get<int64_t>() % 32 != 0 ? 1 : two_d);
    EXPECT_EQ(t["dtype"], want) << t.dump();
  }
}

TEST(ExportGguf, TheShippedModelReadsBackAsItsWeightsAndVocabulary) {
  if (!HaveReader()) GTEST_SKIP() << "@huggingface/gguf is not installed (scripts/install-npm-deps.sh)";
  TempDir tmp("burst-e2e-gguf");
  const fs::path ref = tmp.path() / "hf";
  ProcResult merged =
      RunBurst({"export", "--model", "burst-small", "--merge", "--out", ref.string(), "--threads", "1"});
  ASSERT_TRUE(merged.ok()) << merged.Describe();
  const Json config = Json::parse(Slurp(ref / "config.json"));

  // The vocabulary as sentencepiece itself reads tokenizer.model.
  const fs::path model_dir = SourceDir() / "models/burst-small";
  Process py({BURST_PYTHON, "-c",
              "import json, sentencepiece as s, sys\n"
              "p = s.SentencePieceProcessor(model_file=sys.argv[1])\n"
              "t = lambda i: 2 if p.is_unknown(i) else 3 if p.is_control(i) else 6 if p.is_byte(i) else "
              "5 if p.is_unused(i) else None\n"
              "print(json.dumps({'pieces': [p.id_to_piece(i) for i in range(p.vocab_size())],"
              " 'scores': [p.get_score(i) for i in range(p.vocab_size())],"
              " 'types': [t(i) for i in range(p.vocab_size())]}))",
              (model_dir / "tokenizer.model").string()});
  ProcResult sp = py.Wait(60);
  ASSERT_TRUE(sp.ok()) << sp.Describe();
  const Json vocab = Json::parse(sp.out);

  std::map<std::string, uintmax_t> sizes;
  for (const auto& [type, file_type] :
       std::vector<std::pair<std::string, int>>{{"f32", 0}, {"f16", 1}, {"q8_0", 7}}) {
    SCOPED_TRACE(type);
    const fs::path out = tmp.path() / ("burst-small-" + type + ".gguf");
    ProcResult r = RunBurst(
        {"export", "--model", "burst-small", "--gguf", type, "--out", out.string(), "--threads", "1"});
    ASSERT_TRUE(r.ok()) << r.Describe();
    EXPECT_TRUE(Contains(r.out, "wrote " + out.string() + " (GGUF, " + type)) << r.out;
    sizes[type] = fs::file_size(out);
    const Json c = Check(out, ref);
    EXPECT_EQ(c["tensors"].size(), 2u + 9u * config["num_hidden_layers"].get<size_t>())
        << "embedding, final norm and 9 per layer (the head is tied)";
    EXPECT_TRUE(Differing(c).empty()) << "tensors that are not the model's: " << Json(Differing(c)).dump();
    ExpectTypes(c, file_type == 0 ? 0 : file_type == 1 ? 1 : 8);
    const Json& m = c["metadata"];
    ExpectLlamaMetadata(m, config, file_type);
    EXPECT_EQ(m["general.name"], "burst-small");
    EXPECT_EQ(m["tokenizer.ggml.model"], "llama");
    EXPECT_EQ(m["tokenizer.ggml.bos_token_id"], 1);
    EXPECT_EQ(m["tokenizer.ggml.eos_token_id"], 2);
    EXPECT_EQ(m["tokenizer.ggml.add_bos_token"], true);
    EXPECT_EQ(m["tokenizer.chat_template"],
              Json::parse(Slurp(model_dir / "tokenizer_config.json"))["chat_template"]);
    EXPECT_EQ(c["tokens"], vocab["pieces"]);
    ASSERT_EQ(c["scores"].size(), vocab["scores"].size());
    for (size_t i = 0; i < vocab["scores"].size(); ++i) {
      ASSERT_FLOAT_EQ(c["scores"][i].get<float>(), vocab["scores"][i].get<float>()) << i;
      if (!vocab["types"][i].is_null()) {
        ASSERT_EQ(c["token_type"][i], vocab["types"][i]) << i;
      }
    }
  }
  EXPECT_GT(sizes["f32"], sizes["f16"]);
  EXPECT_GT(sizes["f16"], sizes["q8_0"]);

  // Refusals name what is wrong and write nothing.
  const fs::path taken = tmp.path() / "burst-small-f16.gguf";
  const auto before = fs::file_size(taken);
  ProcResult again = RunBurst({"export", "--model", "burst-small", "--gguf", "f16", "--out", taken.string()});
  EXPECT_NE(again.exit_code, 0);
  EXPECT_TRUE(Contains(again.err, "exists")) << again.Describe();
  EXPECT_EQ(fs::file_size(taken), before);
  ProcResult q4 =
      RunBurst({"export", "--model", "burst-small", "--gguf", "q4_0", "--out", (tmp.path() / "q4").string()});
  EXPECT_NE(q4.exit_code, 0);
  EXPECT_TRUE(Contains(q4.err, "--gguf")) << q4.Describe();
  EXPECT_FALSE(fs::exists(tmp.path() / "q4"));
}

TEST(ExportGguf, AnAdapterIsMergedAndByteLevelBpeKeepsItsMerges) {
  if (!HaveReader()) GTEST_SKIP() << "@huggingface/gguf is not installed (scripts/install-npm-deps.sh)";
  TempDir tmp("burst-e2e-gguf-bpe");
  const fs::path base = tmp.path() / "model";
  ProcResult init = InitTinyModel(base);
  ASSERT_TRUE(init.ok()) << init.Describe();
  WriteSupportSubset(tmp.path(), 16, 4);
  // A LoRA on q, k and v: the rows the export permutes are the ones it changes.
  WriteJsonFile(tmp.path() / "lora.json",
                {{"model", base.string()},
                 {"train_file", (tmp.path() / "train.jsonl").string()},
                 {"method", "lora"},
                 {"lora", {{"rank", 4}, {"alpha", 8}, {"targets", {"q", "k", "v"}}}},
                 {"batch_size", 4},
                 {"learning_rate", 0.01},
                 {"max_steps", 2},
                 {"checkpoint_every", 2},
                 {"seed", 3},
                 {"threads", 1}});
  ProcResult train = RunBurst(
      {"train", "--config", (tmp.path() / "lora.json").string(), "--out", (tmp.path() / "run").string()});
  ASSERT_TRUE(train.ok()) << train.Describe();
  const fs::path adapter = StepDir(tmp.path() / "run", 2) / "sampler";
  const fs::path ref = tmp.path() / "merged";
  ProcResult merged = RunBurst({"export", "--model", base.string(), "--adapter", adapter.string(), "--merge",
                                "--out", ref.string(), "--threads", "1"});
  ASSERT_TRUE(merged.ok()) << merged.Describe();
  const Json config = Json::parse(Slurp(ref / "config.json"));
  const Json tokenizer = Json::parse(Slurp(TinyTokenizer()));

  for (const auto& [type, file_type] : std::vector<std::pair<std::string, int>>{{"f32", 0}, {"q8_0", 7}}) {
    SCOPED_TRACE(type);
    const fs::path out = tmp.path() / ("adapted-" + type + ".gguf");
    ProcResult r = RunBurst({"export", "--model", base.string(), "--adapter", adapter.string(), "--gguf",
                             type, "--out", out.string(), "--threads", "1"});
    ASSERT_TRUE(r.ok()) << r.Describe();
    const Json c = Check(out, ref);
    EXPECT_TRUE(Differing(c).empty())
        << "tensors that are not the merged model's: " << Json(Differing(c)).dump();
    ExpectTypes(c, file_type == 0 ? 0 : 8);
    const Json& m = c["metadata"];
    ExpectLlamaMetadata(m, config, file_type);
    EXPECT_EQ(m["general.name"], "model+" + StepDir(tmp.path() / "run", 2).filename().string());
    EXPECT_EQ(m["tokenizer.ggml.model"], "gpt2");
    EXPECT_EQ(m["tokenizer.ggml.pre"], "gpt-2") << "tokenizer.json's ByteLevel pre-tokenizer";
    // Every token at its id, the special ones as control tokens; the merges as written.
    ASSERT_EQ(c["tokens"].size(), config["vocab_size"].get<size_t>());
    for (const auto& [text, id] : tokenizer["model"]["vocab"].items()) {
      EXPECT_EQ(c["tokens"][id.get<size_t>()], text) << id;
      EXPECT_EQ(c["token_type"][id.get<size_t>()], 1) << text;
    }
    for (const Json& a : tokenizer["added_tokens"]) {
      EXPECT_EQ(c["tokens"][a["id"].get<size_t>()], a["content"]);
      EXPECT_EQ(c["token_type"][a["id"].get<size_t>()], a["special"].get<bool>() ? 3 : 4) << a.dump();
    }
    EXPECT_EQ(c["merges"], tokenizer["model"]["merges"]);
  }

  // The check can fail: the base model's file against the merged folder
  // differs exactly in the tensors the adapter changed.
  const fs::path plain = tmp.path() / "base.gguf";
  ProcResult r = RunBurst(
      {"export", "--model", base.string(), "--gguf", "f32", "--out", plain.string(), "--threads", "1"});
  ASSERT_TRUE(r.ok()) << r.Describe();
  std::set<std::string> want;
  for (int64_t i = 0; i < config["num_hidden_layers"].get<int64_t>(); ++i)
    for (const char* t : {"attn_q", "attn_k", "attn_v"})
      want.insert("blk." + std::to_string(i) + "." + t + ".weight");
  EXPECT_EQ(Differing(Check(plain, ref)), want);
}

// The files run in llama.cpp itself and decode, greedily, the tokens Burst
// decodes from the same weights: the layout, the rotary permutation, the
// norms and the tokenizer are all what llama.cpp expects.
TEST(ExportGguf, LlamaCppDecodesWhatBurstDecodes) {
  if (!HaveLlamaCpp()) GTEST_SKIP() << "node-llama-cpp is not installed (scripts/install-npm-deps.sh)";
  TempDir tmp("burst-e2e-gguf-llama");
  const std::vector<std::string> prompts = {"My card was charged twice",
                                            "I can't log in to my account since yesterday's update"};
  constexpr int kTokens = 16;
  std::vector<Json> burst;
  for (const std::string& p : prompts) burst.push_back(BurstGreedy({"--model", "burst-small"}, kTokens, p));
  for (const std::string type : {"f32", "f16", "q8_0"}) {
    SCOPED_TRACE(type);
    const fs::path out = tmp.path() / ("burst-small-" + type + ".gguf");
    ProcResult r = RunBurst(
        {"export", "--model", "burst-small", "--gguf", type, "--out", out.string(), "--threads", "1"});
    ASSERT_TRUE(r.ok()) << r.Describe();
    const Json l = LlamaCpp(out, kTokens, prompts);
    ASSERT_EQ(l["runs"].size(), prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(l["runs"][i]["prompt_token_ids"], burst[i]["prompt_token_ids"]) << prompts[i];
      // Deterministic on both sides; q8_0's rounding has not flipped a token on these prompts.
      EXPECT_EQ(l["runs"][i]["token_ids"], burst[i]["samples"][0]["token_ids"]) << prompts[i];
      EXPECT_EQ(l["runs"][i]["text"], burst[i]["samples"][0]["text"]);
    }
  }

  // A byte-level BPE model with a LoRA on q and k merged in: GPT-2's
  // pre-tokenizer in llama.cpp splits text as Burst does, and the first
  // tokens decoded agree (a tiny model barely trained has near ties later).
  const fs::path base = tmp.path() / "model";
  ASSERT_TRUE(InitTinyModel(base).ok());
  WriteSupportSubset(tmp.path(), 16, 4);
  WriteJsonFile(tmp.path() / "lora.json", {{"model", base.string()},
                                           {"train_file", (tmp.path() / "train.jsonl").string()},
                                           {"method", "lora"},
                                           {"lora", {{"rank", 4}, {"alpha", 8}, {"targets", {"q", "k"}}}},
                                           {"batch_size", 4},
                                           {"learning_rate", 0.01},
                                           {"max_steps", 2},
                                           {"checkpoint_every", 2},
                                           {"seed", 3},
                                           {"threads", 1}});
  ProcResult train = RunBurst(
      {"train", "--config", (tmp.path() / "lora.json").string(), "--out", (tmp.path() / "run").string()});
  ASSERT_TRUE(train.ok()) << train.Describe();
  const fs::path adapter = StepDir(tmp.path() / "run", 2) / "sampler";
  const fs::path out = tmp.path() / "adapted.gguf";
  ProcResult r = RunBurst({"export", "--model", base.string(), "--adapter", adapter.string(), "--gguf", "f32",
                           "--out", out.string(), "--threads", "1"});
  ASSERT_TRUE(r.ok()) << r.Describe();
  const std::vector<std::string> texts = {"Refund my order #12345, it's been 3 weeks!!",
                                          "  two  spaces\nand a line"};
  const Json l = LlamaCpp(out, 3, texts);
  ASSERT_EQ(l["runs"].size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    const Json b = BurstGreedy({"--model", base.string(), "--adapter", adapter.string()}, 3, texts[i]);
    EXPECT_EQ(l["runs"][i]["prompt_token_ids"], b["prompt_token_ids"]) << texts[i];
    EXPECT_EQ(l["runs"][i]["token_ids"][0], b["samples"][0]["token_ids"][0]) << texts[i];
  }
}

}  // namespace
}  // namespace burst::e2e
