// `burst export --gguf`: a model (its adapter merged) as one GGUF file for
// llama.cpp and Ollama, laid out as llama.cpp's own converter
// (convert_hf_to_gguf.py) lays out the family: its architecture ("llama"
// for Llama, Mistral and Mixtral, with q/k rows permuted to ggml's rotary
// layout; "qwen2", "qwen3", "qwen3moe", "gemma3"), its tensor names (a
// mixture of experts' weights stacked per projection, Gemma's norms stored
// as the 1 + w they scale by), norms and biases in f32, the tokenizer
// ("llama" from a SentencePiece tokenizer.model, "gpt2" with its
// pre-tokenizer's name from a tokenizer.json) and the chat template.
//
// Errors (burst::Error): kInvalidArgument naming what llama.cpp could not
// be told (a pre-tokenizer it has no name for, a rope_scaling it lacks);
// kUnimplemented naming the field where llama.cpp's architecture would
// compute otherwise (Gemma's layer pattern, Qwen 3 MoE's dense layers);
// I/O errors name the file.
#pragma once

#include <filesystem>
#include <string>

#include "model/gguf.h"
#include "model/llama.h"

namespace burst {

struct GgufExportOptions {
  gguf::TensorType type = gguf::TensorType::kF16;  // of the 2-D weights
  std::string name;                                // general.name
};

// Writes `model` (no LoRA: merge first) and the tokenizer files of
// `tokenizer_dir` to `out`. Returns what was written, one line for the user.
std::string ExportGguf(const LlamaModel& model, const std::filesystem::path& tokenizer_dir,
                       const std::filesystem::path& out, const GgufExportOptions& options);

// "f32", "f16", "q8_0" -> the type; anything else is kInvalidArgument.
gguf::TensorType ParseGgufType(const std::string& name);

}  // namespace burst
