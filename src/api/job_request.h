// A fine-tuning job request, checked and resolved (docs/api.md, "Fine-tuning
// jobs").
//
// ParseJobRequest turns a POST /v1/fine_tuning/jobs body into the job's spec:
// OpenAI's fields mapped onto the engine's recipe, the recipe checked by the
// same parser `burst train` uses (errors name "recipe.lora.rank" and the
// like), the model resolved under the allowed roots, the files looked up in
// the caller's organisation. Nothing is created here; an error throws
// burst::Error (kInvalidArgument or kNotFound) naming the field.
//
// Thread-safety: stateless.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/json.h"
#include "db/metadata.h"
#include "runtime/gpu_request.h"

namespace burst {

class ObjectStore;

struct JobRequestContext {
  std::string org_id;
  Metadata* md = nullptr;
  std::vector<std::filesystem::path> model_roots;  // where a model may be read from
  int threads_per_slot = 1;
  const ObjectStore* store = nullptr;  // reads a training loop's checkpoints (tinker:// names)
  int max_workers = 0;                 // a job's "workers" at most (the server's slots; 0 = not checked)
  SlotPool pool;                       // what `gpu` is checked against
};

// The resolved spec (stored as JobRecord::spec) and its total steps.
struct ParsedJob {
  Json spec;
  int64_t total_steps = 0;
};

ParsedJob ParseJobRequest(const Json& body, const JobRequestContext& ctx);

// The request's `gpu` (gpu_request.h), checked against this server's pool
// for `workers` workers at once: a GPU no slot can ever give is refused,
// never replaced by a CPU.
GpuRequest CheckGpuField(FieldReader& f, const JobRequestContext& ctx, int64_t workers);

// An evaluation as a job of its own (docs/api.md, "Evaluations"): POST
// /v1/evals {model, file, max_seq_len, batch_size}. `model` is anything
// sampling accepts (a checkpoint or a base model), resolved now; the spec's
// kind is "eval" and its time is billed on the usage line "evaluation".
ParsedJob ParseEvalRequest(const Json& body, const JobRequestContext& ctx);

// The eval object: {id, object: "eval", status, model, base_model,
// checkpoint, adapter, file, dataset_sha256, metrics, ...}.
Json EvalJson(const JobRecord& job, const UsageSum& usage);

// The models jobs may name: every folder with a config.json directly under a
// root, by folder name (the first root wins).
Json ListModels(const std::vector<std::filesystem::path>& roots);

// OpenAI's job object plus Burst's fields.
Json JobJson(const JobRecord& job, const std::vector<AttemptRecord>& attempts, const UsageSum& usage);

}  // namespace burst
