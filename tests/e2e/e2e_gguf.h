// What the GGUF export tests share: the two readers that check a file
// against a Hugging Face folder (tests/reference/gguf_check.py and
// gguf_check.mjs), llama.cpp decoding a file (llama_cpp_run.mjs), and
// Burst's own greedy decoding to compare it with.
#pragma once

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "e2e_util.h"

namespace burst::e2e {

inline bool HaveReader() {
  return fs::exists(SourceDir() / "tests/reference/node_modules/@huggingface/gguf") &&
         std::system("node --version >/dev/null 2>&1") == 0;
}

// The tensors that are not exactly what the Hugging Face folder holds (as
// far as their encoding allows), by name.
inline std::set<std::string> Differing(const Json& check);

inline Json RunChecker(const std::vector<std::string>& args) {
  ProcResult r = Process(args).Wait(120);
  EXPECT_TRUE(r.ok()) << r.Describe();
  Json j = Json::parse(r.out, nullptr, false);
  EXPECT_TRUE(j.is_object()) << r.out.substr(0, 2000);
  return j.is_object() ? j : Json::object();
}

// A file read back against a Hugging Face folder by two readers: the gguf
// Python package (llama.cpp's, tests/reference/gguf_check.py), whose
// answer is returned, and Hugging Face's JavaScript one (gguf_check.mjs),
// which must find the same tensors, shapes and metadata.
inline Json Check(const fs::path& gguf, const fs::path& hf) {
  Json py = RunChecker(
      {BURST_PYTHON, (SourceDir() / "tests/reference/gguf_check.py").string(), gguf.string(), hf.string()});
  Json js = RunChecker({"/usr/bin/env", "node", (SourceDir() / "tests/reference/gguf_check.mjs").string(),
                        gguf.string(), hf.string()});
  EXPECT_EQ(Differing(py), Differing(js));
  // Per tensor what both must agree on (the largest error is summed in
  // another order and may differ in its last bits).
  const auto tensors = [](const Json& check) {
    std::vector<std::string> out;
    for (Json t : check.value("tensors", Json::array())) {
      t.erase("max_err");
      t.erase("max_ref");
      out.push_back(t.dump());
    }
    return out;
  };
  const std::vector<std::string> py_tensors = tensors(py), js_tensors = tensors(js);
  EXPECT_EQ(py_tensors, js_tensors) << "the two readers disagree on the tensors";
  EXPECT_EQ(py.value("tokens", Json()), js.value("tokens", Json()));
  EXPECT_EQ(py.value("merges", Json()), js.value("merges", Json()));
  return py;
}

// The tensors that are not exactly what the Hugging Face folder holds (as
// far as their encoding allows), by name.
inline std::set<std::string> Differing(const Json& check) {
  std::set<std::string> out;
  for (const Json& t : check["tensors"]) {
    if (t["name"] == "rope_freqs.weight") continue;
    if (!t.value("within_bound", false) || !t.value("shape_matches", false) || !t.value("aligned", false))
      out.insert(t["name"].get<std::string>());
  }
  return out;
}

inline bool HaveLlamaCpp() {
  return fs::exists(SourceDir() / "tests/reference/node_modules/node-llama-cpp") &&
         fs::exists(SourceDir() / "tests/reference/node_modules/@node-llama-cpp/linux-x64") &&
         std::system("node --version >/dev/null 2>&1") == 0;
}

// Greedy decoding of each prompt in llama.cpp itself (llama_cpp_run.mjs).
inline Json LlamaCpp(const fs::path& gguf, int max_tokens, const std::vector<std::string>& prompts) {
  std::vector<std::string> args = {"/usr/bin/env", "node",
                                   (SourceDir() / "tests/reference/llama_cpp_run.mjs").string(),
                                   gguf.string(), std::to_string(max_tokens)};
  args.insert(args.end(), prompts.begin(), prompts.end());
  ProcResult r = Process(args).Wait(180);
  EXPECT_TRUE(r.ok()) << r.Describe();
  Json j = Json::parse(r.out, nullptr, false);
  EXPECT_TRUE(j.is_object()) << r.out.substr(0, 2000);
  if (!j.is_object()) return Json::object();
  EXPECT_TRUE(j["log"].empty()) << "llama.cpp warned about the file: " << j["log"].dump(1);
  return j;
}

// The same in Burst: `burst sample --temperature 0 --json`.
inline Json BurstGreedy(const std::vector<std::string>& model_args, int max_tokens,
                        const std::string& prompt) {
  std::vector<std::string> args = {"sample"};
  args.insert(args.end(), model_args.begin(), model_args.end());
  args.insert(args.end(), {"--prompt", prompt, "--temperature", "0", "--max-tokens",
                           std::to_string(max_tokens), "--json", "--threads", "1"});
  ProcResult r = RunBurst(args);
  EXPECT_TRUE(r.ok()) << r.Describe();
  Json j = Json::parse(r.out, nullptr, false);
  return j.is_object() ? j : Json::object();
}

}  // namespace burst::e2e
