// The model catalog: each base model a job, evaluation, sampling call or
// deployment may name, with what Burst allows on it (docs/api.md, "Models").
//
// A model is a Hugging Face folder directly under a model root (a shipped
// model, or one `burst models add` linked into DATA/models). Its catalog
// entry comes from its config.json (architecture, max_position_embeddings,
// size) and from an optional sidecar `<root>/<name>.model.json` that
// narrows it: {"max_seq_len", "methods", "losses", "training_types",
// "lora_ranks", "serverless", "serverless_max_lora_rank",
// "serverless_max_seq_len", "accelerator", "gpu", "description"}; unknown
// sidecar fields are an error naming the file.
//
// Thread-safety: stateless (reads files on each call). Errors: throw
// burst::Error naming the field (param) of the request at fault.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/states.h"
#include "core/status.h"
#include "runtime/gpu_request.h"

namespace burst {

struct ModelInfo {
  std::string id;            // the name jobs use
  std::string path;          // canonical folder (the operator's: never in API answers)
  int64_t created = 0;       // its config.json's modification time (unix seconds; 0 = unknown)
  std::string architecture;  // config.json architectures[0] (or model_type)
  int64_t max_seq_len = 0;
  int64_t parameters = 0;  // from config.json (Llama layout)
  std::vector<std::string> methods = {"supervised", "dpo"};
  std::vector<std::string> losses = {"cross_entropy", "dpo"};
  std::vector<std::string> training_types = {"lora", "full"};
  std::vector<int64_t> lora_ranks = {1, 2, 4, 8, 16, 32, 64};
  bool serverless = true;  // eligible for serverless (per-token) scope
  // Serverless only up to this LoRA rank and sequence length (0: any that
  // the model allows), as Baseten decides eligibility by model, rank and length.
  int64_t serverless_max_lora_rank = 0;
  int64_t serverless_max_seq_len = 0;
  // What its work needs: cpu, or cuda: a GPU, the sidecar's "gpu" (a
  // request as jobs' `gpu`, gpu_request.h; "any" when only the accelerator
  // says cuda). Its sampling calls and loops run on workers on that GPU;
  // jobs, evaluations and deployments on it must ask for a GPU.
  std::string accelerator = "cpu";
  Json gpu;              // GpuRequestJson form; null for cpu
  bool experts = false;  // a mixture of experts
  std::string description;
  std::string error;    // a broken config.json or sidecar: the model takes no work
  Json ToJson() const;  // the /v1/models object
};

// The model folders directly under `root` by the names requests use: a
// folder with a config.json is "NAME"; a folder without one holds models by
// Hub-style names, "ORG/NAME" (root/Qwen/Qwen3-8B, as `huggingface-cli
// download --local-dir` lays a model out), so loops written against Tinker
// name models as they do there. Names sorted; hidden folders skipped.
std::vector<std::pair<std::string, std::filesystem::path>> ModelFolders(const std::filesystem::path& root);
// Whether `name` is a model name (NAME or ORG/NAME: letters, digits, '.',
// '_', '-', not starting with '.'), as opposed to a path.
bool IsModelName(const std::string& name);

// Every model under the roots (the first root wins a name), by name.
std::vector<ModelInfo> LoadCatalog(const std::vector<std::filesystem::path>& roots);
// The entry named `name` (the name a request used; one model folder may be
// registered under several names with different limits), else the one whose
// folder is `dir`, else defaults from dir's config.json. A broken entry is
// a 400 naming "model".
ModelInfo CatalogEntryFor(const std::filesystem::path& dir, const std::vector<std::filesystem::path>& roots,
                          const std::string& name = "");

// Checks a training configuration against the model's entry; a 400 names
// the request field and the allowed values (a model that needs cuda: "model").
void CheckTrainingAgainstCatalog(const ModelInfo& m, const std::string& method_type,
                                 const std::string& training_type, const std::string& loss, int64_t lora_rank,
                                 int64_t max_seq_len);

// A job's, evaluation's or deployment's device against the model's entry:
// a model that runs on a GPU (accelerator cuda) with no `gpu` asked for is
// a 400 naming "gpu".
void CheckDeviceAgainstCatalog(const ModelInfo& m, bool asks_gpu);

// The GPU claims a sampling call or loop on the model in folder `dir`,
// named `name` by its caller, runs on (RuntimeOptions::call_devices): none
// for a CPU model; else its entry's `gpu` (CatalogEntryFor) resolved against
// the pool, in order of preference. A pool that can never give it is
// kInvalidArgument naming "model" and what the pool has.
Result<std::vector<DeviceClaim>> CallDevicesFor(const std::filesystem::path& dir, const std::string& name,
                                                const std::vector<std::filesystem::path>& roots,
                                                const SlotPool& pool);

// A request's "scope" field: none when absent (""), else the scope it
// names; any other name is a 400 (param "scope").
std::optional<BillingScope> AskedScope(const std::string& asked);

// Billing scope (docs/api.md, "Scopes"): `asked` is none (Burst picks) or
// the scope asked for (in the request's field `param`). Returns {scope,
// reason}. Serverless asked for and not eligible is a 400 naming `param`
// with the reason; it never falls back.
struct ScopeChoice {
  BillingScope scope = BillingScope::kDedicated;
  std::string reason;
};
// lora_rank and max_seq_len (0: not applicable) are checked against the
// entry's serverless limits; the reason names the limit.
ScopeChoice ChooseScope(std::optional<BillingScope> asked, const ModelInfo& m,
                        const std::string& training_type, int64_t lora_rank = 0, int64_t max_seq_len = 0,
                        const std::string& param = "scope");

}  // namespace burst
