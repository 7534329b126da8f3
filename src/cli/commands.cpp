#include "cli/commands.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <iostream>

#include "cli/control_commands.h"
#include "cli/evals.h"
#include "cli/members.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/status.h"
#include "model/cpu_threads.h"
#include "model/gguf_export.h"
#include "model/hf_io.h"
#include "model/presets.h"
#include "model/sampler.h"
#include "train/chat_template.h"
#include "train/data.h"
#include "train/eval.h"
#include "train/recipe.h"
#include "train/trainer.h"
#include "worker/worker.h"

#ifndef BURST_VERSION
#define BURST_VERSION "0.0.0"
#endif

namespace burst {
namespace {

// ----------------------------------------------------------------------------
// shared pieces

// A model to run: base weights, maybe an adapter, and its tokenizer.
struct LoadedModel {
  LlamaModel model;
  std::unique_ptr<Tokenizer> tokenizer;
  fs::path base_dir;
};

// --model may name a PEFT adapter folder (a LoRA sampler checkpoint): then
// its base model comes from adapter_config.json.
LoadedModel LoadForInference(const std::string& model, const std::string& adapter, const std::string& device,
                             int64_t threads) {
  SetCpuThreads(ResolveThreads(threads));
  LoadedModel out;
  fs::path model_dir = ResolveModelPath(model);
  fs::path adapter_dir = adapter.empty() ? fs::path() : fs::path(adapter);
  if (IsAdapterDir(model_dir)) {
    if (!adapter_dir.empty()) {
      throw Error(Code::kInvalidArgument, model_dir.string() + " is an adapter; pass a base --model",
                  "model");
    }
    adapter_dir = model_dir;
    Json cfg =
        ParseJson(ReadFile(model_dir / "adapter_config.json"), (model_dir / "adapter_config.json").string());
    model_dir = ResolveModelPath(cfg.value("base_model_name_or_path", ""));
  }
  out.base_dir = model_dir;
  const torch::Device where = ResolveDevice(device);
  out.model = LoadModel(model_dir, where, FrozenDtypeOn(where));
  if (!adapter_dir.empty()) LoadAdapter(out.model, adapter_dir);
  out.tokenizer = LoadTokenizer(model_dir);
  return out;
}

std::vector<ChatMessage> ReadMessagesFile(const std::string& path) {
  Json j = ParseJson(ReadFile(path), path);
  if (j.is_object() && j.contains("messages")) j = j["messages"];
  if (!j.is_array()) {
    throw Error(Code::kInvalidArgument, path + ": expected a list of messages or {\"messages\": [...]}",
                path);
  }
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < j.size(); ++i) {
    std::string p = path + ": messages[" + std::to_string(i) + "]";
    if (!j[i].is_object() || !j[i].contains("role") || !j[i].contains("content") ||
        !j[i]["role"].is_string() || !j[i]["content"].is_string()) {
      throw Error(Code::kInvalidArgument, p + " needs string role and content", p);
    }
    ChatMessage m{j[i]["role"].get<std::string>(), j[i]["content"].get<std::string>()};
    if (m.role != "system" && m.role != "user" && m.role != "assistant") {
      throw Error(Code::kInvalidArgument, p + ".role: unknown role \"" + m.role + "\"", p);
    }
    out.push_back(std::move(m));
  }
  return out;
}

// Invalid UTF-8 (a sample cut inside a character) becomes U+FFFD, as HF does.
void PrintJson(const Json& j) {
  std::cout << j.dump(-1, ' ', false, Json::error_handler_t::replace) << std::endl;
}

std::string Fmt(double v, const char* f = "%.4f") {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

std::string FmtOpt(const std::optional<double>& v) { return v ? Fmt(*v) : "-"; }

// ----------------------------------------------------------------------------
// init-model

struct InitModelArgs {
  std::string preset = "small";
  std::string out;
  std::string tokenizer;
  uint64_t seed = 0;
  std::string dtype = "float32";
  int64_t shard_mb = 0;
};

int InitModel(const InitModelArgs& a) {
  fs::path out(a.out);
  if (fs::exists(out / "config.json")) {
    throw Error(Code::kAlreadyExists, out.string() + " already holds a model", out.string());
  }
  std::unique_ptr<Tokenizer> tok;
  fs::path tok_file(a.tokenizer);
  fs::create_directories(out);
  if (!a.tokenizer.empty()) {
    if (!fs::exists(tok_file))
      throw Error(Code::kNotFound, "tokenizer " + a.tokenizer + " does not exist", "tokenizer");
    fs::path src_dir = tok_file.parent_path().empty() ? fs::path(".") : tok_file.parent_path();
    const char* dest = tok_file.extension() == ".json" ? "tokenizer.json" : "tokenizer.model";
    fs::copy_file(tok_file, out / dest, fs::copy_options::overwrite_existing);
    for (const char* extra : {"tokenizer_config.json", "special_tokens_map.json"})
      if (fs::exists(src_dir / extra) && !fs::exists(out / extra))
        fs::copy_file(src_dir / extra, out / extra);
    tok = LoadTokenizer(out);
  }
  LlamaConfig config = PresetConfig(a.preset, tok ? tok->vocab_size() : 0);
  if (tok) {
    if (tok->bos_id) config.bos_token_id = *tok->bos_id;
    for (int id : tok->stop_ids) config.eos_token_ids.push_back(id);
    if (!fs::exists(out / "tokenizer_config.json")) {
      Json tc = {{"model_max_length", config.max_position_embeddings}};
      if (tok->bos_id) tc["bos_token"] = tok->IdToPiece(*tok->bos_id);
      if (tok->eos_id) tc["eos_token"] = tok->IdToPiece(*tok->eos_id);
      if (tok->PieceToId("<|im_start|>")) {
        // ChatML after the tokenizer's BOS, as Burst's own chatml renders it.
        tc["chat_template"] =
            std::string(tok->bos_id ? "{{ bos_token }}" : "") +
            "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
            "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
            "{{ '<|im_start|>assistant\\n' }}{% endif %}";
      }
      WriteFileAtomic(out / "tokenizer_config.json", tc.dump(2) + "\n");
    }
  }
  LlamaModel model = LlamaModel::Random(config, a.seed);
  SaveOptions so;
  so.dtype = a.dtype == "bfloat16"  ? torch::kBFloat16
             : a.dtype == "float16" ? torch::kFloat16
                                    : torch::kFloat32;
  so.max_shard_bytes = a.shard_mb * (1 << 20);
  SaveModel(model, out, so);
  Json gen = {{"do_sample", true}};
  if (config.bos_token_id) gen["bos_token_id"] = *config.bos_token_id;
  if (!config.eos_token_ids.empty()) gen["eos_token_id"] = config.eos_token_ids;
  WriteFileAtomic(out / "generation_config.json", gen.dump(2) + "\n");
  std::printf("wrote %s: preset %s, %lld parameters, vocab %lld\n", out.string().c_str(), a.preset.c_str(),
              static_cast<long long>(config.NumParameters()), static_cast<long long>(config.vocab_size));
  return 0;
}

// ----------------------------------------------------------------------------
// train

int TrainCommand(const std::string& config, const std::string& out, bool resume, bool overwrite, bool json,
                 const MemberArgs& members) {
  Recipe recipe = Recipe::FromFile(config);
  TrainOptions opt;
  opt.resume = resume;
  opt.overwrite = overwrite;
  opt.progress = ::isatty(2) && !json;
  std::unique_ptr<Members> joined = JoinMembers(members, &opt);  // for as long as it trains
  if (!json) {
    std::fprintf(stderr, "burst: training %s (%s) on %s -> %s\n", recipe.model.c_str(), recipe.method.c_str(),
                 recipe.train_file.c_str(), out.c_str());
  }
  TrainResult r = Train(recipe, out, opt);
  Json res = {{"step", r.step},
              {"total_steps", r.total_steps},
              {"interrupted", r.interrupted},
              {"resumed_from", r.resumed ? Json(r.resumed_from) : Json()},
              {"sampler", r.sampler_dir.string()},
              {"state", r.state_dir.string()},
              {"threads", r.threads},
              {"device", r.device},
              {"base_dtype", r.base_dtype},
              {"wall_s", r.wall_s}};
  if (r.baseline) res["baseline"] = r.baseline->ToJson();
  if (r.final_eval) res["final"] = r.final_eval->ToJson();
  if (json) {
    PrintJson(res);
  } else {
    std::printf("%s %lld/%lld steps in %.1fs (%d thread%s, %s)%s\n",
                r.interrupted ? "interrupted after" : "trained", static_cast<long long>(r.step),
                static_cast<long long>(r.total_steps), r.wall_s, r.threads, r.threads == 1 ? "" : "s",
                r.device.c_str(),
                r.resumed ? (" resumed from step " + std::to_string(r.resumed_from)).c_str() : "");
    if (r.baseline || r.final_eval) {
      auto row = [&](const char* name, std::optional<double> b, std::optional<double> f) {
        std::printf("  %-16s %12s %12s\n", name, FmtOpt(b).c_str(), FmtOpt(f).c_str());
      };
      std::printf("  %-16s %12s %12s\n", "held-out eval", "base model", "fine-tuned");
      auto get = [](const std::optional<EvalResult>& e, int which) -> std::optional<double> {
        if (!e) return std::nullopt;
        switch (which) {
          case 0:
            return e->loss;
          case 1:
            return e->token_acc;
          case 2:
            return e->exact_match;
          default:
            return e->label_acc;
        }
      };
      row("loss", get(r.baseline, 0), get(r.final_eval, 0));
      row("token accuracy", get(r.baseline, 1), get(r.final_eval, 1));
      row("exact match", get(r.baseline, 2), get(r.final_eval, 2));
      row("label accuracy", get(r.baseline, 3), get(r.final_eval, 3));
    }
    std::printf("checkpoints:\n  sampler %s\n  state   %s\n", r.sampler_dir.string().c_str(),
                r.state_dir.string().c_str());
    if (r.interrupted)
      std::printf("continue with: burst train --config %s --out %s --resume\n", config.c_str(), out.c_str());
  }
  // 128 + signal, as shells report a process killed by it (130 SIGINT, 143 SIGTERM).
  return r.interrupted ? 128 + (r.signal ? r.signal : SIGINT) : 0;
}

// ----------------------------------------------------------------------------
// eval, sample, tokenize, export, data check

struct ModelArgs {
  std::string model, adapter, device = "auto", chat_template = "auto";
  int64_t threads = 0;
};

void AddModelArgs(CLI::App* cmd, ModelArgs& m, bool with_adapter = true, bool model_required = true) {
  auto* model = cmd->add_option("--model", m.model,
                                model_required ? "Hugging Face folder, shipped model name, or LoRA checkpoint"
                                               : "model whose tokenizer counts tokens (without it: "
                                                 "format check only, as an upload gets)");
  model->envname("BURST_MODEL");
  if (model_required) model->required();
  if (with_adapter) cmd->add_option("--adapter", m.adapter, "PEFT adapter folder");
  cmd->add_option("--device", m.device, "cpu, cuda or auto")->capture_default_str()->envname("BURST_DEVICE");
  cmd->add_option("--threads", m.threads, "CPU threads (0 = all cores)")
      ->capture_default_str()
      ->envname("BURST_THREADS");
  cmd->add_option("--template", m.chat_template,
                  "chat template: auto, model (the model's own), llama3, chatml")
      ->capture_default_str();
}

int EvalCommand(const ModelArgs& m, const std::string& data, int64_t max_seq_len, int64_t batch, bool json) {
  LoadedModel lm = LoadForInference(m.model, m.adapter, m.device, m.threads);
  Dataset ds = LoadSupervised(data, *lm.tokenizer, DataOptions{max_seq_len, true, m.chat_template});
  EvalOptions eo;
  eo.batch_size = batch;
  EvalResult r = Evaluate(lm.model, *lm.tokenizer, ds, eo);
  Json j = r.ToJson();
  j["examples"] = r.examples;
  j["loss_tokens"] = r.loss_tokens;
  j["labels"] = r.labels;
  j["data_sha256"] = ds.sha256;
  if (json) {
    PrintJson(j);
  } else {
    std::printf("examples        %lld (%lld loss tokens)\n", static_cast<long long>(r.examples),
                static_cast<long long>(r.loss_tokens));
    std::printf("loss            %s\ntoken accuracy  %s\nexact match     %s\nlabel accuracy  %s%s\n",
                Fmt(r.loss).c_str(), Fmt(r.token_acc).c_str(), FmtOpt(r.exact_match).c_str(),
                FmtOpt(r.label_acc).c_str(),
                r.labels ? (" (" + std::to_string(r.labels) + " labels)").c_str() : "");
  }
  return 0;
}

std::vector<int> PromptIds(const LoadedModel& lm, const std::string& prompt, const std::string& messages,
                           const std::string& tmpl) {
  if (prompt.empty() == messages.empty()) {
    throw Error(Code::kInvalidArgument, "pass exactly one of --prompt or --messages", "prompt");
  }
  if (!messages.empty()) {
    ChatTemplate t = ResolveChatTemplate(tmpl, *lm.tokenizer);
    return RenderChat(ReadMessagesFile(messages), t, *lm.tokenizer, true, ChatDate::kToday).ids;
  }
  std::vector<int> ids;
  if (lm.tokenizer->bos_id) ids.push_back(*lm.tokenizer->bos_id);
  auto enc = lm.tokenizer->Encode(prompt);
  ids.insert(ids.end(), enc.begin(), enc.end());
  return ids;
}

int SampleCommand(const ModelArgs& m, const std::string& prompt, const std::string& messages, SampleParams p,
                  bool json) {
  LoadedModel lm = LoadForInference(m.model, m.adapter, m.device, m.threads);
  std::vector<int> ids = PromptIds(lm, prompt, messages, m.chat_template);
  if (!messages.empty()) {
    // The template's end-of-turn token ends a sample too.
    int eot = EndOfTurnId(ResolveChatTemplate(m.chat_template, *lm.tokenizer), *lm.tokenizer);
    if (std::find(lm.tokenizer->stop_ids.begin(), lm.tokenizer->stop_ids.end(), eot) ==
        lm.tokenizer->stop_ids.end())
      lm.tokenizer->stop_ids.push_back(eot);
  }
  auto samples = Sample(lm.model, *lm.tokenizer, ids, p);
  if (json) {
    Json out = {{"prompt_token_ids", ids}, {"samples", Json::array()}};
    for (const auto& s : samples) {
      out["samples"].push_back({{"token_ids", s.token_ids},
                                {"logprobs", s.logprobs},
                                {"text", s.text},
                                {"finish_reason", s.finish_reason}});
    }
    PrintJson(out);
  } else {
    for (size_t i = 0; i < samples.size(); ++i) {
      if (samples.size() > 1) std::printf("--- sample %zu (%s)\n", i + 1, samples[i].finish_reason.c_str());
      std::printf("%s\n", samples[i].text.c_str());
    }
  }
  return 0;
}

int TokenizeCommand(const ModelArgs& m, const std::string& text, const std::string& messages, bool json) {
  fs::path dir = ResolveModelPath(m.model);
  auto tok = LoadTokenizer(dir);
  std::vector<int> ids;
  if (text.empty() == messages.empty()) {
    throw Error(Code::kInvalidArgument, "pass exactly one of --text or --messages", "text");
  }
  std::vector<float> weights;
  if (!messages.empty()) {
    ChatTemplate t = ResolveChatTemplate(m.chat_template, *tok);
    auto msgs = ReadMessagesFile(messages);
    bool open = msgs.empty() || msgs.back().role != "assistant";
    RenderedChat r = RenderChat(msgs, t, *tok, open);
    ids = r.ids;
    weights = r.weights;
  } else {
    ids = tok->Encode(text, /*allow_special=*/true);
  }
  std::vector<std::string> pieces;
  for (int id : ids) pieces.push_back(tok->IdToPiece(id));
  if (json) {
    Json j = {{"ids", ids}, {"tokens", pieces}};
    if (!messages.empty()) {
      j["text"] = tok->Decode(ids, false);
      j["loss_mask"] = weights;
    }
    PrintJson(j);
  } else {
    if (!messages.empty()) std::printf("%s\n---\n", tok->Decode(ids, false).c_str());
    for (size_t i = 0; i < ids.size(); ++i)
      std::printf("%6d  %s%s\n", ids[i], Json(pieces[i]).dump().c_str(),
                  !weights.empty() && weights[i] > 0 ? "  (trained)" : "");
  }
  return 0;
}

int ExportCommand(const ModelArgs& m, const std::string& out, bool merge, const std::string& dtype,
                  const std::string& gguf_type) {
  if (!gguf_type.empty()) {
    // One file for llama.cpp and Ollama; an adapter is always merged into it.
    GgufExportOptions go;
    go.type = ParseGgufType(gguf_type);
    if (fs::is_directory(out))
      throw Error(Code::kInvalidArgument, out + " is a folder; --gguf writes a file", "out");
    if (fs::exists(out))
      throw Error(Code::kAlreadyExists, out + " exists; Burst does not overwrite it", "out");
    LoadedModel lm = LoadForInference(m.model, m.adapter, "cpu", m.threads);
    lm.model.MergeLora();
    // general.name: the model's folder, and the adapter's (a checkpoint's
    // sampler folder by its step's).
    auto last = [](fs::path p) {
      p = p.lexically_normal();
      if (!p.has_filename()) p = p.parent_path();
      if (p.filename() == "sampler") p = p.parent_path();
      return p.filename().string();
    };
    const fs::path adapter = !m.adapter.empty()                        ? fs::path(m.adapter)
                             : IsAdapterDir(ResolveModelPath(m.model)) ? ResolveModelPath(m.model)
                                                                       : fs::path();
    go.name = last(lm.base_dir) + (adapter.empty() ? "" : "+" + last(adapter));
    std::printf("%s\n", ExportGguf(lm.model, lm.base_dir, out, go).c_str());
    return 0;
  }
  if (!merge)
    throw Error(Code::kInvalidArgument, "export writes merged weights: pass --merge (or --gguf TYPE)",
                "merge");
  if (fs::exists(fs::path(out) / "config.json")) {
    throw Error(Code::kAlreadyExists, out + " already holds a model", out);
  }
  LoadedModel lm = LoadForInference(m.model, m.adapter, "cpu", m.threads);
  lm.model.MergeLora();
  SaveOptions so;
  so.dtype = dtype == "bfloat16" ? torch::kBFloat16 : dtype == "float16" ? torch::kFloat16 : torch::kFloat32;
  SaveModel(lm.model, out, so);
  CopyTokenizerFiles(lm.base_dir, out);
  std::printf("wrote %s (merged, %s)\n", out.c_str(), dtype.c_str());
  return 0;
}

int DataCheckCommand(const ModelArgs& m, const std::string& file, int64_t max_seq_len, bool truncate,
                     const std::string& loss, bool json) {
  if (m.model.empty()) {
    DataFileCheck c = CheckDataFile(file);
    Json j = {{"file", file}, {"format", c.format}, {"examples", c.examples}, {"sha256", c.sha256}};
    if (json) {
      PrintJson(j);
    } else {
      std::printf("%s: %s, %lld examples, every line well-formed (pass --model to count tokens)\n",
                  file.c_str(), c.format.c_str(), static_cast<long long>(c.examples));
    }
    return 0;
  }
  fs::path dir = ResolveModelPath(m.model);
  auto tok = LoadTokenizer(dir);
  DataOptions opt{max_seq_len, truncate, m.chat_template};
  Dataset ds = loss == "dpo" ? LoadPreferences(file, *tok, opt) : LoadSupervised(file, *tok, opt);
  const DataStats& s = ds.stats;
  Json j = {{"file", file},         {"format", s.format},           {"examples", s.examples},
            {"tokens", s.tokens},   {"loss_tokens", s.loss_tokens}, {"truncated", s.truncated},
            {"skipped", s.skipped}, {"max_len", s.max_len},         {"max_seq_len", max_seq_len},
            {"sha256", ds.sha256}};
  if (json) {
    PrintJson(j);
  } else {
    std::printf(
        "%s: %s, %lld examples\n  tokens        %lld (mean %.1f, max %lld)\n"
        "  trained on    %lld tokens\n  truncated     %lld (max_seq_len %lld)\n  skipped       %lld\n",
        file.c_str(), s.format.c_str(), static_cast<long long>(s.examples), static_cast<long long>(s.tokens),
        s.examples ? double(s.tokens) / double(s.examples) : 0.0, static_cast<long long>(s.max_len),
        static_cast<long long>(s.loss_tokens), static_cast<long long>(s.truncated),
        static_cast<long long>(max_seq_len), static_cast<long long>(s.skipped));
  }
  return 0;
}

// `worker` (worker/worker.h): the process serve's executor starts.
void AddWorkerCommand(CLI::App& app, int* rc) {
  auto cmd = app.add_subcommand(
      "worker",
      "Run one worker (started by `burst serve`'s executor; configured by BURST_URL, BURST_WORKER_ID, "
      "BURST_WORKER_TOKEN, BURST_WORKER_DIR)");
  cmd->callback([rc] {
    auto env = [](const char* name) {
      const char* v = std::getenv(name);
      return std::string(v ? v : "");
    };
    const std::string device = env("BURST_WORKER_DEVICE");
    *rc = RunWorker(WorkerConfig{env("BURST_URL"), env("BURST_WORKER_ID"), env("BURST_WORKER_TOKEN"),
                                 env("BURST_WORKER_DIR"), device.empty() ? "cpu" : device});
  });
}

}  // namespace

int RunCli(int argc, char** argv) {
  CLI::App app{"Burst: serverless fine-tuning that a team runs itself"};
  app.set_version_flag("--version", std::string("burst ") + BURST_VERSION);
  app.require_subcommand(1);
  int rc = 0;

  InitModelArgs im;
  auto* init =
      app.add_subcommand("init-model", "Write a small random Hugging Face Llama folder from a preset");
  std::string presets_help = "preset:";
  for (const auto& p : Presets()) presets_help += "\n  " + p.name + ": " + p.description;
  init->add_option("--preset", im.preset, presets_help)->capture_default_str();
  init->add_option("--out", im.out, "output folder")->required();
  init->add_option("--tokenizer", im.tokenizer, "tokenizer.model or tokenizer.json to ship with it");
  init->add_option("--seed", im.seed, "weight init seed")->capture_default_str();
  init->add_option("--dtype", im.dtype, "stored dtype: float32, bfloat16, float16")
      ->capture_default_str()
      ->check(CLI::IsMember({"float32", "bfloat16", "float16"}));
  init->add_option("--shard-mb", im.shard_mb, "shard weights past this many MiB (0 = one file)")
      ->capture_default_str();
  init->callback([&] { rc = InitModel(im); });

  std::string config, out;
  bool resume = false, overwrite = false, json = false;
  auto* train = app.add_subcommand("train", "Fine-tune a model with a recipe (LoRA or full)");
  train->add_option("--config", config, "recipe JSON file (docs/recipe.md)")->required();
  train->add_option("--out", out, "run folder")->required();
  train->add_flag("--resume", resume, "continue from the newest valid state checkpoint in --out");
  train->add_flag("--overwrite", overwrite, "replace a previous run in --out");
  train->add_flag("--json", json, "print the result as JSON");
  MemberArgs members;
  train
      ->add_option("--members", members.members,
                   "spread the run over this many processes (each started with its --rank; each step's "
                   "micro-batches are shared out, the gradients summed)")
      ->capture_default_str();
  train->add_option("--rank", members.rank, "this process's place among --members (0 first)")
      ->capture_default_str();
  train->add_option(
      "--exchange", members.exchange,
      "how the members sum their gradients: store:URL (through an object store they share: "
      "file:///dir, s3://...; a fresh one for each start of the run) or gloo:FILE (c10d Gloo over "
      "TCP; rank 0 writes its address to FILE, a fresh path on a folder all share)");
  train->add_option("--host", members.host, "gloo: the address the other members reach this one at")
      ->capture_default_str();
  train->add_option("--member-timeout", members.timeout_s, "seconds to wait for another member")
      ->capture_default_str();
  train
      ->add_option(
          "--average-every", members.average_every,
          "model averaging (MA-SGD): each member steps on its own share and they average weights and "
          "optimizer moments every K steps (0: gradients summed every step)")
      ->capture_default_str();
  train->callback([&] { rc = TrainCommand(config, out, resume, overwrite, json, members); });

  ModelArgs em;
  std::string data;
  int64_t max_seq_len = 512, batch = 8;
  auto* eval =
      app.add_subcommand("eval", "Loss, token accuracy, exact match and label accuracy on a JSONL file");
  AddModelArgs(eval, em);
  eval->add_option("--data", data, "JSONL file")->required();
  eval->add_option("--max-seq-len", max_seq_len, "truncate examples to this many tokens")
      ->capture_default_str();
  eval->add_option("--batch-size", batch, "sequences per forward pass")
      ->check(CLI::Range(int64_t{1}, int64_t{4096}))
      ->capture_default_str();
  eval->add_flag("--json", json, "print JSON");
  RemoteEvalArgs remote;
  bool remote_eval = false;
  eval->add_flag(
      "--remote", remote_eval,
      "run it as a job on the Burst server at --url (billed as evaluation): --model names a checkpoint "
      "(JOB:step-N, ftckpt-...) or a model there, --data a file id or a local file to upload");
  AddApiTargetArgs(eval, remote.target);
  eval->callback([&] {
    if (!remote_eval) {
      rc = EvalCommand(em, data, max_seq_len, batch, json);
      return;
    }
    remote.model = em.model;
    remote.data = data;
    remote.max_seq_len = max_seq_len;
    remote.batch_size = batch;
    remote.json = json;
    rc = RemoteEval(remote);
  });

  ModelArgs sm;
  SampleParams sp;
  std::string prompt, messages;
  auto* sample = app.add_subcommand("sample", "Sample text from a model or checkpoint");
  AddModelArgs(sample, sm);
  sample->add_option("--prompt", prompt, "raw prompt text (BOS added when the tokenizer has one)");
  sample->add_option("--messages", messages,
                     "JSON file with chat messages (rendered with the chat template)");
  sample->add_option("--max-tokens", sp.max_tokens, "tokens to generate at most")->capture_default_str();
  sample->add_option("--temperature", sp.temperature, "0 = greedy")->capture_default_str();
  sample->add_option("--top-p", sp.top_p, "nucleus sampling mass (1 = off)")->capture_default_str();
  sample->add_option("--top-k", sp.top_k, "keep the k most likely tokens (0 = off)")->capture_default_str();
  sample->add_option("--stop", sp.stop, "stop string (repeatable)");
  sample->add_option("--seed", sp.seed, "sampling seed")->capture_default_str();
  sample->add_option("--n", sp.n, "number of samples")->capture_default_str();
  sample->add_flag("--json", json, "print token ids and logprobs as JSON");
  sample->callback([&] { rc = SampleCommand(sm, prompt, messages, sp, json); });

  ModelArgs tm;
  std::string text;
  auto* tokenize = app.add_subcommand("tokenize", "Show the tokens a model sees");
  AddModelArgs(tokenize, tm, false);
  tokenize->add_option("--text", text, "text (special tokens written in it are parsed)");
  tokenize->add_option("--messages", messages, "JSON file with chat messages");
  tokenize->add_flag("--json", json, "print JSON");
  tokenize->callback([&] { rc = TokenizeCommand(tm, text, messages, json); });

  ModelArgs xm;
  bool merge = false;
  std::string dtype = "float32";
  std::string gguf_type;
  auto* exp = app.add_subcommand(
      "export", "Merge an adapter into its base and write a plain HF folder, or a GGUF file");
  AddModelArgs(exp, xm);
  exp->add_option("--out", out, "output folder (a file with --gguf)")->required();
  exp->add_flag("--merge", merge, "merge the adapter into the base weights");
  exp->add_option("--dtype", dtype, "stored dtype: float32, bfloat16, float16")
      ->capture_default_str()
      ->check(CLI::IsMember({"float32", "bfloat16", "float16"}));
  exp->add_option("--gguf", gguf_type,
                  "write one GGUF file for llama.cpp and Ollama instead, its weights as f32, f16 or q8_0 "
                  "(the adapter merged)")
      ->check(CLI::IsMember({"f32", "f16", "q8_0"}));
  exp->callback([&] { rc = ExportCommand(xm, out, merge, dtype, gguf_type); });

  AddWorkerCommand(app, &rc);
  AddControlCommands(app, &rc);

  auto* data_cmd = app.add_subcommand("data", "Inspect training data");
  data_cmd->require_subcommand(1);
  ModelArgs dm;
  std::string file, loss = "cross_entropy";
  bool truncate = true;
  auto* check =
      data_cmd->add_subcommand("check", "Counts, lengths, truncations and trained tokens of a JSONL file");
  check->add_option("file", file, "JSONL file")->required();
  AddModelArgs(check, dm, /*with_adapter=*/false, /*model_required=*/false);
  check->add_option("--max-seq-len", max_seq_len, "length limit")->capture_default_str();
  check->add_option("--truncate", truncate, "truncate (true) or reject (false) long examples")
      ->capture_default_str();
  check->add_option("--loss", loss, "cross_entropy or dpo (preference data)")->capture_default_str();
  check->add_flag("--json", json, "print JSON");
  check->callback([&] { rc = DataCheckCommand(dm, file, max_seq_len, truncate, loss, json); });

  return ParseAndRun(app, argc, argv, rc);
}

}  // namespace burst
