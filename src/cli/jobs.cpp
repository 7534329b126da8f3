#include "cli/jobs.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "cli/api_client.h"
#include "cli/print.h"
#include "core/fs.h"

namespace burst {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kJobPollInterval = std::chrono::milliseconds(500);
const std::string kJobs = "/v1/fine_tuning/jobs/";

struct JobsArgs {
  ApiTarget target;
  std::string id, after, start, end;
  int64_t limit = 20;
  bool json = false, wait = false, follow = false;
  // create: only what the user gave is sent.
  std::string model, training_file, validation_file, method, suffix, recipe, idempotency_key, scope,
      communication;
  std::string workers;  // N (with --estimate: a list, 1,2,4,8)
  std::string gpu;      // "h100", "h100:2", "any" or a list "h100,any" ("" = a CPU slot)
  bool estimate = false;
  std::optional<int64_t> n_epochs, batch_size, seed, checkpoint_every, max_retries, timeout_s, average_every;
  std::optional<double> lr_multiplier;
  std::vector<std::string> metadata;
};

// Every item of a paged list route from `after` on, following the last
// item's `key` while the server says has_more.
Json ListAll(ApiClient& api, const std::string& path, int64_t limit, std::string after = "",
             const char* key = "id") {
  Json all = Json::array();
  for (;;) {
    std::string p =
        path + (path.find('?') == std::string::npos ? "?" : "&") + "limit=" + std::to_string(limit);
    if (!after.empty()) p += "&after=" + after;
    Json page = OrThrow(api.Get(p));
    const Json& data = Field(page, "data");
    for (const Json& item : data) all.push_back(item);
    if (!Field(page, "has_more") == true || data.empty()) return all;
    after = Str(data.back(), key, "");
  }
}

std::string Steps(const Json& job) {
  if (Field(job, "step").is_null()) return "-";
  return Str(job, "step") + "/" + Str(job, "total_steps", "?");
}

// "2" or "1,2,4,8": each a count of workers.
std::vector<int64_t> WorkerCounts(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');) {
    char* end = nullptr;
    const long long v = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || v < 1 || v > 64) {
      throw Error(Code::kInvalidArgument,
                  "--workers wants numbers in 1..64 (\"2\" or \"1,2,4\"), not \"" + text + "\"", "workers");
    }
    out.push_back(v);
  }
  if (out.empty()) throw Error(Code::kInvalidArgument, "--workers wants a number", "workers");
  return out;
}

Json CreateBody(const JobsArgs& a, ApiClient& api, std::FILE* info) {
  Json body = {{"model", a.model}, {"training_file", FileIdOrUpload(api, a.training_file, info)}};
  if (!a.validation_file.empty()) body["validation_file"] = FileIdOrUpload(api, a.validation_file, info);
  Json hp = Json::object();
  if (a.n_epochs) hp["n_epochs"] = *a.n_epochs;
  if (a.batch_size) hp["batch_size"] = *a.batch_size;
  if (a.lr_multiplier) hp["learning_rate_multiplier"] = *a.lr_multiplier;
  if (!a.method.empty()) {
    body["method"] = {{"type", a.method}};
    if (!hp.empty()) body["method"][a.method] = {{"hyperparameters", hp}};
  } else if (!hp.empty()) {
    body["hyperparameters"] = hp;
  }
  if (!a.suffix.empty()) body["suffix"] = a.suffix;
  if (!a.scope.empty()) body["scope"] = a.scope;
  if (a.seed) body["seed"] = *a.seed;
  if (!a.recipe.empty()) {
    Json r = ParseJson(ReadFile(a.recipe), a.recipe);
    if (!r.is_object())
      throw Error(Code::kInvalidArgument, a.recipe + ": --recipe wants a JSON object", "recipe");
    body["recipe"] = r;
  }
  if (a.checkpoint_every) body["checkpoint_every"] = *a.checkpoint_every;
  if (a.max_retries) body["max_retries"] = *a.max_retries;
  if (a.timeout_s) body["timeout_s"] = *a.timeout_s;
  if (!a.communication.empty()) body["communication"] = a.communication;
  if (!a.gpu.empty()) body["gpu"] = GpuField(a.gpu);
  if (a.average_every) body["average_every"] = *a.average_every;
  if (!a.workers.empty()) {
    const std::vector<int64_t> n = WorkerCounts(a.workers);
    if (n.size() > 1 && !a.estimate) {
      throw Error(Code::kInvalidArgument, "--workers takes one number (a list only with --estimate)",
                  "workers");
    }
    if (n.size() > 1) {
      body["workers"] = n;  // the estimate answers for each
    } else {
      body["workers"] = n.front();
    }
  }
  if (!a.metadata.empty()) {
    Json md = Json::object();
    for (const std::string& kv : a.metadata) {
      size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) {
        throw Error(Code::kInvalidArgument, "--metadata wants KEY=VALUE, got \"" + kv + "\"", "metadata");
      }
      md[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    body["metadata"] = md;
  }
  return body;
}

std::string Duration(double s) {
  char buf[32];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%.0fs", s);
  } else {
    std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  }
  return buf;
}

// What --wait shows of a running job: the trainer's bar on a terminal
// (stderr), otherwise a plain line per metrics event at most every 5 s (and
// at the last step).
class Progress {
 public:
  Progress(bool bar, std::FILE* out) : bar_(bar), out_(out) {}

  // A training step's metrics event data (step, train_loss, lr).
  void Metrics(const Json& data, const Json& job) {
    step_ = static_cast<int64_t>(Num(data, "step"));
    total_ = static_cast<int64_t>(Num(data, "total_steps", Num(job, "total_steps")));
    loss_ = Num(data, "train_loss", NAN);
    lr_ = Num(data, "lr", NAN);
    if (!first_step_) first_step_ = step_;
    if (bar_) return Draw();
    if (Clock::now() - last_line_ < std::chrono::seconds(5) && step_ != total_) return;
    last_line_ = Clock::now();
    std::fprintf(out_, "%s\n", Line().c_str());
    std::fflush(out_);
  }

  // A message line, printed above the bar.
  void Message(const std::string& text) {
    if (bar_ && drawn_) std::fprintf(stderr, "\r\033[K");
    std::fprintf(out_, "%s\n", text.c_str());
    std::fflush(out_);
    if (bar_ && drawn_) Draw();
  }

  void End() {
    if (drawn_) std::fprintf(stderr, "\n");
    drawn_ = false;
  }

  double loss() const { return loss_; }

 private:
  std::string Line() const {
    char loss[32] = "", lr[32] = "";
    if (!std::isnan(loss_)) std::snprintf(loss, sizeof loss, "  loss %.4f", loss_);
    if (!std::isnan(lr_)) std::snprintf(lr, sizeof lr, "  lr %.2e", lr_);
    return "step " + std::to_string(step_) + "/" + (total_ > 0 ? std::to_string(total_) : "?") + loss + lr;
  }

  void Draw() {
    const int width = 28;
    int filled = total_ > 0 ? static_cast<int>(width * std::min(step_, total_) / total_) : 0;
    std::string bar(static_cast<size_t>(filled), '=');
    bar.resize(width, ' ');
    double el = std::chrono::duration<double>(Clock::now() - start_).count();
    int64_t done = step_ - *first_step_;
    std::string eta = done > 0 && total_ > step_ ? "  eta " + Duration(el / done * (total_ - step_)) : "";
    std::fprintf(stderr, "\r[%s] %s%s   ", bar.c_str(), Line().c_str(), eta.c_str());
    std::fflush(stderr);
    drawn_ = true;
  }

  bool bar_, drawn_ = false;
  std::FILE* out_;
  int64_t step_ = 0, total_ = 0;
  std::optional<int64_t> first_step_;
  double loss_ = NAN, lr_ = NAN;
  Clock::time_point start_ = Clock::now(), last_line_ = Clock::now() - std::chrono::seconds(5);
};

// "%.4f", or "-" for NaN (absent).
std::string Fixed(double v) {
  char buf[32] = "-";
  if (!std::isnan(v)) std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

// The held-out eval of a succeeded job's `result`, base model beside
// fine-tuned, as `burst train` prints it; nothing without a validation file.
void PrintEvalTable(const Json& job, const char* indent) {
  const Json& base = Field(Field(job, "result"), "baseline");
  const Json& final = Field(Field(job, "result"), "final");
  if (!base.is_object() && !final.is_object()) return;
  // The engine's names (eval_loss) or the short ones (loss).
  auto cell = [](const Json& e, const std::string& key) {
    return Fixed(Num(e, ("eval_" + key).c_str(), Num(e, key.c_str(), NAN)));
  };
  std::printf("%s%-16s %12s %12s\n", indent, "held-out eval", "base model", "fine-tuned");
  for (auto [name, key] : {std::pair{"loss", "loss"},
                           {"token accuracy", "token_acc"},
                           {"exact match", "exact_match"},
                           {"label accuracy", "label_acc"}}) {
    std::printf("%s%-16s %12s %12s\n", indent, name, cell(base, key).c_str(), cell(final, key).c_str());
  }
}

// Follows a job until it ends; prints its events as they come and then the
// outcome. Returns the exit code: 1 for failed or cancelled.
int Wait(ApiClient& api, Json job, bool json) {
  const std::string id = Str(job, "id");
  std::FILE* out = json ? stderr : stdout;
  Progress progress(::isatty(2) != 0, out);
  std::string last_event;
  for (;;) {
    job = OrThrow(api.Get(kJobs + id));  // before the events, so none before the end is missed
    for (const Json& ev : ListAll(api, kJobs + id + "/events?order=asc", 100, last_event)) {
      last_event = Str(ev, "id", last_event);
      const Json& data = Field(ev, "data");
      if (Str(ev, "type") == "metrics" && Field(data, "train_loss").is_number()) {
        progress.Metrics(data, job);
      } else {
        std::string level = Str(ev, "level", "info");
        progress.Message((level == "info" ? "" : level + ": ") + Str(ev, "message", ""));
      }
    }
    if (IsOver(job)) break;
    std::this_thread::sleep_for(kJobPollInterval);
  }
  progress.End();
  const std::string status = Str(job, "status");
  if (json) {
    PrintJson(job);
  } else {
    const Json& usage = Field(job, "usage");
    std::printf("job %s %s\n", id.c_str(), status.c_str());
    std::printf("  fine_tuned_model  %s\n", Str(job, "fine_tuned_model").c_str());
    double loss = Num(Field(job, "result"), "train_loss", progress.loss());
    if (!std::isnan(loss)) std::printf("  final train loss  %.4f\n", loss);
    std::printf("  usage             %.1f s, cost %.4f\n", Num(usage, "seconds"), Num(usage, "cost"));
    PrintEvalTable(job, "  ");
    if (Field(job, "error").is_object()) {
      const Json& e = job["error"];
      std::string message = Str(e, "message", ""), param = Str(e, "param", "");
      if (!param.empty() && message.find(param) == std::string::npos) message += " (" + param + ")";
      std::printf("  error             %s: %s\n", Str(e, "code").c_str(), message.c_str());
    }
  }
  return StatusOf(job) == JobStatus::kSucceeded ? 0 : 1;
}

void PrintJobSummary(const Json& job) {
  auto row = [](const char* name, const std::string& value) {
    std::printf("%-18s %s\n", name, value.c_str());
  };
  row("id", Str(job, "id"));
  row("status", Str(job, "status"));
  row("model", Str(job, "model"));
  row("created", When(job, "created_at"));
  row("started", When(job, "started_at"));
  row("finished", When(job, "finished_at"));
  row("training_file", Str(job, "training_file"));
  row("validation_file", Str(job, "validation_file"));
  row("method", Str(Field(job, "method"), "type"));
  row("hyperparameters", Str(job, "hyperparameters"));
  row("step", Steps(job));
  row("fine_tuned_model", Str(job, "fine_tuned_model"));
  row("trained_tokens", Str(job, "trained_tokens"));
  row("final train loss", Fixed(Num(Field(job, "result"), "train_loss", NAN)));
  row("max_retries", Str(job, "max_retries"));
  if (Num(job, "workers") > 1) {
    row("workers", Str(job, "workers") + " (communication " + Str(job, "communication") + ")");
  }
  row("timeout", Num(job, "timeout_s") > 0 ? Duration(Num(job, "timeout_s")) : "none");
  const Json& usage = Field(job, "usage");
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f s, cost %.4f", Num(usage, "seconds"), Num(usage, "cost"));
  row("usage", buf);
  if (Field(job, "error").is_object()) {
    row("error", Str(job["error"], "code") + ": " + Str(job["error"], "message", ""));
  }
  PrintEvalTable(job, "");
  const Json& attempts = Field(job, "attempts");
  if (attempts.empty()) return;
  std::printf("\n%-8s %-30s %-10s %-19s  %-19s  %-8s %-8s %s\n", "attempt", "worker", "outcome", "started",
              "ended", "queued", "startup", "resumed_from_step");
  auto secs = [](const Json& at, const char* key) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.1fs", at.value(key, 0.0));
    return std::string(buf);
  };
  for (const Json& at : attempts) {
    std::printf("%-8s %-30s %-10s %-19s  %-19s  %-8s %-8s %s\n", Str(at, "attempt").c_str(),
                Str(at, "worker").c_str(), Str(at, "outcome", "running").c_str(),
                When(at, "started_at").c_str(), When(at, "ended_at").c_str(), secs(at, "queued_s").c_str(),
                secs(at, "startup_s").c_str(), Str(at, "resumed_from_step").c_str());
    if (Field(at, "error").is_object()) {
      std::printf("         error: %s\n", Str(at["error"], "message", "").c_str());
    }
  }
}

// An estimate's answer for each worker count: time, cost and where each
// figure came from (m = measured or fitted to this organisation's jobs,
// e = estimated).
void PrintByWorkers(const Json& e) {
  auto mark = [](const Json& row, const char* key) {
    const std::string src = Str(row, key, "");
    return src.rfind("measured", 0) == 0 || src.rfind("fitted", 0) == 0 ? "m"
           : src.rfind("no exchange", 0) == 0                           ? "-"
                                                                        : "e";
  };
  std::printf("\nby workers (m: measured on this organisation's jobs, e: estimated)\n");
  std::printf("  %-8s %-6s %-10s %-9s %-13s %-12s %-11s %s\n", "workers", "steps", "time", "compute",
              "exchange", "overhead", "cost", "");
  for (const Json& row : Field(e, "by_workers")) {
    char t[32], c[32], x[40], o[32];
    std::snprintf(t, sizeof t, "%.0f s", Num(row, "seconds"));
    std::snprintf(c, sizeof c, "%.0f s %s", Num(row, "seconds_compute"),
                  mark(row, "tokens_per_second_source"));
    std::snprintf(x, sizeof x, "%.1f s %s", Num(row, "seconds_exchange"), mark(row, "exchange_source"));
    std::snprintf(o, sizeof o, "%.0f s %s", Num(row, "seconds_overhead"), mark(row, "overhead_source"));
    std::printf("  %-8s %-6s %-10s %-9s %-13s %-12s $%-10.4f %s%s\n", Str(row, "workers").c_str(),
                Str(row, "total_steps").c_str(), t, c, x, o, Num(row, "cost"),
                Str(row, "communication", "").c_str(),
                Field(row, "over_slots") == true ? " (over this server's slots)" : "");
  }
  std::printf("  fastest: %s workers; cheapest: %s\n", Str(e, "fastest_workers").c_str(),
              Str(e, "cheapest_workers").c_str());
}

// "train_loss=1.2345 eval_loss=..." from a metrics object.
std::string MetricsText(const Json& m) {
  if (!m.is_object()) return "-";
  std::string s;
  for (const auto& [k, v] : m.items()) {
    char buf[64];
    if (v.is_number_float()) std::snprintf(buf, sizeof buf, "%.4g", v.get<double>());
    std::string value = v.is_number_float() ? buf : v.is_string() ? v.get<std::string>() : v.dump();
    s += (s.empty() ? "" : " ") + k + "=" + value;
  }
  return s.empty() ? "-" : s;
}

void AddJobs(CLI::App& app, const std::shared_ptr<JobsArgs>& a, int* rc) {
  auto* jobs = app.add_subcommand("jobs", "Create, follow and manage fine-tuning jobs on a Burst server");
  jobs->require_subcommand(1);

  auto* create = jobs->add_subcommand("create", "Create a fine-tuning job (local files are uploaded first)");
  create->add_option("--model", a->model, "model name the server knows (GET /v1/models)")->required();
  create->add_option("--training-file", a->training_file, "file id, or a local JSONL file to upload")
      ->required();
  create->add_option("--validation-file", a->validation_file, "file id, or a local JSONL file to upload");
  create->add_option("--method", a->method, "supervised or dpo")->check(CLI::IsMember({"supervised", "dpo"}));
  create->add_option("--n-epochs", a->n_epochs, "epochs (default: the recipe's)");
  create->add_option("--batch-size", a->batch_size, "sequences per batch (default: the recipe's)");
  create->add_option("--lr-multiplier", a->lr_multiplier, "scales the method's default learning rate");
  create->add_option("--suffix", a->suffix, "added to the fine-tuned model's name");
  create->add_option("--seed", a->seed, "training seed");
  create->add_option("--recipe", a->recipe, "JSON file: an object of recipe fields (docs/recipe.md)");
  create->add_option("--checkpoint-every", a->checkpoint_every, "steps between checkpoints");
  create->add_option("--max-retries", a->max_retries, "retries of lost or transiently failed attempts");
  create->add_option("--workers", a->workers,
                     "spread the job over N workers (each takes grad_accum of a step's micro-batches)");
  create->add_option(
      "--gpu", a->gpu,
      "train on a GPU of this type: h100, h100:2 (two per worker), any, or h100,any in order of "
      "preference (default: a CPU slot)");
  create
      ->add_option("--communication", a->communication,
                   "how the workers exchange gradients: auto, c10d (they reach each other) or store")
      ->check(CLI::IsMember({"auto", "c10d", "store"}));
  create->add_option(
      "--average-every", a->average_every,
      "with --workers: model averaging (MA-SGD) every K steps instead of summing gradients each step");
  create->add_option("--timeout", a->timeout_s, "fail the job after this many seconds of attempts");
  create->add_option("--idempotency-key", a->idempotency_key, "the same key and body return the same job");
  create->add_option("--metadata", a->metadata, "KEY=VALUE (repeatable)");
  create->add_flag("--wait", a->wait, "follow the job until it ends: events, progress, outcome");
  create
      ->add_option(
          "--scope", a->scope,
          "billing scope: serverless (per token) or dedicated (per slot-second); default: serverless "
          "when the model and method are eligible")
      ->check(CLI::IsMember({"serverless", "dedicated"}));
  create->add_flag("--estimate", a->estimate,
                   "check the job and print its expected tokens, time and cost; create nothing");
  create->callback([a, rc] {
    ApiClient api(a->target);
    Json body = CreateBody(*a, api, a->json ? stderr : stdout);
    if (a->estimate) {
      Json e = OrThrow(api.Post("/v1/fine_tuning/jobs/estimate", body));
      if (a->json) return PrintJson(e);
      std::printf("estimate for %s (%s scope: %s)\n", Str(e, "model").c_str(), Str(e, "scope").c_str(),
                  Str(e, "scope_reason").c_str());
      std::printf("  steps           %s (%s sequences)\n", Str(e, "total_steps").c_str(),
                  Str(e, "sequences").c_str());
      std::printf("  tokens          %s (%.1f per sequence, %s)\n", Str(e, "tokens").c_str(),
                  Num(e, "tokens_per_sequence"), Str(e, "tokens_per_sequence_source").c_str());
      const std::string slots = Num(e, "workers", 1) > 1 ? Str(e, "workers") + " slots" : "one slot";
      std::printf("  time            %.0f s on %s (%.0f tokens/s a worker, %s)\n", Num(e, "seconds"),
                  slots.c_str(), Num(e, "tokens_per_second"), Str(e, "tokens_per_second_source").c_str());
      std::printf("  cost            $%.4f (%s)\n", Num(e, "cost"), Str(e, "scope").c_str());
      std::printf("  if dedicated    $%.4f (slot-seconds at the slot price)\n", Num(e, "cost_if_dedicated"));
      if (Field(e, "cost_if_serverless").is_number()) {
        std::printf("  if serverless   $%.4f (trained tokens at the token price)\n",
                    Num(e, "cost_if_serverless"));
      }
      if (Field(e, "by_workers").is_array()) PrintByWorkers(e);
      std::printf("nothing was created; drop --estimate to start it\n");
      return;
    }
    std::vector<std::pair<std::string, std::string>> headers;
    if (!a->idempotency_key.empty()) headers.emplace_back("Idempotency-Key", a->idempotency_key);
    Json job = OrThrow(api.Post("/v1/fine_tuning/jobs", body, headers));
    if (a->wait) {
      if (!a->json) std::printf("created %s (%s)\n", Str(job, "id").c_str(), Str(job, "status").c_str());
      std::fflush(stdout);
      *rc = Wait(api, job, a->json);
      return;
    }
    if (a->json) return PrintJson(job);
    std::printf("%s %s\n", Str(job, "id").c_str(), Str(job, "status").c_str());
  });

  auto* list = jobs->add_subcommand("list", "List jobs, newest first");
  list->add_option("--limit", a->limit, "how many")->capture_default_str();
  list->add_option("--after", a->after, "continue after this job id");
  list->callback([a] {
    std::string path = "/v1/fine_tuning/jobs?limit=" + std::to_string(a->limit);
    if (!a->after.empty()) path += "&after=" + a->after;
    Json page = OrThrow(ApiClient(a->target).Get(path));
    if (a->json) return PrintJson(page);
    const Json& data = Field(page, "data");
    if (data.empty()) return (void)std::printf("no jobs\n");
    std::printf("%-30s %-16s %-20s %-19s  %-11s %s\n", "id", "status", "model", "created", "step",
                "fine_tuned_model");
    for (const Json& j : data) {
      std::printf("%-30s %-16s %-20s %-19s  %-11s %s\n", Str(j, "id").c_str(), Str(j, "status").c_str(),
                  Str(j, "model").c_str(), When(j, "created_at").c_str(), Steps(j).c_str(),
                  Str(j, "fine_tuned_model").c_str());
    }
    if (Field(page, "has_more") == true) std::printf("(more: --after %s)\n", Str(data.back(), "id").c_str());
  });

  auto* get = jobs->add_subcommand("get", "Show a job: status, progress, attempts, usage");
  get->callback([a] {
    Json job = OrThrow(ApiClient(a->target).Get(kJobs + a->id));
    if (a->json) return PrintJson(job);
    PrintJobSummary(job);
  });

  auto* cancel = jobs->add_subcommand("cancel", "Cancel a job (its worker stops within seconds)");
  cancel->callback([a] {
    Json job = OrThrow(ApiClient(a->target).Post(kJobs + a->id + "/cancel", Json::object()));
    if (a->json) return PrintJson(job);
    std::printf("%s %s\n", Str(job, "id").c_str(), Str(job, "status").c_str());
  });

  auto* pause = jobs->add_subcommand("pause", "Pause a job: its worker writes a state checkpoint and stops");
  auto* resume = jobs->add_subcommand("resume", "Resume a paused job from its last state checkpoint");
  for (auto [cmd, verb] : {std::pair{pause, "/pause"}, std::pair{resume, "/resume"}}) {
    const std::string path = verb;
    cmd->callback([a, path] {
      Json job = OrThrow(ApiClient(a->target).Post(kJobs + a->id + path, Json::object()));
      if (a->json) return PrintJson(job);
      std::printf("%s %s\n", Str(job, "id").c_str(), Str(job, "status").c_str());
    });
  }

  auto* events = jobs->add_subcommand("events", "A job's events, oldest first");
  events->add_option("--limit", a->limit, "events per request (all are shown)")->capture_default_str();
  events->callback([a] {
    ApiClient api(a->target);
    Json all = ListAll(api, kJobs + a->id + "/events?order=asc", a->limit);
    if (a->json) return PrintJson({{"object", "list"}, {"data", all}, {"has_more", false}});
    for (const Json& ev : all) {
      std::string text = Str(ev, "message", "");
      if (text.empty()) text = Str(ev, "type") + " " + MetricsText(Field(ev, "data"));
      std::printf("%s  %-5s %s\n", When(ev, "created_at").c_str(), Str(ev, "level").c_str(), text.c_str());
    }
  });

  auto* checkpoints = jobs->add_subcommand("checkpoints", "A job's checkpoints, newest first");
  checkpoints->callback([a] {
    ApiClient api(a->target);
    Json all = ListAll(api, kJobs + a->id + "/checkpoints", 100);
    if (a->json) return PrintJson({{"object", "list"}, {"data", all}, {"has_more", false}});
    if (all.empty()) return (void)std::printf("no checkpoints\n");
    std::printf("%-8s %-42s %s\n", "step", "name", "metrics");
    for (const Json& c : all) {
      std::printf("%-8s %-42s %s\n", Str(c, "step_number").c_str(),
                  Str(c, "fine_tuned_model_checkpoint").c_str(), MetricsText(Field(c, "metrics")).c_str());
    }
  });

  for (CLI::App* cmd : {get, cancel, pause, resume, events, checkpoints}) {
    cmd->add_option("job", a->id, "job id")->required();
  }
  for (CLI::App* cmd : {create, list, get, cancel, pause, resume, events, checkpoints}) {
    cmd->add_flag("--json", a->json, "print the API's JSON");
    AddApiTargetArgs(cmd, a->target);
  }
}

void AddLogs(CLI::App& app, const std::shared_ptr<JobsArgs>& a) {
  auto* logs =
      app.add_subcommand("logs", "A job's worker log lines (kept by the server after workers leave)");
  logs->add_option("job", a->id, "job id")->required();
  logs->add_flag("-f,--follow", a->follow, "keep printing new lines until the job is done");
  logs->add_flag("--json", a->json, "print each line's JSON object, one per line");
  AddApiTargetArgs(logs, a->target);
  logs->callback([a] {
    ApiClient api(a->target);
    std::string after;
    for (;;) {
      std::string path = kJobs + a->id + "/logs?limit=500";
      if (!after.empty()) path += "&after=" + after;
      Json page = OrThrow(api.Get(path));
      const Json& data = Field(page, "data");
      for (const Json& line : data) {
        if (a->json) {
          std::printf("%s\n", line.dump(-1, ' ', false, Json::error_handler_t::replace).c_str());
        } else {
          std::string text = Str(line, "text", "");
          std::printf("%s%s", text.c_str(), !text.empty() && text.back() == '\n' ? "" : "\n");
        }
      }
      std::fflush(stdout);
      if (!data.empty()) after = Str(data.back(), "seq", after);
      if (Field(page, "has_more") == true && !data.empty()) continue;
      if (!a->follow || Field(page, "done") == true) return;
      std::this_thread::sleep_for(kJobPollInterval);
    }
  });
}

void AddWorkersAndUsage(CLI::App& app, const std::shared_ptr<JobsArgs>& a) {
  auto* workers = app.add_subcommand("workers", "The server's live worker pool");
  workers->callback([a] {
    Json r = OrThrow(ApiClient(a->target).Get("/v1/workers"));
    if (a->json) return PrintJson(r);
    const Json& data = Field(r, "data");
    if (data.empty()) {
      std::printf("0 workers (idle pool)\n");
    } else {
      std::printf("%-30s %-9s %-12s %-8s %-20s %-30s %s\n", "id", "state", "slot", "pid", "model", "job",
                  "since");
      for (const Json& w : data) {
        // A CPU slot's number, or the GPU type and indices a worker holds.
        std::string where = Str(w, "slot");
        if (w.value("device", "cpu") != "cpu") {
          where = Str(w, "device") + ":";
          for (const Json& g : w.value("gpus", Json::array()))
            where += (where.back() == ':' ? "" : ",") + g.dump();
        }
        std::printf("%-30s %-9s %-12s %-8s %-20s %-30s %s\n", Str(w, "id").c_str(), Str(w, "state").c_str(),
                    where.c_str(), Str(w, "pid").c_str(), Str(w, "model").c_str(), Str(w, "job").c_str(),
                    When(w, "since").c_str());
      }
    }
    if (r.contains("slots")) {
      const std::string slots = Str(r, "slots"), threads = Str(r, "threads_per_slot");
      std::printf("%s slot%s, %s thread%s each", slots.c_str(), slots == "1" ? "" : "s", threads.c_str(),
                  threads == "1" ? "" : "s");
      std::map<std::string, int> gpus;
      for (const Json& g : r.value("gpus", Json::array())) ++gpus[g.value("type", "gpu")];
      for (const auto& [type, n] : gpus) std::printf("; %d x %s", n, type.c_str());
      std::printf("\n");
    }
  });

  auto* usage = app.add_subcommand("usage", "Worker time and cost billed to your organisation, by day");
  usage->add_option("--start", a->start, "first day, YYYY-MM-DD (UTC)");
  usage->add_option("--end", a->end, "last day, YYYY-MM-DD (UTC)");
  usage->callback([a] {
    std::string path = "/v1/usage";
    if (!a->start.empty()) path += "?start=" + a->start;
    if (!a->end.empty()) path += (a->start.empty() ? "?end=" : "&end=") + a->end;
    Json r = OrThrow(ApiClient(a->target).Get(path));
    if (a->json) return PrintJson(r);
    std::printf("%-10s  %-11s %-10s %12s %10s %12s  %s\n", "day", "line", "scope", "seconds", "tokens",
                "cost", "device");
    for (const Json& u : Field(r, "data")) {
      // A GPU line's device-seconds: its seconds times the GPUs held.
      const std::string device = u.value("device", "cpu");
      char gpu_s[48] = "";
      if (device != "cpu")
        std::snprintf(gpu_s, sizeof gpu_s, " (%.1f GPU-seconds)", Num(u, "device_seconds"));
      std::printf("%-10s  %-11s %-10s %12.1f %10s %12.6f  %s%s\n", Str(u, "day").c_str(),
                  Str(u, "line").c_str(), Str(u, "scope").c_str(), Num(u, "seconds"),
                  Num(u, "tokens") > 0 ? Str(u, "tokens").c_str() : "-", Num(u, "cost"), device.c_str(),
                  gpu_s);
    }
    std::printf("%-10s  %-11s %-10s %12.1f %10s %12.6f\n", "total", "", "", Num(r, "total_seconds"), "",
                Num(r, "total_cost"));
    const Json& runs = Field(r, "runs");
    if (!runs.empty()) {
      std::printf(
          "\nby run (a fine-tuning job; its checkpoints' evaluations, sampling and deployments count to "
          "it):\n");
      std::printf("%-32s %14s %12s %12s %10s %12s\n", "run", "train+sample", "evaluation", "deployment",
                  "idle", "total");
      for (const Json& x : runs) {
        std::printf("%-32s %14.6f %12.6f %12.6f %10.6f %12.6f\n",
                    Field(x, "run").is_null() ? "(base models, no run)" : Str(x, "run").c_str(),
                    Num(x, "training_and_sampling"), Num(x, "evaluation"), Num(x, "deployment"),
                    Num(x, "idle"), Num(x, "total"));
      }
    }
  });

  for (CLI::App* cmd : {workers, usage}) {
    cmd->add_flag("--json", a->json, "print the API's JSON");
    AddApiTargetArgs(cmd, a->target);
  }
}

}  // namespace

void AddJobsCommands(CLI::App& app, int* rc) {
  auto a = std::make_shared<JobsArgs>();
  AddJobs(app, a, rc);
  AddLogs(app, a);
  AddWorkersAndUsage(app, a);
}

}  // namespace burst
