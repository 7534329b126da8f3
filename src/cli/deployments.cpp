#include "cli/deployments.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "cli/api_client.h"
#include "cli/print.h"
#include "core/fs.h"

namespace burst {
namespace {

const std::string kDeployments = "/v1/deployments";

struct DeploymentArgs {
  ApiTarget target;
  std::string name, checkpoint, scope, gpu;
  int64_t min_replicas = 0, max_replicas = 1, max_concurrency = 1;
  double scaledown_window = 60;
  double idle_warn = 3600;
  bool json = false, all = false;
};

// "1h 05m", "3m 20s", "42s".
std::string SpanText(double s) {
  const int64_t t = static_cast<int64_t>(s);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%lldh %02lldm", static_cast<long long>(t / 3600),
                  static_cast<long long>(t % 3600 / 60));
  else if (t >= 60)
    std::snprintf(buf, sizeof buf, "%lldm %02llds", static_cast<long long>(t / 60),
                  static_cast<long long>(t % 60));
  else
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(t));
  return buf;
}

void PrintDeployment(const Json& d) {
  std::printf("%s  %s  (%s)\n", Str(d, "name").c_str(), Str(d, "id").c_str(), Str(d, "status").c_str());
  std::printf("  checkpoint      %s\n", Str(d, "checkpoint").c_str());
  std::printf("  scope           %s (%s)\n", Str(d, "scope").c_str(), Str(d, "scope_reason").c_str());
  std::printf("  replicas        %s live, %s ready (min %s, max %s), %s busy, %s waiting\n",
              Str(d, "replicas").c_str(), Str(d, "ready_replicas").c_str(), Str(d, "min_replicas").c_str(),
              Str(d, "max_replicas").c_str(), Str(d, "busy").c_str(), Str(d, "waiting").c_str());
  std::printf("  scaling         down after %s s idle, %s call(s) in flight per replica\n",
              Str(d, "scaledown_window_s").c_str(), Str(d, "max_concurrency").c_str());
  std::printf("  requests        %s (%s waited for a cold start), last %s\n", Str(d, "requests").c_str(),
              Str(d, "cold_starts").c_str(), When(d, "last_request_at").c_str());
  std::printf("  cost so far     $%.6f for %.1f replica-seconds\n", Num(d, "cost"),
              Num(d, "replica_seconds"));
}

}  // namespace

void AddDeploymentCommands(CLI::App& app, int* rc) {
  auto a = std::make_shared<DeploymentArgs>();
  auto* deps = app.add_subcommand(
      "deployments", "Serve a checkpoint behind a name that scales to zero: create, list, get, delete");
  deps->alias("deployment");
  deps->require_subcommand(1);

  auto* create = deps->add_subcommand(
      "create",
      "Deploy a checkpoint under NAME: requests with \"model\": NAME go to its replicas, started on demand. "
      "The same NAME and settings again return the same deployment; other settings are a 409");
  create->add_option("name", a->name, "the deployment's name (letters, digits, - _ .)")->required();
  create->add_option("--checkpoint", a->checkpoint, "what to serve: JOB:step-N, ftckpt-..., or a model name")
      ->required();
  create
      ->add_option("--min-replicas", a->min_replicas, "replicas kept live even when idle (0: scale to zero)")
      ->capture_default_str();
  create->add_option("--max-replicas", a->max_replicas, "replicas at most, added under load")
      ->capture_default_str();
  create->add_option("--scaledown-window", a->scaledown_window, "seconds a replica stays after its last call")
      ->capture_default_str();
  create
      ->add_option("--max-concurrency", a->max_concurrency,
                   "calls in flight per replica before another replica is added")
      ->capture_default_str();
  create
      ->add_option(
          "--scope", a->scope,
          "billing scope: serverless (per token; min-replicas 0 only) or dedicated (per replica-second); "
          "default: serverless when eligible")
      ->check(CLI::IsMember({"serverless", "dedicated"}));
  create->add_option("--gpu", a->gpu,
                     "replicas on a GPU of this type: h100, h100:2, any, or h100,any in order of preference "
                     "(default: CPU slots)");
  create->callback([a] {
    Json body = {{"name", a->name},
                 {"checkpoint", a->checkpoint},
                 {"min_replicas", a->min_replicas},
                 {"max_replicas", a->max_replicas},
                 {"scaledown_window_s", a->scaledown_window},
                 {"max_concurrency", a->max_concurrency}};
    if (!a->scope.empty()) body["scope"] = a->scope;
    if (!a->gpu.empty()) body["gpu"] = GpuField(a->gpu);
    Json d = OrThrow(ApiClient(a->target).Post(kDeployments, body));
    if (a->json) return PrintJson(d);
    PrintDeployment(d);
    std::printf("call it with \"model\": \"%s\" on /v1/chat/completions or /v1/completions\n",
                Str(d, "name").c_str());
  });

  auto* list = deps->add_subcommand(
      "list",
      "List deployments with their live replicas and cost; warns about live replicas idle past --idle-warn");
  list->add_flag("--all", a->all, "deleted deployments too");
  list->add_option("--idle-warn", a->idle_warn,
                   "seconds without a request after which live replicas are flagged")
      ->capture_default_str();
  list->callback([a] {
    Json r = OrThrow(ApiClient(a->target).Get(kDeployments + (a->all ? "?include=deleted" : "")));
    if (a->json) return PrintJson(r);
    const Json& data = Field(r, "data");
    if (data.empty()) return (void)std::printf("no deployments\n");
    std::printf("%-24s %-8s %-40s %-9s %-9s %-10s %s\n", "name", "status", "checkpoint", "replicas",
                "requests", "idle", "cost");
    for (const Json& d : data) {
      const std::string idle = Field(d, "idle_s").is_number() ? SpanText(Num(d, "idle_s")) : "-";
      std::printf("%-24s %-8s %-40s %-9s %-9s %-10s $%.6f\n", Str(d, "name").c_str(),
                  Str(d, "status").c_str(), Str(d, "checkpoint").c_str(),
                  (Str(d, "replicas") + "/" + Str(d, "max_replicas")).c_str(), Str(d, "requests").c_str(),
                  idle.c_str(), Num(d, "cost"));
    }
    for (const Json& d : data) {
      if (Str(d, "status") != "active" || Num(d, "replicas") <= 0 || Num(d, "idle_s") < a->idle_warn)
        continue;
      std::fprintf(stderr,
                   "warning: deployment %s has %s replica(s) live and has answered no request for %s "
                   "($%.4f so far); `burst deployments delete %s` stops it%s\n",
                   Str(d, "name").c_str(), Str(d, "replicas").c_str(), SpanText(Num(d, "idle_s")).c_str(),
                   Num(d, "cost"), Str(d, "name").c_str(),
                   Num(d, "min_replicas") > 0 ? " (min_replicas keeps it from scaling to zero)" : "");
    }
  });

  auto* get = deps->add_subcommand("get", "Show one deployment");
  get->add_option("name", a->name, "name or id")->required();
  get->callback([a] {
    Json d = OrThrow(ApiClient(a->target).Get(kDeployments + "/" + a->name));
    if (a->json) return PrintJson(d);
    PrintDeployment(d);
  });

  auto* del =
      deps->add_subcommand("delete", "Stop every replica and the billing now; the name is free again");
  del->add_option("name", a->name, "name or id")->required();
  del->callback([a] {
    Json d = OrThrow(ApiClient(a->target).Delete(kDeployments + "/" + a->name));
    if (a->json) return PrintJson(d);
    std::printf("deleted %s (%s): %s replica(s) live, $%.6f billed for %.1f replica-seconds\n",
                Str(d, "name").c_str(), Str(d, "id").c_str(), Str(d, "replicas").c_str(), Num(d, "cost"),
                Num(d, "replica_seconds"));
  });

  for (CLI::App* cmd : {create, list, get, del}) {
    cmd->add_flag("--json", a->json, "print the API's JSON");
    AddApiTargetArgs(cmd, a->target);
  }

  // `burst chat MODEL`: one chat completion through the server.
  struct ChatArgs {
    ApiTarget target;
    std::string model, messages, prompt;
    int64_t max_tokens = 64;
    double temperature = 0;
    bool json = false;
  };
  auto c = std::make_shared<ChatArgs>();
  auto* chat = app.add_subcommand("chat",
                                  "One chat completion from a deployment, a checkpoint (JOB:step-N, "
                                  "ftckpt-...) or a base model on the server");
  chat->add_option("model", c->model, "deployment name, checkpoint or model")->required();
  chat->add_option("--messages", c->messages, "JSON file: [{role, content}, ...] or {\"messages\": [...]}");
  chat->add_option("--prompt", c->prompt, "one user message");
  chat->add_option("--max-tokens", c->max_tokens, "tokens to sample at most")->capture_default_str();
  chat->add_option("--temperature", c->temperature, "0 = greedy")->capture_default_str();
  chat->add_flag("--json", c->json, "print the API's JSON");
  AddApiTargetArgs(chat, c->target);
  chat->callback([c] {
    Json messages;
    if (!c->messages.empty()) {
      messages = ParseJson(ReadFile(c->messages), c->messages);
      if (messages.is_object()) messages = messages.value("messages", Json());
    } else if (!c->prompt.empty()) {
      messages = Json::array({{{"role", "user"}, {"content", c->prompt}}});
    }
    if (!messages.is_array())
      throw Error(Code::kInvalidArgument, "pass --messages FILE or --prompt TEXT", "messages");
    Json r = OrThrow(ApiClient(c->target).Post("/v1/chat/completions", {{"model", c->model},
                                                                        {"messages", messages},
                                                                        {"max_tokens", c->max_tokens},
                                                                        {"temperature", c->temperature}}));
    if (c->json) return PrintJson(r);
    std::printf("%s\n", Str(Field(Field(r, "choices")[0], "message"), "content").c_str());
    std::fflush(stdout);
    const Json& b = Field(r, "burst");
    const std::string who =
        Field(b, "deployment").is_string() ? "deployment " + Str(b, "deployment") : c->model;
    char how[128];
    if (Field(b, "cold_start") == true) {
      std::snprintf(how, sizeof how, "cold start %.0f ms: %.0f waiting for a replica, %.0f loading",
                    Num(b, "cold_start_ms"), Num(b, "queue_ms"), Num(b, "load_ms"));
    } else {
      std::snprintf(how, sizeof how, "warm");
    }
    std::fprintf(stderr, "(%s, %s scope, worker %s, %s, %.0f ms in all)\n", who.c_str(),
                 Str(b, "scope").c_str(), Str(b, "worker").c_str(), how, Num(b, "total_ms"));
  });
  (void)rc;
}

}  // namespace burst
