#include "train/recipe.h"

#include <cstdlib>

#include "core/fs.h"
#include "train/chat_template.h"

#ifndef BURST_MODELS_DIR_DEFAULT
#define BURST_MODELS_DIR_DEFAULT ""
#endif

namespace burst {
namespace {

std::string ResolvePath(const std::string& p, const std::filesystem::path& base) {
  if (p.empty()) return p;
  std::filesystem::path path(p);
  if (path.is_absolute()) return path.lexically_normal().string();
  return std::filesystem::absolute(base / path).lexically_normal().string();
}

void Check(bool ok, const std::string& param, const std::string& msg) {
  if (!ok) throw Error(Code::kInvalidArgument, param + ": " + msg, param);
}

}  // namespace

double Recipe::DefaultLearningRate(const std::string& method) { return method == "full" ? 2e-5 : 2e-4; }

std::filesystem::path ResolveModelPath(const std::string& model) {
  if (model.empty()) throw Error(Code::kInvalidArgument, "model is required", "model");
  std::filesystem::path p(model);
  if (std::filesystem::is_directory(p)) return std::filesystem::absolute(p).lexically_normal();
  std::vector<std::filesystem::path> roots;
  if (const char* env = std::getenv("BURST_MODELS_DIR")) roots.emplace_back(env);
  if (!std::string(BURST_MODELS_DIR_DEFAULT).empty()) roots.emplace_back(BURST_MODELS_DIR_DEFAULT);
  std::string tried = p.string();
  if (p.is_relative() && p.has_filename() && !model.empty() && model.find('/') == std::string::npos) {
    for (const auto& root : roots) {
      if (std::filesystem::is_directory(root / p)) return (root / p).lexically_normal();
      tried += ", " + (root / p).string();
    }
  }
  throw Error(Code::kNotFound, "unknown model \"" + model + "\": not a folder (tried " + tried + ")",
              "model");
}

Recipe Recipe::Parse(const Json& j, const std::filesystem::path& base_dir, const std::string& where) {
  Recipe r;
  try {
    FieldReader f(j, "");
    r.model = f.String("model", "");
    Check(!r.model.empty(), "model", "required (a Hugging Face folder or a shipped model name)");
    // A model given as a relative folder path resolves like the data files.
    if (r.model.find('/') != std::string::npos) r.model = ResolvePath(r.model, base_dir);
    r.train_file = ResolvePath(f.String("train_file", ""), base_dir);
    Check(!r.train_file.empty(), "train_file", "required (a JSONL file)");
    r.valid_file = ResolvePath(f.String("valid_file", ""), base_dir);
    r.method = f.String("method", "lora");
    Check(r.method == "lora" || r.method == "full", "method", "must be \"lora\" or \"full\"");
    r.loss = f.String("loss", "cross_entropy");
    Check(r.loss == "cross_entropy" || r.loss == "dpo", "loss", "must be \"cross_entropy\" or \"dpo\"");
    r.dpo_beta = f.Number("dpo_beta", 0.1);
    Check(r.dpo_beta > 0, "dpo_beta", "must be positive");
    Json lora = f.Raw("lora");
    if (!lora.is_null()) {
      FieldReader l(lora, "lora");
      r.lora.rank = l.Int("rank", 8);
      Check(r.lora.rank > 0, "lora.rank", "must be positive");
      r.lora.alpha = l.Number("alpha", 16.0);
      r.lora.dropout = l.Number("dropout", 0.0);
      Check(r.lora.dropout >= 0 && r.lora.dropout < 1, "lora.dropout", "must be in [0, 1)");
      Json targets = l.Raw("targets");
      if (!targets.is_null()) {
        Check(targets.is_array() && !targets.empty(), "lora.targets",
              "must be a non-empty list such as [\"q\", \"v\"]");
        r.lora.targets.clear();
        for (const auto& t : targets) {
          Check(t.is_string(), "lora.targets", "entries must be strings");
          std::string name = NormalizeLoraTarget(t.get<std::string>(), "lora.targets");
          bool dup = false;
          for (const auto& e : r.lora.targets) dup |= e == name;
          if (!dup) r.lora.targets.push_back(name);
        }
      }
      l.RejectUnknown();
    }
    r.learning_rate = f.Number("learning_rate", 0.0);
    if (r.learning_rate == 0.0) r.learning_rate = DefaultLearningRate(r.method);
    Check(r.learning_rate > 0, "learning_rate", "must be positive");
    Json opt = f.Raw("optimizer");
    if (!opt.is_null()) {
      FieldReader o(opt, "optimizer");
      Json betas = o.Raw("betas");
      if (!betas.is_null()) {
        Check(betas.is_array() && betas.size() == 2 && betas[0].is_number() && betas[1].is_number(),
              "optimizer.betas", "must be two numbers, e.g. [0.9, 0.999]");
        r.beta1 = betas[0].get<double>();
        r.beta2 = betas[1].get<double>();
        Check(r.beta1 >= 0 && r.beta1 < 1 && r.beta2 >= 0 && r.beta2 < 1, "optimizer.betas",
              "each must be in [0, 1)");
      }
      r.eps = o.Number("eps", 1e-8);
      r.weight_decay = o.Number("weight_decay", 0.0);
      Check(r.weight_decay >= 0, "optimizer.weight_decay", "must be >= 0");
      o.RejectUnknown();
    }
    r.grad_clip = f.Number("grad_clip", 1.0);
    Check(r.grad_clip >= 0, "grad_clip", "must be >= 0 (0 = off)");
    Json sched = f.Raw("schedule");
    if (!sched.is_null()) {
      FieldReader s(sched, "schedule");
      r.schedule = s.String("kind", "linear");
      Check(r.schedule == "constant" || r.schedule == "linear" || r.schedule == "cosine", "schedule.kind",
            "must be constant, linear or cosine");
      r.warmup_steps = s.Int("warmup_steps", 0);
      Check(r.warmup_steps >= 0, "schedule.warmup_steps", "must be >= 0");
      s.RejectUnknown();
    }
    r.batch_size = f.Int("batch_size", 8);
    Check(r.batch_size > 0, "batch_size", "must be positive");
    r.grad_accum = f.Int("grad_accum", 1);
    Check(r.grad_accum > 0, "grad_accum", "must be positive");
    r.max_seq_len = f.Int("max_seq_len", 512);
    Check(r.max_seq_len > 1, "max_seq_len", "must be at least 2");
    r.truncate = f.Bool("truncate", true);
    r.epochs = f.Int("epochs", 1);
    Check(r.epochs > 0, "epochs", "must be positive");
    if (f.Has("max_steps")) {
      r.max_steps = f.Int("max_steps", 0);
      Check(*r.max_steps > 0, "max_steps", "must be positive or null");
    } else {
      f.Raw("max_steps");
    }
    r.checkpoint_every = f.Int("checkpoint_every", 0);
    Check(r.checkpoint_every >= 0, "checkpoint_every", "must be >= 0");
    r.keep_last = f.Int("keep_last", 3);
    Check(r.keep_last >= 0, "keep_last", "must be >= 0 (0 = keep all)");
    r.eval_every = f.Int("eval_every", 0);
    Check(r.eval_every >= 0, "eval_every", "must be >= 0");
    r.chat_template = f.String("template", "auto");
    Check(r.chat_template == "auto" || r.chat_template == "model" || r.chat_template == "llama3" ||
              r.chat_template == "chatml",
          "template", "must be auto, model, llama3 or chatml");
    if (Json kw = f.Raw("template_kwargs"); !kw.is_null()) {
      CheckTemplateKwargs(kw, "template_kwargs");
      Check(r.chat_template == "auto" || r.chat_template == "model", "template_kwargs",
            "applies to the model's own chat_template (template auto or model)");
      r.template_kwargs = std::move(kw);
    }
    if (Json pk = f.Raw("packing"); !pk.is_null()) {
      Check(pk.is_boolean(), "packing", "must be true or false (null: on, except with LoRA dropout)");
      r.packing = pk.get<bool>();
    }
    if (Json ac = f.Raw("activation_checkpointing"); !ac.is_null()) {
      Check(ac.is_boolean(), "activation_checkpointing",
            "must be true or false (null: on when the activations would not fit in free memory)");
      r.activation_checkpointing = ac.get<bool>();
    }
    long long seed = f.Int("seed", 0);
    Check(seed >= 0, "seed", "must be >= 0");
    r.seed = static_cast<uint64_t>(seed);
    r.threads = f.Int("threads", 0);
    Check(r.threads >= 0, "threads", "must be >= 0 (0 = all cores)");
    r.device = f.String("device", "auto");
    Check(r.device == "auto" || r.device == "cpu" || r.device == "cuda", "device",
          "must be cpu, cuda or auto");
    r.base_dtype = f.String("base_dtype", "auto");
    Check(r.base_dtype == "auto" || r.base_dtype == "float32" || r.base_dtype == "bfloat16", "base_dtype",
          "must be auto, float32 or bfloat16");
    if (r.base_dtype == "bfloat16") {
      Check(r.method == "lora", "base_dtype",
            "bfloat16 is for a LoRA run's frozen base (a full fine-tune trains it in float32)");
      Check(r.device != "cpu", "base_dtype",
            "bfloat16 needs a GPU (device cuda or auto): the CPU computes in float32");
    }
    f.RejectUnknown();
  } catch (const Error& e) {
    const Status& s = e.status();
    throw Error(s.code(), where + ": " + s.message(), s.param());
  }
  return r;
}

Recipe Recipe::FromFile(const std::filesystem::path& path) {
  Json j = ParseJson(ReadFile(path), path.string());
  return Parse(j, std::filesystem::absolute(path).parent_path(), path.string());
}

OrderedJson Recipe::ToJson() const {
  OrderedJson j;
  j["model"] = model;
  j["train_file"] = train_file;
  j["valid_file"] = valid_file.empty() ? OrderedJson() : OrderedJson(valid_file);
  j["method"] = method;
  j["loss"] = loss;
  j["dpo_beta"] = dpo_beta;
  j["lora"] = {
      {"rank", lora.rank}, {"alpha", lora.alpha}, {"dropout", lora.dropout}, {"targets", lora.targets}};
  j["learning_rate"] = learning_rate;
  j["optimizer"] = {{"betas", {beta1, beta2}}, {"eps", eps}, {"weight_decay", weight_decay}};
  j["grad_clip"] = grad_clip;
  j["schedule"] = {{"kind", schedule}, {"warmup_steps", warmup_steps}};
  j["batch_size"] = batch_size;
  j["grad_accum"] = grad_accum;
  j["max_seq_len"] = max_seq_len;
  j["truncate"] = truncate;
  j["epochs"] = epochs;
  j["max_steps"] = max_steps ? OrderedJson(*max_steps) : OrderedJson();
  j["checkpoint_every"] = checkpoint_every;
  j["keep_last"] = keep_last;
  j["eval_every"] = eval_every;
  j["template"] = chat_template;
  if (!template_kwargs.empty()) j["template_kwargs"] = OrderedJson::parse(template_kwargs.dump());
  j["packing"] = Packs();
  j["activation_checkpointing"] =
      activation_checkpointing ? OrderedJson(*activation_checkpointing) : OrderedJson();
  j["seed"] = seed;
  j["threads"] = threads;
  j["device"] = device;
  j["base_dtype"] = base_dtype;
  return j;
}

Json Recipe::TrainingRelevant() const {
  Json j = Json::parse(ToJson().dump());
  // Activation checkpointing changes memory and time, never a bit of the
  // result: a run may resume with it switched.
  for (const char* k :
       {"valid_file", "checkpoint_every", "keep_last", "eval_every", "activation_checkpointing"})
    j.erase(k);
  return j;
}

}  // namespace burst
