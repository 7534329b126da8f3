#include "cli/admin.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/api_client.h"
#include "cli/print.h"
#include "core/fs.h"
#include "db/metadata.h"
#include "model/config.h"
#include "runtime/gpu_request.h"
#include "store/object_store.h"

namespace burst {
namespace {

namespace fs = std::filesystem;

struct AdminArgs {
  std::string data = "burst-data";
  std::string name, org, key, path;
  bool json = false;
  ApiTarget target;
};

// The data folder's metadata, opened beside a running `burst serve` (SQLite
// in WAL mode takes both).
std::unique_ptr<Metadata> OpenData(const std::string& data) {
  fs::path db = fs::path(data) / "meta.db";
  if (!fs::exists(db)) {
    throw Error(Code::kNotFound,
                "no Burst data in " + data + " (start `burst serve --data " + data + "` once)", "data");
  }
  return OrThrow(Metadata::Open(db.string()));
}

// An organisation by id or by name.
Org FindOrg(Metadata& md, const std::string& which) {
  for (const Org& o : OrThrow(md.ListOrgs()))
    if (o.id == which || o.name == which) return o;
  throw Error(Code::kNotFound, "no organisation \"" + which + "\" (see `burst orgs list`)", "org");
}

void PrintKey(const Org& org, const NewApiKey& k, bool json) {
  if (json) {
    std::printf("%s\n", Json{{"organization_id", org.id},
                             {"organization", org.name},
                             {"key_id", k.key.id},
                             {"api_key", k.secret}}
                            .dump(2)
                            .c_str());
    return;
  }
  std::printf("organisation %s (%s)\nAPI key %s:\n  %s\n(shown once; Burst keeps only its hash)\n",
              org.name.c_str(), org.id.c_str(), k.key.id.c_str(), k.secret.c_str());
}

}  // namespace

void AddAdminCommands(CLI::App& app, int* rc) {
  auto a = std::make_shared<AdminArgs>();
  auto data_opt = [a](CLI::App* c) {
    c->add_option("--data", a->data, "the server's data folder")
        ->capture_default_str()
        ->envname("BURST_DATA");
    c->add_flag("--json", a->json, "print JSON");
  };

  auto* orgs = app.add_subcommand("orgs", "Organisations on this server's data folder (operator commands)");
  orgs->require_subcommand(1);
  auto* create = orgs->add_subcommand("create", "Create an organisation and its first API key");
  create->add_option("name", a->name, "organisation name")->required();
  data_opt(create);
  create->callback([a, rc] {
    auto md = OpenData(a->data);
    Org org = OrThrow(md->CreateOrg(a->name));
    PrintKey(org, OrThrow(md->CreateApiKey(org.id, "first")), a->json);
    *rc = 0;
  });
  auto* list = orgs->add_subcommand("list", "List organisations");
  data_opt(list);
  list->callback([a, rc] {
    auto md = OpenData(a->data);
    Json out = Json::array();
    for (const Org& o : OrThrow(md->ListOrgs())) {
      out.push_back({{"id", o.id}, {"name", o.name}, {"created_at", o.created_at}});
      if (!a->json)
        std::printf("%-30s %-20s %s\n", o.id.c_str(), o.name.c_str(), When(out.back(), "created_at").c_str());
    }
    if (a->json) std::printf("%s\n", out.dump(2).c_str());
    *rc = 0;
  });

  auto* models = app.add_subcommand("models", "Base models jobs may name");
  models->require_subcommand(1);
  auto* madd = models->add_subcommand(
      "add", "Register a Hugging Face folder under a name (a link in DATA/models; operator command)");
  madd->add_option("name", a->name, "the name jobs will use")->required();
  madd->add_option("path", a->path, "a Hugging Face folder (config.json, *.safetensors, tokenizer files)")
      ->required();
  data_opt(madd);
  auto catalog = std::make_shared<Json>(Json::object());
  auto max_seq = std::make_shared<int64_t>(0);
  auto ranks = std::make_shared<std::vector<int64_t>>();
  auto methods = std::make_shared<std::vector<std::string>>();
  auto dedicated_only = std::make_shared<bool>(false);
  auto serverless_rank = std::make_shared<int64_t>(0), serverless_len = std::make_shared<int64_t>(0);
  auto accelerator = std::make_shared<std::string>();
  madd->add_option("--max-seq-len", *max_seq,
                   "longest sequence jobs may train on (default: the config's max_position_embeddings)");
  madd->add_option("--lora-ranks", *ranks, "LoRA ranks jobs may use (default 1 2 4 8 16 32 64)")
      ->delimiter(',');
  madd->add_option("--methods", *methods, "supervised, dpo (default both)")->delimiter(',');
  madd->add_flag("--dedicated-only", *dedicated_only, "not eligible for serverless (per-token) scope");
  madd->add_option("--serverless-max-lora-rank", *serverless_rank,
                   "serverless scope only up to this LoRA rank (default: any allowed)");
  madd->add_option("--serverless-max-seq-len", *serverless_len,
                   "serverless scope only up to this max_seq_len (default: any allowed)");
  madd->add_option("--accelerator", *accelerator, "what the model's work needs: cpu (default) or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  auto gpu = std::make_shared<std::vector<std::string>>();
  madd->add_option("--gpu", *gpu,
                   "the GPU its sampling calls and loops run on, and jobs on it must ask for: h100, h100:2, "
                   "any, or a list in order of preference (h100,l40s)")
      ->delimiter(',');
  madd->callback(
      [a, rc, max_seq, ranks, methods, dedicated_only, serverless_rank, serverless_len, accelerator, gpu] {
        if (Status s = ValidateKey(a->name, "name"); !s.ok() || a->name.find('/') != std::string::npos) {
          throw Error(Code::kInvalidArgument,
                      "model name must be one segment of [A-Za-z0-9._=-]: \"" + a->name + "\"", "name");
        }
        // Checked as the catalog reads it (api/models.h), before anything is made.
        const Json gpu_field = gpu->empty() ? Json() : gpu->size() == 1 ? Json(gpu->front()) : Json(*gpu);
        const GpuRequest gpu_request = ParseGpuRequest(gpu_field, "gpu");
        if (gpu_request.Asks() && *accelerator == "cpu")
          throw Error(Code::kInvalidArgument, "--gpu: a model whose work runs on a GPU has accelerator cuda",
                      "gpu");
        fs::path src = fs::weakly_canonical(a->path);
        LlamaConfig cfg = LoadConfig(src);  // throws naming the file when it is not a model folder
        OpenData(a->data);                  // the data folder exists
        fs::path link = fs::path(a->data) / "models" / a->name;
        if (fs::exists(fs::symlink_status(link))) {
          throw Error(Code::kAlreadyExists,
                      "a model named \"" + a->name + "\" exists (" + link.string() + ")", "name");
        }
        fs::create_directories(link.parent_path());
        // The catalog entry's narrowing (api/models.h): a sidecar beside the link.
        Json side = Json::object();
        if (*max_seq > 0) side["max_seq_len"] = *max_seq;
        if (!ranks->empty()) side["lora_ranks"] = *ranks;
        if (!methods->empty()) side["methods"] = *methods;
        if (*dedicated_only) side["serverless"] = false;
        if (*serverless_rank > 0) side["serverless_max_lora_rank"] = *serverless_rank;
        if (*serverless_len > 0) side["serverless_max_seq_len"] = *serverless_len;
        if (!accelerator->empty()) side["accelerator"] = *accelerator;
        if (gpu_request.Asks()) side["gpu"] = GpuRequestJson(gpu_request);
        if (!side.empty())
          WriteFileAtomic(link.parent_path() / (a->name + ".model.json"), side.dump(2) + "\n");
        fs::create_directory_symlink(src, link);
        if (a->json) {
          std::printf("%s\n", Json{{"id", a->name}, {"path", src.string()}}.dump(2).c_str());
        } else {
          std::printf("registered %s -> %s (%lld layers, hidden %lld, vocab %lld)\n", a->name.c_str(),
                      src.c_str(), static_cast<long long>(cfg.num_hidden_layers),
                      static_cast<long long>(cfg.hidden_size), static_cast<long long>(cfg.vocab_size));
        }
        *rc = 0;
      });
  auto* mlist = models->add_subcommand("list", "Models this server's jobs may name (GET /v1/models)");
  AddApiTargetArgs(mlist, a->target);
  mlist->add_flag("--json", a->json, "print the API's JSON");
  mlist->callback([a, rc] {
    Json r = OrThrow(ApiClient(a->target).Get("/v1/models"));
    if (a->json) {
      std::printf("%s\n", r.dump(2).c_str());
    } else {
      std::printf("%-20s %-18s %10s %8s %-18s %-10s %s\n", "id", "architecture", "parameters", "max_seq",
                  "methods", "serverless", "lora ranks");
      std::vector<Json> tuned;  // the organisation's checkpoints and deployments
      for (const Json& m : Field(r, "data")) {
        if (m.contains("burst")) {
          tuned.push_back(m);
          continue;
        }
        std::string meth, rk;
        for (const Json& x : Field(m, "methods")) meth += (meth.empty() ? "" : ",") + x.get<std::string>();
        for (const Json& x : Field(m, "lora_ranks")) rk += (rk.empty() ? "" : ",") + x.dump();
        std::printf("%-20s %-18s %10s %8s %-18s %-10s %s\n", Str(m, "id").c_str(),
                    Str(m, "architecture").c_str(), Str(m, "parameters").c_str(),
                    Str(m, "max_seq_len").c_str(), meth.c_str(),
                    Field(m, "serverless") == true ? "yes" : "no", rk.c_str());
      }
      if (!tuned.empty()) {
        std::printf("\n%-44s %-11s %s\n", "fine-tuned (id)", "kind", "base model / target");
        for (const Json& m : tuned) {
          const Json& b = m["burst"];
          const std::string what =
              b.contains("base_model") ? Str(b, "base_model") : b.value("target", Json()).dump();
          std::printf("%-44s %-11s %s\n", Str(m, "id").c_str(), Str(b, "kind").c_str(), what.c_str());
        }
      }
    }
    *rc = 0;
  });

  auto* keys = app.add_subcommand("keys", "API keys of an organisation (operator commands)");
  keys->require_subcommand(1);
  auto* kcreate = keys->add_subcommand("create", "Create an API key");
  kcreate->add_option("--org", a->org, "organisation id or name")->required();
  kcreate->add_option("--name", a->name, "a label for the key");
  data_opt(kcreate);
  kcreate->callback([a, rc] {
    auto md = OpenData(a->data);
    Org org = FindOrg(*md, a->org);
    PrintKey(org, OrThrow(md->CreateApiKey(org.id, a->name)), a->json);
    *rc = 0;
  });
  auto* klist = keys->add_subcommand("list", "List an organisation's keys (prefixes only)");
  klist->add_option("--org", a->org, "organisation id or name")->required();
  data_opt(klist);
  klist->callback([a, rc] {
    auto md = OpenData(a->data);
    Org org = FindOrg(*md, a->org);
    Json out = Json::array();
    for (const ApiKey& k : OrThrow(md->ListApiKeys(org.id))) {
      out.push_back({{"id", k.id},
                     {"name", k.name},
                     {"prefix", k.prefix},
                     {"created_at", k.created_at},
                     {"revoked", k.revoked}});
      if (!a->json)
        std::printf("%-28s %-12s %s...  %s%s\n", k.id.c_str(), k.name.c_str(), k.prefix.c_str(),
                    When(out.back(), "created_at").c_str(), k.revoked ? "  (revoked)" : "");
    }
    if (a->json) std::printf("%s\n", out.dump(2).c_str());
    *rc = 0;
  });
  auto* krevoke = keys->add_subcommand("revoke", "Revoke an API key");
  krevoke->add_option("key", a->key, "key id (key-...)")->required();
  krevoke->add_option("--org", a->org, "organisation id or name")->required();
  data_opt(krevoke);
  krevoke->callback([a, rc] {
    auto md = OpenData(a->data);
    Org org = FindOrg(*md, a->org);
    if (Status s = md->RevokeApiKey(org.id, a->key); !s.ok()) throw Error(s);
    std::printf("revoked %s\n", a->key.c_str());
    *rc = 0;
  });
}

}  // namespace burst
