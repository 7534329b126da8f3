// Hugging Face and PEFT folders: loading and saving models and adapters.
//
// A model folder holds config.json and model.safetensors, or shards named
// model-0000k-of-0000n.safetensors listed in model.safetensors.index.json;
// weights may be float32, bfloat16 or float16 (upcast to float32 on load).
// An adapter folder holds PEFT's adapter_config.json and
// adapter_model.safetensors. Every mismatch between config and weights is an
// error naming the file and the tensor; nothing is half-loaded into a model
// that a caller goes on to use.
//
// Thread-safety: stateless functions. Errors: throw burst::Error.
#pragma once

#include <filesystem>
#include <string>

#include "model/llama.h"

namespace burst {

namespace fs = std::filesystem;

// The model in `model_dir` on `device`, its frozen base in `dtype`
// (FreezeBaseAs): float32, or bfloat16 for a frozen base on a GPU (cast
// before it moves, so the GPU never holds a float32 copy).
LlamaModel LoadModel(const fs::path& model_dir, torch::Device device = torch::kCPU,
                     torch::ScalarType dtype = torch::kFloat32);

struct SaveOptions {
  torch::ScalarType dtype = torch::kFloat32;  // stored dtype of weights
  int64_t max_shard_bytes = 0;                // 0: one file; else shard past this size
};
// Writes config.json and the weights (LoRA must be merged first).
void SaveModel(const LlamaModel& model, const fs::path& dir, const SaveOptions& options = {});

// Reads a PEFT adapter into model (replacing any LoRA it had).
void LoadAdapter(LlamaModel& model, const fs::path& adapter_dir);
// Writes adapter_config.json and adapter_model.safetensors.
void SaveAdapter(const LlamaModel& model, const fs::path& dir, const std::string& base_model);

// Copies tokenizer.model / tokenizer.json / tokenizer_config.json /
// special_tokens_map.json / generation_config.json when present.
void CopyTokenizerFiles(const fs::path& from, const fs::path& to);

// Whether a folder looks like a PEFT adapter (adapter_config.json).
bool IsAdapterDir(const fs::path& dir);

}  // namespace burst
