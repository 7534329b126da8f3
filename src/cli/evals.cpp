#include "cli/evals.h"

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>

#include "cli/print.h"

namespace burst {
namespace {

std::string Metric(const Json& m, const char* key) {
  const Json& v = Field(m, key);
  if (!v.is_number()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", v.get<double>());
  return buf;
}

void PrintEval(const Json& e) {
  std::printf("%s  %s\n", Str(e, "id").c_str(), Str(e, "status").c_str());
  std::printf("  model           %s (adapter: %s)\n", Str(e, "model").c_str(), Str(e, "adapter").c_str());
  std::printf("  base model      %s\n", Str(e, "base_model").c_str());
  std::printf("  data            %s  sha256 %s\n", Str(e, "file").c_str(), Str(e, "dataset_sha256").c_str());
  const Json& m = Field(e, "metrics");
  if (m.is_object()) {
    std::printf("  examples        %s (%s loss tokens)\n", Str(m, "examples").c_str(),
                Str(m, "loss_tokens").c_str());
    std::printf("  loss            %s\n  token accuracy  %s\n  exact match     %s\n  label accuracy  %s\n",
                Metric(m, "eval_loss").c_str(), Metric(m, "eval_token_acc").c_str(),
                Metric(m, "eval_exact_match").c_str(), Metric(m, "eval_label_acc").c_str());
  }
  const Json& err = Field(e, "error");
  if (err.is_object()) std::printf("  error           %s\n", Str(err, "message").c_str());
  const Json& u = Field(e, "usage");
  const auto scope = FromString<BillingScope>(Str(e, "scope"));
  if (scope.ok() && scope.value() == BillingScope::kServerless) {
    std::printf("  billed          $%.6f for %s tokens (serverless; evaluation line)\n", Num(u, "cost"),
                Str(u, "tokens").c_str());
  } else {
    std::printf("  billed          $%.6f for %.1f s (dedicated; evaluation line)\n", Num(u, "cost"),
                Num(u, "seconds"));
  }
}

}  // namespace

int RemoteEval(const RemoteEvalArgs& a) {
  ApiClient api(a.target);
  const std::string file = FileIdOrUpload(api, a.data, a.json ? stderr : stdout);
  std::fflush(stdout);
  Json e = OrThrow(api.Post(
      "/v1/evals",
      {{"model", a.model}, {"file", file}, {"max_seq_len", a.max_seq_len}, {"batch_size", a.batch_size}}));
  const std::string id = Str(e, "id");
  if (a.wait) {
    if (!a.json) std::fprintf(stderr, "evaluation %s queued; waiting for it\n", id.c_str());
    while (!IsOver(e)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      e = OrThrow(api.Get("/v1/evals/" + id));
    }
  }
  if (a.json)
    PrintJson(e);
  else
    PrintEval(e);
  return StatusOf(e) == JobStatus::kFailed ? 1 : 0;
}

void AddEvalsCommands(CLI::App& app, int* rc) {
  auto a = std::make_shared<RemoteEvalArgs>();
  auto* evals = app.add_subcommand("evals", "Evaluations run as jobs on a Burst server: create, get, list");
  evals->require_subcommand(1);
  auto* create = evals->add_subcommand(
      "create", "Evaluate a checkpoint or base model on a JSONL file as a job (billed as evaluation)");
  create->add_option("--model", a->model, "JOB:step-N, ftckpt-..., or a model name")->required();
  create->add_option("--data", a->data, "file id, or a local JSONL file to upload")->required();
  create->add_option("--max-seq-len", a->max_seq_len, "truncate examples to this many tokens")
      ->capture_default_str();
  create->add_option("--batch-size", a->batch_size, "sequences per forward pass")->capture_default_str();
  create->add_flag("--wait,!--no-wait", a->wait, "wait for the result (default)");
  create->callback([a, rc] { *rc = RemoteEval(*a); });

  auto* get = evals->add_subcommand("get", "Show one evaluation");
  get->add_option("id", a->model, "eval id")->required();
  get->callback([a] {
    Json e = OrThrow(ApiClient(a->target).Get("/v1/evals/" + a->model));
    if (a->json) return PrintJson(e);
    PrintEval(e);
  });
  auto* list = evals->add_subcommand("list", "List evaluations, newest first");
  list->callback([a] {
    Json page = OrThrow(ApiClient(a->target).Get("/v1/evals?limit=50"));
    if (a->json) return PrintJson(page);
    const Json& data = Field(page, "data");
    if (data.empty()) return (void)std::printf("no evaluations\n");
    std::printf("%-29s %-10s %-34s %-9s %-9s %-9s %s\n", "id", "status", "model", "loss", "tok_acc",
                "label_acc", "data sha256");
    for (const Json& e : data) {
      const Json& m = Field(e, "metrics");
      std::printf("%-29s %-10s %-34s %-9s %-9s %-9s %.12s\n", Str(e, "id").c_str(), Str(e, "status").c_str(),
                  Str(e, "model").c_str(), Metric(m, "eval_loss").c_str(),
                  Metric(m, "eval_token_acc").c_str(), Metric(m, "eval_label_acc").c_str(),
                  Str(e, "dataset_sha256").c_str());
    }
  });
  for (CLI::App* cmd : {create, get, list}) {
    cmd->add_flag("--json", a->json, "print the API's JSON");
    AddApiTargetArgs(cmd, a->target);
  }
}

}  // namespace burst
