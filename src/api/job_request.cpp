#include "api/job_request.h"

#include <cmath>

#include "api/models.h"
#include "api/result_files.h"
#include "api/sample_request.h"
#include "core/checkpoint_names.h"
#include "model/config.h"
#include "model/lora_spec.h"
#include "train/recipe.h"

namespace burst {
namespace fs = std::filesystem;
namespace {

bool IsModelDir(const fs::path& p) { return fs::is_regular_file(p / "config.json"); }

// A name finds a folder directly under a root; a path must lie under one.
fs::path ResolveModel(const std::string& model, const std::vector<fs::path>& roots) {
  if (model.empty()) BadField("model", "required");
  std::string known;
  if (IsModelName(model)) {  // NAME, or Hub-style ORG/NAME (ModelFolders)
    for (const auto& root : roots) {
      if (IsModelDir(root / model)) return fs::weakly_canonical(root / model);
    }
  }
  if (model.find('/') == std::string::npos) {
    const Json models = ListModels(roots);  // a named value: items() of a temporary dangles
    for (const auto& [name, _] : models.items()) known += (known.empty() ? "" : ", ") + name;
    throw Error(
        Code::kInvalidArgument,
        "model: unknown model \"" + model + "\"; this server has: " + (known.empty() ? "none" : known),
        "model");
  }
  fs::path p = fs::weakly_canonical(fs::path(model));
  for (const auto& root : roots) {
    fs::path r = fs::weakly_canonical(root);
    auto rel = p.lexically_relative(r);
    if (!rel.empty() && *rel.begin() != ".." && IsModelDir(p)) return p;
  }
  std::string allowed;
  for (const auto& r : roots) allowed += (allowed.empty() ? "" : ", ") + r.string();
  throw Error(
      Code::kInvalidArgument,
      "model: \"" + model + "\" is not a Hugging Face folder under an allowed model root (" + allowed + ")",
      "model");
}

FileRecord LookupFile(const JobRequestContext& ctx, const std::string& id, const std::string& param) {
  auto f = ctx.md->GetFile(ctx.org_id, id);
  if (!f.ok()) {
    if (f.status().code() == Code::kNotFound) BadField(param, "no file " + id);
    throw Error(f.status());
  }
  if (f.value().purpose != "fine-tune") {  // a batch's input or output is not training data
    BadField(param, "file " + id + " has purpose \"" + f.value().purpose +
                        "\"; jobs and evaluations read files uploaded with purpose \"fine-tune\"");
  }
  return f.value();
}

// A hyperparameter: absent, "auto", or a number. Returns null for the first two.
Json Hyper(FieldReader& f, const std::string& key, bool integer) {
  Json v = f.Raw(key);
  if (v.is_null() || v == "auto") return Json();
  if (integer ? !v.is_number_integer() : !v.is_number()) {
    BadField(f.Path(key), std::string("must be ") + (integer ? "an integer" : "a number") + " or \"auto\"");
  }
  return v;
}

// Puts `value` at recipe[key] unless the recipe already holds another value.
void Set(Json& recipe, const std::string& key, const Json& value, const std::string& from) {
  if (recipe.contains(key) && recipe[key] != value) {
    BadField("recipe." + key,
             "is " + recipe[key].dump() + " but " + from + " is " + value.dump() + "; give one of them");
  }
  recipe[key] = value;
}

}  // namespace

GpuRequest CheckGpuField(FieldReader& f, const JobRequestContext& ctx, int64_t workers) {
  GpuRequest gpu = ParseGpuRequest(f.Raw("gpu"), "gpu");
  if (gpu.Asks()) ResolveGpuRequest(gpu, ctx.pool, workers, "gpu");
  return gpu;
}

Json ListModels(const std::vector<fs::path>& roots) {
  Json out = Json::object();
  for (const auto& root : roots) {
    std::error_code ec;
    if (!fs::is_directory(root, ec)) continue;
    for (const auto& [name, dir] : ModelFolders(root))
      if (!out.contains(name)) out[name] = fs::weakly_canonical(dir).string();
  }
  return out;
}

ParsedJob ParseJobRequest(const Json& body, const JobRequestContext& ctx) {
  if (!body.is_object()) BadField("body", "must be a JSON object");
  FieldReader f(body, "");
  const std::string model = f.String("model", "");
  const std::string training_file = f.String("training_file", "");
  if (training_file.empty()) BadField("training_file", "required (a file id from POST /v1/files)");
  Json validation = f.Raw("validation_file");
  if (!validation.is_null() && !validation.is_string())
    BadField("validation_file", "must be a file id or null");
  const std::string validation_file = validation.is_string() ? validation.get<std::string>() : "";
  Json suffix = f.Raw("suffix");
  if (suffix.is_string() && suffix.get<std::string>().empty()) suffix = Json();
  if (!suffix.is_null() && (!suffix.is_string() || !ValidSuffix(suffix.get<std::string>()))) {
    BadField("suffix",
             "must be 1..64 letters, digits, '.', '_' or '-' (it becomes part of the model name, "
             "JOB:SUFFIX:step-N)");
  }
  Json seed = f.Raw("seed");
  if (!seed.is_null() && !seed.is_number_integer()) BadField("seed", "must be an integer");
  Json metadata = f.Raw("metadata");
  if (!metadata.is_null()) {
    if (!metadata.is_object() || metadata.size() > 16)
      BadField("metadata", "must be an object of at most 16 strings");
    for (auto it = metadata.begin(); it != metadata.end(); ++it) {
      if (!it->is_string() || it.key().size() > 64 || it->get<std::string>().size() > 512) {
        BadField("metadata." + it.key(), "keys are strings of at most 64 characters, values of at most 512");
      }
    }
  }
  // OpenAI's integrations (Weights & Biases): none yet, said plainly
  // rather than dropped silently. An empty list passes.
  Json integrations = f.Raw("integrations");
  if (!integrations.is_null() && !(integrations.is_array() && integrations.empty())) {
    BadField("integrations",
             "Burst has no integrations yet; its loss curves are at GET "
             "/v1/fine_tuning/jobs/{id}/events and in the job's metrics.jsonl");
  }
  const std::string scope_asked = f.String("scope", "");
  Json recipe = f.Raw("recipe");
  if (recipe.is_null()) recipe = Json::object();
  if (!recipe.is_object()) BadField("recipe", "must be an object of recipe fields (docs/recipe.md)");
  for (const char* k : {"model", "train_file", "valid_file"}) {
    if (recipe.contains(k)) {
      BadField(std::string("recipe.") + k, std::string("comes from the job's ") +
                                               (std::string(k) == "model"        ? "model"
                                                : std::string(k) == "train_file" ? "training_file"
                                                                                 : "validation_file") +
                                               " field");
    }
  }
  const int64_t max_retries = f.Int("max_retries", 3);
  if (max_retries < 0 || max_retries > 100) BadField("max_retries", "must be in 0..100");
  const double timeout_s = f.Number("timeout_s", 0);
  if (timeout_s < 0 || !std::isfinite(timeout_s) || timeout_s > 30 * 86400.0) {
    BadField("timeout_s", "must be a number of seconds in 0..2592000 (30 days; 0 = none)");
  }
  if (f.Has("checkpoint_every")) {
    Set(recipe, "checkpoint_every", f.Int("checkpoint_every", 0), "checkpoint_every");
  }
  // One job on many workers: each takes grad_accum of a step's micro-batches.
  const int64_t workers = f.Int("workers", 1);
  if (workers < 1 || workers > 64) BadField("workers", "must be in 1..64");
  // On GPUs the pool's GPUs bound the workers; on CPU slots its slots.
  const GpuRequest gpu = CheckGpuField(f, ctx, workers);
  if (!gpu.Asks() && ctx.max_workers > 0 && workers > ctx.max_workers) {
    BadField("workers", "this server runs at most " + std::to_string(ctx.max_workers) +
                            " workers at once (burst serve --slots)");
  }
  const int64_t average_every = f.Int("average_every", 0);
  if (average_every < 0 || average_every > 1'000'000) BadField("average_every", "must be in 0..1000000");
  if (average_every > 0 && workers < 2) {
    BadField("average_every", "model averaging needs \"workers\" of 2 or more");
  }
  const std::string communication = f.String("communication", "auto");
  if (communication != "auto" && communication != "c10d" && communication != "store") {
    BadField("communication",
             "must be \"auto\", \"c10d\" (workers that reach each other) or \"store\" "
             "(gradients through the object store)");
  }

  // method: {type, supervised|dpo: {hyperparameters}} or the older top-level hyperparameters.
  std::string method_type = "supervised";
  Json hp_obj = Json::object();
  Json method = f.Raw("method");
  if (!method.is_null()) {
    if (!method.is_object()) BadField("method", "must be an object");
    FieldReader m(method, "method");
    method_type = m.String("type", "supervised");
    if (method_type != "supervised" && method_type != "dpo") {
      BadField("method.type", "must be \"supervised\" or \"dpo\" (got \"" + method_type + "\")");
    }
    for (const std::string t : {"supervised", "dpo"}) {
      Json part = m.Raw(t);
      if (part.is_null()) continue;
      if (t != method_type) BadField("method." + t, "does not match method.type \"" + method_type + "\"");
      if (!part.is_object()) BadField("method." + t, "must be an object");
      FieldReader p(part, "method." + t);
      Json h = p.Raw("hyperparameters");
      if (!h.is_null()) hp_obj = h;
      p.RejectUnknown();
    }
    m.RejectUnknown();
  }
  std::string hp_path = "method." + method_type + ".hyperparameters";
  Json legacy = f.Raw("hyperparameters");
  if (!legacy.is_null()) {
    if (!hp_obj.empty())
      BadField("hyperparameters", "give hyperparameters in method." + method_type + " only");
    hp_obj = legacy;
    hp_path = "hyperparameters";
  }
  f.RejectUnknown();
  if (!hp_obj.is_object()) BadField(hp_path, "must be an object");
  FieldReader h(hp_obj, hp_path);
  Json n_epochs = Hyper(h, "n_epochs", true);
  Json batch_size = Hyper(h, "batch_size", true);
  Json lr_mult = Hyper(h, "learning_rate_multiplier", false);
  Json beta = method_type == "dpo" ? Hyper(h, "beta", false) : Json();
  h.RejectUnknown();

  // Files, in the caller's organisation, of the kind the method trains on.
  FileRecord train = LookupFile(ctx, training_file, "training_file");
  const bool want_pref = method_type == "dpo";
  const bool is_pref = train.format.rfind("preference", 0) == 0;
  if (want_pref != is_pref) {
    BadField("training_file", training_file + " holds " + train.format + " examples; method " + method_type +
                                  " needs " +
                                  (want_pref ? "preference pairs" : "messages, prompt/completion or text"));
  }
  FileRecord valid;
  if (!validation_file.empty()) {
    valid = LookupFile(ctx, validation_file, "validation_file");
    if (valid.format.rfind("preference", 0) == 0) {
      BadField("validation_file",
               validation_file + " holds preference pairs; evaluation needs supervised examples");
    }
  }
  const fs::path model_dir = ResolveModel(model, ctx.model_roots);

  // The recipe: hyperparameters mapped onto it, then checked by the engine's parser.
  if (!n_epochs.is_null()) Set(recipe, "epochs", n_epochs, hp_path + ".n_epochs");
  if (!batch_size.is_null()) Set(recipe, "batch_size", batch_size, hp_path + ".batch_size");
  if (!seed.is_null()) Set(recipe, "seed", seed, "seed");
  if (want_pref) Set(recipe, "loss", "dpo", "method.type");
  if (!beta.is_null()) Set(recipe, "dpo_beta", beta, hp_path + ".beta");
  if (recipe.contains("threads") && recipe["threads"] != ctx.threads_per_slot) {
    BadField("recipe.threads",
             "this server's slots run " + std::to_string(ctx.threads_per_slot) +
                 " threads each (--threads-per-slot); a job runs where its thread count matches");
  }
  recipe["threads"] = ctx.threads_per_slot;
  // The device follows the slot: a CPU slot, or the GPUs `gpu` asks for.
  const std::string device = gpu.Asks() ? "cuda" : "cpu";
  if (recipe.contains("device") && recipe["device"] != device && recipe["device"] != "auto") {
    BadField("recipe.device", gpu.Asks()
                                  ? "a job that asks for a GPU trains on it (\"cuda\"); leave device out"
                                  : "a job without \"gpu\" runs on a CPU slot; ask for a GPU with "
                                    "\"gpu\": \"h100\" (or another type of this server's pool)");
  }
  recipe["device"] = device;
  // With a validation file every checkpoint is evaluated (its metrics carry
  // the held-out loss and accuracies beside the baseline at step 0), unless
  // the recipe sets its own cadence.
  if (!validation_file.empty() && !recipe.contains("eval_every") && recipe.contains("checkpoint_every")) {
    recipe["eval_every"] = recipe["checkpoint_every"];
  }
  const std::string recipe_method = recipe.value("method", std::string("lora"));
  if (!lr_mult.is_null()) {
    if (lr_mult.get<double>() <= 0) BadField(hp_path + ".learning_rate_multiplier", "must be positive");
    Set(recipe, "learning_rate", lr_mult.get<double>() * Recipe::DefaultLearningRate(recipe_method),
        hp_path + ".learning_rate_multiplier");
  }
  Json full = recipe;
  full["model"] = model_dir.string();
  full["train_file"] = "/dev/null/train.jsonl";  // the worker's local copy goes here
  if (!validation_file.empty()) full["valid_file"] = "/dev/null/valid.jsonl";
  Recipe r;
  try {
    r = Recipe::Parse(full, "/", "recipe");
  } catch (const Error& e) {
    const Status& s = e.status();
    std::string param = s.param().empty() ? "recipe" : "recipe." + s.param();
    throw Error(Code::kInvalidArgument, s.message(), param);
  }
  Json resolved = Json::parse(r.ToJson().dump());
  resolved.erase("train_file");
  resolved.erase("valid_file");
  const ModelInfo entry = CatalogEntryFor(model_dir, ctx.model_roots, model);
  CheckDeviceAgainstCatalog(entry, gpu.Asks());
  CheckTrainingAgainstCatalog(entry, method_type, r.method, r.loss, r.lora.rank, r.max_seq_len);
  if (r.method == "lora" && entry.experts) {
    if (Status s = CheckExpertLora(LoadConfig(model_dir), r.lora, "recipe.lora.targets"); !s.ok()) {
      throw Error(Code::kInvalidArgument, s.message(),
                  s.param() == "lora.dropout" ? "recipe.lora.dropout" : s.param());
    }
  }
  const ScopeChoice scope = ChooseScope(AskedScope(scope_asked), entry, r.method,
                                        r.method == "lora" ? r.lora.rank : 0, r.max_seq_len);

  ParsedJob out;
  const int64_t items = train.examples;
  const int64_t micro = (items + r.batch_size - 1) / r.batch_size;
  const int64_t per_epoch = (micro + r.grad_accum * workers - 1) / (r.grad_accum * workers);
  out.total_steps = per_epoch * r.epochs;
  if (r.max_steps) out.total_steps = std::min(out.total_steps, *r.max_steps);
  const double default_lr = Recipe::DefaultLearningRate(r.method);
  out.spec = {{"kind", ToString(TaskKind::kTrain)},
              {"model", model},
              {"base_model", model_dir.string()},
              {"training_file", training_file},
              {"validation_file", validation_file.empty() ? Json() : Json(validation_file)},
              {"train_key", train.object_key},
              {"valid_key", validation_file.empty() ? "" : valid.object_key},
              {"method", {{"type", method_type}}},
              {"hyperparameters",
               {{"n_epochs", r.epochs},
                {"batch_size", r.batch_size},
                {"learning_rate_multiplier", r.learning_rate / default_lr}}},
              {"suffix", suffix},
              {"seed", static_cast<int64_t>(r.seed)},
              {"metadata", metadata.is_null() ? Json::object() : metadata},
              {"recipe", resolved},
              {"max_retries", max_retries},
              {"timeout_s", timeout_s},
              {"workers", workers},
              {"communication", communication},
              {"average_every", average_every},
              {"total_steps", out.total_steps},
              {"scope", ToString(scope.scope)},
              {"scope_reason", scope.reason}};
  if (gpu.Asks()) out.spec["gpu"] = GpuRequestJson(gpu);
  out.spec["method"][method_type] = {{"hyperparameters", out.spec["hyperparameters"]}};
  if (want_pref) out.spec["method"]["dpo"]["hyperparameters"]["beta"] = r.dpo_beta;
  return out;
}

Json JobJson(const JobRecord& job, const std::vector<AttemptRecord>& attempts, const UsageSum& usage) {
  const Json& s = job.spec;
  Json atts = Json::array();
  for (const auto& a : attempts) {
    atts.push_back({{"attempt", a.attempt},
                    {"worker", a.worker_id},
                    {"started_at", static_cast<double>(a.started_ms) / 1000.0},
                    {"ended_at", a.ended_ms ? Json(static_cast<double>(a.ended_ms) / 1000.0) : Json()},
                    {"outcome", a.outcome ? Json(ToString(*a.outcome)) : Json()},
                    {"error", a.error},
                    {"resumed_from_step", a.resumed_from},
                    {"queued_s", static_cast<double>(a.queued_ms) / 1000.0},
                    {"startup_s", static_cast<double>(a.startup_ms) / 1000.0}});
  }
  return {{"object", "fine_tuning.job"},
          {"id", job.id},
          {"model", s.value("model", "")},
          {"organization_id", job.org_id},
          {"created_at", job.created_at},
          {"started_at", job.started_at ? Json(job.started_at) : Json()},
          {"finished_at", job.finished_at ? Json(job.finished_at) : Json()},
          {"status", ToString(job.status)},
          {"training_file", s.value("training_file", "")},
          {"validation_file", s.value("validation_file", Json())},
          {"hyperparameters", s.value("hyperparameters", Json::object())},
          {"method", s.value("method", Json::object())},
          {"seed", s.value("seed", Json())},
          {"suffix", s.value("suffix", Json())},
          {"user_provided_suffix", s.value("suffix", Json())},
          {"metadata", s.value("metadata", Json::object())},
          {"sweep_id", s.value("sweep_id", Json())},
          {"fine_tuned_model", job.fine_tuned_model.empty() ? Json() : Json(job.fine_tuned_model)},
          {"trained_tokens", job.trained_tokens ? Json(job.trained_tokens) : Json()},
          {"error", job.error},
          {"result", job.result},
          // Its step metrics as CSV (api/result_files.h), once it has succeeded.
          {"result_files",
           job.status == JobStatus::kSucceeded ? Json::array({ResultFileId(job.id)}) : Json::array()},
          {"integrations", Json::array()},
          {"estimated_finish", Json()},
          {"recipe", s.value("recipe", Json::object())},
          {"max_retries", s.value("max_retries", 3)},
          {"timeout_s", s.value("timeout_s", 0.0)},
          {"workers", s.value("workers", int64_t{1})},
          {"gpu", s.value("gpu", Json())},
          {"communication", s.value("communication", "auto")},
          {"average_every", s.value("average_every", int64_t{0})},
          {"step", job.step},
          {"total_steps", job.total_steps ? job.total_steps : s.value("total_steps", int64_t{0})},
          {"attempts", atts},
          {"scope", ToString(RecordedScope(s, "job " + job.id).ValueOrThrow())},
          {"scope_reason", s.value("scope_reason", "")},
          {"usage", {{"seconds", usage.seconds}, {"cost", usage.cost}, {"tokens", usage.tokens}}}};
}

ParsedJob ParseEvalRequest(const Json& body, const JobRequestContext& ctx) {
  if (!body.is_object()) BadField("body", "must be a JSON object");
  FieldReader f(body, "");
  const std::string model = f.String("model", "");
  if (model.empty()) BadField("model", "required: a checkpoint (JOB:step-N or ftckpt-...) or a model name");
  const std::string file = f.String("file", "");
  if (file.empty()) BadField("file", "required: the id of an uploaded JSONL file (POST /v1/files)");
  const long long max_seq_len = f.Int("max_seq_len", 512);
  if (max_seq_len < 8 || max_seq_len > 32768) BadField("max_seq_len", "must be between 8 and 32768");
  const long long batch = f.Int("batch_size", 8);
  if (batch < 1 || batch > 256) BadField("batch_size", "must be between 1 and 256");
  f.Raw("suffix");  // accepted for symmetry with jobs; unused
  const std::string scope_asked = f.String("scope", "");
  const GpuRequest gpu = CheckGpuField(f, ctx, 1);
  f.RejectUnknown();
  const FileRecord data = LookupFile(ctx, file, "file");
  const SampleTarget t = ResolveSampleModel(model, ctx.org_id, *ctx.md, ctx.model_roots, ctx.store);
  const ModelInfo entry = CatalogEntryFor(t.base_model, ctx.model_roots);
  CheckDeviceAgainstCatalog(entry, gpu.Asks());
  if (max_seq_len > entry.max_seq_len) {
    BadField("max_seq_len", std::to_string(max_seq_len) + " is over the limit for model " + entry.id +
                                "; allowed: 8 to " + std::to_string(entry.max_seq_len));
  }
  const ScopeChoice scope =
      ChooseScope(AskedScope(scope_asked), entry, t.full ? "full" : "lora", 0, max_seq_len);
  ParsedJob out;
  out.spec = {{"kind", ToString(TaskKind::kEval)},
              {"model", model},
              {"base_model", t.base_model},
              {"checkpoint_prefix", t.checkpoint_prefix},
              {"full", t.full},
              {"eval_file", file},
              {"eval_key", data.object_key},
              {"max_seq_len", max_seq_len},
              {"batch_size", batch},
              {"max_retries", 3},
              {"scope", ToString(scope.scope)},
              {"scope_reason", scope.reason}};
  if (gpu.Asks()) out.spec["gpu"] = GpuRequestJson(gpu);
  return out;
}

Json EvalJson(const JobRecord& job, const UsageSum& usage) {
  const Json& s = job.spec;
  const Json& r = job.result;
  const std::string prefix = s.value("checkpoint_prefix", "");
  return {{"id", job.id},
          {"object", "eval"},
          {"status", ToString(job.status)},
          {"created_at", job.created_at},
          {"finished_at", job.finished_at ? Json(job.finished_at) : Json()},
          {"model", s.value("model", "")},
          {"base_model", s.value("base_model", "")},
          {"checkpoint", prefix.empty() ? Json() : Json(s.value("model", ""))},
          {"adapter", prefix.empty()           ? "none"
                      : s.value("full", false) ? "full weights"
                                               : "lora"},
          {"file", s.value("eval_file", "")},
          {"gpu", s.value("gpu", Json())},
          {"dataset_sha256", r.is_object() ? r.value("dataset_sha256", Json()) : Json()},
          {"metrics", r.is_object() ? r.value("metrics", Json()) : Json()},
          {"error", job.error.is_object() ? job.error : Json()},
          {"scope", ToString(RecordedScope(s, "evaluation " + job.id).ValueOrThrow())},
          {"scope_reason", s.value("scope_reason", "")},
          {"usage",
           {{"seconds", usage.seconds},
            {"cost", usage.cost},
            {"tokens", usage.tokens},
            {"line", ToString(UsageLine::kEvaluation)}}}};
}

}  // namespace burst
