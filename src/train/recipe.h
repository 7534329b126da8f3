// Recipe: one training run's settings (docs/recipe.md; docs/design.md, section 9).
//
// Parse() fills every default, rejects unknown fields and wrong types by
// dotted name ("lora.rank"), and resolves file paths relative to the
// recipe's own folder. ToJson() writes the resolved recipe, which a run
// stores as DIR/recipe.json and compares on --resume.
//
// Thread-safety: a value type. Errors: throw burst::Error (kInvalidArgument).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"
#include "model/lora_spec.h"

namespace burst {

struct Recipe {
  std::string model;  // a Hugging Face folder, or a shipped model's name
  std::string train_file;
  std::string valid_file;  // "" = none
  std::string method = "lora";
  std::string loss = "cross_entropy";
  double dpo_beta = 0.1;
  LoraSpec lora;
  double learning_rate = 0.0;  // 0 in JSON = the method's default
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  double grad_clip = 1.0;
  std::string schedule = "linear";
  int64_t warmup_steps = 0;
  int64_t batch_size = 8;
  int64_t grad_accum = 1;
  int64_t max_seq_len = 512;
  bool truncate = true;
  int64_t epochs = 1;
  std::optional<int64_t> max_steps;
  int64_t checkpoint_every = 0;  // 0 = only at the end
  int64_t keep_last = 3;         // state checkpoints kept; 0 = all
  int64_t eval_every = 0;        // 0 = before training and at the end only
  std::string chat_template = "auto";
  // Variables for the model's own chat_template ({"enable_thinking": false}),
  // as transformers' apply_chat_template(**kwargs); an object.
  Json template_kwargs = Json::object();
  // Sequence packing: a micro-batch's examples end to end in one row, no
  // padding (ForwardOptions::seq_lens). Unset: on, except with LoRA dropout,
  // whose masks would be drawn differently from an unpacked run's.
  std::optional<bool> packing;
  // Activation checkpointing (each layer's activations computed again in
  // the backward: less memory, one more forward of time). Unset: on when
  // the estimate of one micro-batch's activations exceeds the free memory
  // (train/activation_memory.h).
  std::optional<bool> activation_checkpointing;
  uint64_t seed = 0;
  int64_t threads = 0;  // 0 = all cores
  std::string device = "auto";
  // The frozen base's dtype in a LoRA run: "auto" (bfloat16 on a GPU,
  // float32 on the CPU), "float32" or "bfloat16" (a GPU only: the CPU's
  // forward computes in float32). A full fine-tune trains its base in float32.
  std::string base_dtype = "auto";

  // Whether the run packs its micro-batches (supervised losses; DPO never).
  bool Packs() const {
    return loss != "dpo" && (packing ? *packing : !(method == "lora" && lora.dropout > 0));
  }

  static double DefaultLearningRate(const std::string& method);
  // `base_dir` resolves relative paths; `where` names the source in errors.
  static Recipe Parse(const Json& j, const std::filesystem::path& base_dir, const std::string& where);
  static Recipe FromFile(const std::filesystem::path& path);
  OrderedJson ToJson() const;
  // Fields that change what training computes (not checkpoint/eval cadence).
  Json TrainingRelevant() const;
};

// Where a `model` name or path points: an existing folder, or a shipped
// model under the models directory (BURST_MODELS_DIR, else the source tree's
// models/). Throws kNotFound listing what was tried.
std::filesystem::path ResolveModelPath(const std::string& model);

}  // namespace burst
