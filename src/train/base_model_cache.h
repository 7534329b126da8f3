// BaseModelCache: one base model kept loaded between training runs.
//
// A long-lived worker runs many tasks, mostly on the same base model; reading
// and hashing the weights again for each one would dominate short runs. The
// cache holds the tokenizer, the weights and their sha256 of one folder on
// one device, its frozen base in one dtype (float32; bfloat16 on a GPU);
// asking for another replaces it. A cached model is shared, never
// modified: a LoRA run shares its frozen tensors, a full fine-tune clones them
// (train/trainer.h, TrainOptions::models).
//
// Staleness: a folder whose files changed (names, sizes or mtimes) since the
// load is read again, so the cached sha256 and tokenizer describe what is on
// disk; checking costs one listing of the folder.
//
// Thread-safety: every method may be called from any thread. Get calls are
// serialised (one load at a time); loaded() and loads() never wait for a load.
// Errors: Get throws burst::Error from the loaders; the cache is then empty.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "model/llama.h"
#include "model/tokenizer.h"

namespace burst {

struct BaseModel {
  std::filesystem::path dir;  // the folder as passed to Get (resolved)
  std::shared_ptr<const Tokenizer> tokenizer;
  LlamaModel model;    // no LoRA; never modified by users of the cache
  std::string sha256;  // BaseModelSha(dir)
  torch::Device device = torch::kCPU;
  torch::ScalarType dtype = torch::kFloat32;  // of the frozen base (LoadModel)
};

// The dtype a frozen base is held in on `device` for sampling, deployments
// and LoRA runs: bfloat16 on a GPU (half the memory; the GPU computes in
// bfloat16 under autocast anyway), float32 on the CPU.
inline torch::ScalarType FrozenDtypeOn(torch::Device device) {
  return device.is_cuda() ? torch::kBFloat16 : torch::kFloat32;
}

class BaseModelCache {
 public:
  // The cached model when (dir, device, dtype) match and its files are
  // unchanged; otherwise drops the previous one (memory first) and loads dir
  // from disk.
  std::shared_ptr<const BaseModel> Get(const std::filesystem::path& dir, torch::Device device,
                                       torch::ScalarType dtype = torch::kFloat32);
  // How many times a model was read from disk.
  int64_t loads() const;
  // The folder of the warm model, if any.
  std::optional<std::filesystem::path> loaded() const;
  // Drops the warm model (runs holding it keep their reference); waits for a
  // Get in progress.
  void Clear();

 private:
  std::mutex get_mu_;      // serialises Get, held across a load
  mutable std::mutex mu_;  // guards the fields below; never held across a load
  std::shared_ptr<const BaseModel> current_;
  std::filesystem::path key_;  // canonical dir of current_
  std::string stamp_;          // FilesStamp of current_'s folder at load
  int64_t loads_ = 0;
};

// Identity of a base model folder: sha256 over "name:sha256\n" of config.json
// and every file whose name contains ".safetensors", in name order. Checkpoints record it so a
// resume from another base model is refused.
std::string BaseModelSha(const std::filesystem::path& dir);

}  // namespace burst
