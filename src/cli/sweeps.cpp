#include "cli/sweeps.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <thread>

#include "cli/api_client.h"
#include "cli/print.h"
#include "core/fs.h"

namespace burst {
namespace {

constexpr auto kSweepPollInterval = std::chrono::milliseconds(1000);
const std::string kSweeps = "/v1/sweeps/";

struct SweepArgs {
  ApiTarget target;
  std::string id, after, metric, idempotency_key;
  int64_t limit = 20;
  bool json = false, wait = false, watch = false;
  // create
  std::string body, job, runs_file, model, training_file, validation_file, method, recipe, suffix;
  std::vector<std::string> grid, run;
};

// "a,b,[1,2],\"x,y\"" -> a | b | [1,2] | "x,y": commas inside brackets,
// braces or strings do not split.
std::vector<std::string> SplitValues(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  bool in_str = false, esc = false;
  for (char c : text) {
    if (in_str) {
      in_str = esc || c != '"';
      esc = !esc && c == '\\';
    } else if (c == '"') {
      in_str = true;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if (c == ']' || c == '}') {
      --depth;
    } else if (c == ',' && depth == 0) {
      out.push_back(cur);
      cur.clear();
      continue;
    }
    cur += c;
  }
  out.push_back(cur);
  return out;
}

// A value as JSON when it parses (8, 0.5, true, "x", [..]), else as a string.
Json ParseValue(const std::string& text) {
  Json v = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  return v.is_discarded() ? Json(text) : v;
}

// --grid FIELD=V1,V2,...
std::pair<std::string, Json> GridArg(const std::string& arg) {
  const size_t eq = arg.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size()) {
    throw Error(Code::kInvalidArgument,
                "--grid wants FIELD=VALUE,VALUE,... (e.g. lora.rank=4,8,16), got \"" + arg + "\"", "grid");
  }
  Json values = Json::array();
  for (const std::string& v : SplitValues(arg.substr(eq + 1))) {
    if (v.empty()) throw Error(Code::kInvalidArgument, "--grid " + arg + ": an empty value", "grid");
    values.push_back(ParseValue(v));
  }
  return {arg.substr(0, eq), values};
}

// A local path is uploaded first (once); anything else is taken as a file id.
Json FileValue(ApiClient& api, const Json& v, std::map<std::string, std::string>& uploaded, std::FILE* info) {
  if (!v.is_string()) return v;
  const std::string arg = v.get<std::string>();
  auto it = uploaded.find(arg);
  if (it != uploaded.end()) return it->second;
  return uploaded[arg] = FileIdOrUpload(api, arg, info);
}

// Uploads the local files a sweep body names (the job's and the points').
void UploadFiles(ApiClient& api, Json& body, std::FILE* info) {
  std::map<std::string, std::string> uploaded;
  for (const char* k : {"training_file", "validation_file"}) {
    if (body.contains("job") && body["job"].is_object() && body["job"].contains(k)) {
      body["job"][k] = FileValue(api, body["job"][k], uploaded, info);
    }
    if (body.contains("grid") && body["grid"].is_object() && body["grid"].contains(k) &&
        body["grid"][k].is_array()) {
      for (Json& v : body["grid"][k]) v = FileValue(api, v, uploaded, info);
    }
    if (body.contains("runs") && body["runs"].is_array()) {
      for (Json& r : body["runs"])
        if (r.is_object() && r.contains(k)) r[k] = FileValue(api, r[k], uploaded, info);
    }
  }
}

Json ReadJsonObject(const std::string& path, const char* what) {
  Json j = ParseJson(ReadFile(path), path);
  if (!j.is_object()) throw Error(Code::kInvalidArgument, path + ": " + what + " wants a JSON object", what);
  return j;
}

Json CreateBody(const SweepArgs& a, ApiClient& api, std::FILE* info) {
  Json body = a.body.empty() ? Json::object() : ReadJsonObject(a.body, "body");
  Json job = body.contains("job") ? body["job"] : Json::object();
  if (!a.job.empty()) job = ReadJsonObject(a.job, "job");
  if (!a.model.empty()) job["model"] = a.model;
  if (!a.training_file.empty()) job["training_file"] = a.training_file;
  if (!a.validation_file.empty()) job["validation_file"] = a.validation_file;
  if (!a.suffix.empty()) job["suffix"] = a.suffix;
  if (!a.method.empty()) job["method"] = {{"type", a.method}};
  if (!a.recipe.empty()) {
    Json r = ReadJsonObject(a.recipe, "recipe");
    if (!job.contains("recipe") || !job["recipe"].is_object()) job["recipe"] = Json::object();
    for (auto it = r.begin(); it != r.end(); ++it) job["recipe"][it.key()] = *it;
  }
  body["job"] = job;
  if (!a.grid.empty()) {
    if (!body.contains("grid") || !body["grid"].is_object()) body["grid"] = Json::object();
    for (const std::string& g : a.grid) {
      auto [field, values] = GridArg(g);
      body["grid"][field] = values;
    }
  }
  if (!a.runs_file.empty()) {
    Json runs = ParseJson(ReadFile(a.runs_file), a.runs_file);
    if (!runs.is_array()) {
      throw Error(Code::kInvalidArgument,
                  a.runs_file + ": --runs wants a JSON array of {field: value} objects", "runs");
    }
    body["runs"] = runs;
  }
  for (const std::string& r : a.run) {
    Json run = Json::parse(r, nullptr, /*allow_exceptions=*/false);
    if (!run.is_object()) {
      throw Error(Code::kInvalidArgument, "--run wants a JSON object like '{\"lora.rank\": 8}', got " + r,
                  "run");
    }
    if (!body.contains("runs") || !body["runs"].is_array()) body["runs"] = Json::array();
    body["runs"].push_back(run);
  }
  UploadFiles(api, body, info);
  return body;
}

std::string Fixed(const Json& v, const char* fmt = "%.4f") {
  if (!v.is_number()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, fmt, v.get<double>());
  return buf;
}

std::string Duration(const Json& v) {
  if (!v.is_number()) return "-";
  const double s = v.get<double>();
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%.1fs", s);
  else
    std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  return buf;
}

// "lora.rank=8 n_epochs=2".
std::string OverridesText(const Json& o) {
  std::string s;
  if (!o.is_object()) return s;
  for (auto it = o.begin(); it != o.end(); ++it) {
    s += (s.empty() ? "" : " ") + it.key() + "=" + (it->is_string() ? it->get<std::string>() : it->dump());
  }
  return s.empty() ? "(base job)" : s;
}

std::string Counts(const Json& sweep) {
  std::string s;
  const Json& c = Field(sweep, "counts");
  if (c.is_object())
    for (auto it = c.begin(); it != c.end(); ++it) s += (s.empty() ? "" : ", ") + it->dump() + " " + it.key();
  return s;
}

std::string BestLine(const Json& sweep) {
  const std::string metric = Str(sweep, "metric", "?");
  const std::string goal = Str(sweep, "metric_goal", "min") == "max" ? "higher" : "lower";
  const Json& best = Field(sweep, "best");
  if (!best.is_object())
    return "best by " + metric + " (" + goal + " is better): - (no run has succeeded with it yet)";
  return "best by " + metric + " (" + goal + " is better): #" + Str(best, "index") + " " +
         Str(best, "job_id") + "  " + metric + " " + Fixed(Field(best, "value")) + "  " +
         OverridesText(Field(best, "overrides")) + "  model " + Str(best, "fine_tuned_model");
}

// The sweep as lines: a heading, one row per run, the best run.
std::vector<std::string> TableLines(const Json& sweep) {
  std::vector<std::string> lines;
  const Json& runs = Field(sweep, "runs");
  const Json& usage = Field(sweep, "usage");
  char buf[512];
  std::snprintf(buf, sizeof buf, "sweep %s  %s  %zu runs (%s)  wall %s  cost %.4f", Str(sweep, "id").c_str(),
                Str(sweep, "status").c_str(), runs.size(), Counts(sweep).c_str(),
                Duration(Field(sweep, "wall_s")).c_str(), Num(usage, "cost"));
  lines.push_back(buf);
  size_t width = 9;
  for (const Json& r : runs) width = std::max(width, OverridesText(Field(r, "overrides")).size());
  width = std::min<size_t>(width, 48);
  std::snprintf(buf, sizeof buf, "%-3s %-30s %-*s %-10s %-9s %10s %10s %9s %8s %9s", "#", "job",
                static_cast<int>(width), "overrides", "status", "step", "train_loss", "eval_loss",
                "token_acc", "wall", "cost");
  lines.push_back(buf);
  const Json& best = Field(sweep, "best");
  for (const Json& r : runs) {
    const Json& m = Field(r, "metrics");
    std::string over = OverridesText(Field(r, "overrides"));
    if (over.size() > width) over = over.substr(0, width - 3) + "...";
    const std::string step =
        Field(r, "step").is_number() ? Str(r, "step") + "/" + Str(r, "total_steps") : "-";
    const bool is_best = best.is_object() && Field(best, "index") == Field(r, "index");
    std::snprintf(buf, sizeof buf, "%-3s %-30s %-*s %-10s %-9s %10s %10s %9s %8s %9s%s",
                  Str(r, "index").c_str(), Str(r, "job_id").c_str(), static_cast<int>(width), over.c_str(),
                  Str(r, "status").c_str(), step.c_str(), Fixed(Field(m, "train_loss")).c_str(),
                  Fixed(Field(m, "eval_loss")).c_str(), Fixed(Field(m, "eval_token_acc")).c_str(),
                  Duration(Field(r, "wall_s")).c_str(), Fixed(Field(Field(r, "usage"), "cost")).c_str(),
                  is_best ? "  *" : "");
    lines.push_back(buf);
  }
  lines.push_back(BestLine(sweep));
  for (const Json& r : runs) {
    const Json& e = Field(r, "error");
    if (e.is_object())
      lines.push_back("#" + Str(r, "index") + " error: " + Str(e, "code") + ": " + Str(e, "message", ""));
  }
  return lines;
}

// TableLines cut to `rows` lines: the heading, the runs not over yet (as
// many as fit), a count of the rest, the best run.
std::vector<std::string> Fit(const Json& sweep, const std::vector<std::string>& lines, size_t rows) {
  const Json& runs = Field(sweep, "runs");
  std::vector<std::string> out = {lines[0], lines[1]};
  const size_t room = rows > 4 ? rows - 4 : 0;
  size_t shown = 0;
  for (size_t i = 0; i < runs.size() && i + 2 < lines.size() && shown < room; ++i) {
    if (IsOver(runs[i])) continue;
    out.push_back(lines[i + 2]);
    ++shown;
  }
  out.push_back("... and " + std::to_string(runs.size() - shown) + " more runs (burst sweep get " +
                Str(sweep, "id") + " shows them all)");
  out.push_back(BestLine(sweep));
  return out;
}

void PrintTable(const Json& sweep, std::FILE* out) {
  for (const std::string& l : TableLines(sweep)) std::fprintf(out, "%s\n", l.c_str());
  std::fflush(out);
}

std::string SweepPath(const std::string& id, const std::string& metric) {
  return kSweeps + id + (metric.empty() ? "" : "?metric=" + metric);
}

// Follows a sweep until every run has ended. On a terminal the table is
// redrawn in place; otherwise a line per run whose status changed. With
// --json the final sweep object goes to stdout and the rest to stderr.
// Returns the exit code: 0 when every run succeeded.
int Watch(ApiClient& api, const std::string& id, const std::string& metric, bool json) {
  std::FILE* out = json ? stderr : stdout;
  const bool live = ::isatty(::fileno(out)) != 0;
  // Lines wider than the terminal would wrap and break the redraw.
  // A table taller than the terminal cannot be redrawn: then the runs still
  // going are shown, as many as fit.
  size_t columns = 0, rows = 0;
  struct winsize ws {};
  if (live && ::ioctl(::fileno(out), TIOCGWINSZ, &ws) == 0) {
    if (ws.ws_col > 1) columns = ws.ws_col - 1;
    if (ws.ws_row > 6) rows = ws.ws_row - 1;
  }
  size_t drawn = 0;
  std::map<std::string, std::string> seen;  // job -> status
  Json sweep;
  for (;;) {
    sweep = OrThrow(api.Get(SweepPath(id, metric)));
    if (live) {
      std::vector<std::string> lines = TableLines(sweep);
      if (rows && lines.size() > rows && !IsOver(sweep)) lines = Fit(sweep, lines, rows);
      if (drawn) std::fprintf(out, "\033[%zuF\033[J", drawn);
      for (const std::string& l : lines) {
        const bool cut = columns && l.size() > columns && !IsOver(sweep);  // the last frame is whole
        std::fprintf(out, "%s\n", cut ? l.substr(0, columns).c_str() : l.c_str());
      }
      std::fflush(out);
      drawn = lines.size();
    } else {
      for (const Json& r : Field(sweep, "runs")) {
        const std::string job = Str(r, "job_id"), status = Str(r, "status");
        if (seen[job] == status) continue;
        seen[job] = status;
        const Json& m = Field(r, "metrics");
        std::string extra;
        if (IsOver(r)) {
          extra = "  train_loss " + Fixed(Field(m, "train_loss")) + "  eval_loss " +
                  Fixed(Field(m, "eval_loss")) + "  wall " + Duration(Field(r, "wall_s"));
        }
        std::fprintf(out, "#%s %s (%s) %s%s\n", Str(r, "index").c_str(), job.c_str(),
                     OverridesText(Field(r, "overrides")).c_str(), status.c_str(), extra.c_str());
      }
      std::fflush(out);
    }
    if (IsOver(sweep)) break;
    std::this_thread::sleep_for(kSweepPollInterval);
  }
  if (json) {
    PrintJson(sweep);
  } else if (!live) {
    PrintTable(sweep, out);
  }
  return StatusOf(sweep) == JobStatus::kSucceeded ? 0 : 1;
}

}  // namespace

void AddSweepCommands(CLI::App& app, int* rc) {
  auto a = std::make_shared<SweepArgs>();
  auto* sweep =
      app.add_subcommand("sweep", "Fan one job out over a grid of hyperparameters: create, follow, compare");
  sweep->alias("sweeps");
  sweep->require_subcommand(1);

  auto* create = sweep->add_subcommand(
      "create",
      "Create a sweep: one job per grid point (or per --run), all queued at once and run side by side "
      "as far as the server's slots allow");
  create->add_option("--job", a->job,
                     "JSON file: the job body every run starts from (as for burst jobs create)");
  create->add_option("--model", a->model, "the job's model (overrides --job's)");
  create->add_option("--training-file", a->training_file, "file id, or a local JSONL file to upload");
  create->add_option("--validation-file", a->validation_file, "file id, or a local JSONL file to upload");
  create->add_option("--method", a->method, "supervised or dpo")->check(CLI::IsMember({"supervised", "dpo"}));
  create->add_option("--recipe", a->recipe, "JSON file: recipe fields for every run (docs/recipe.md)");
  create->add_option("--suffix", a->suffix, "added to the fine-tuned models' names");
  create->add_option(
      "--grid", a->grid,
      "FIELD=V1,V2,... (repeatable; the runs are every combination). FIELD: an OpenAI "
      "hyperparameter (n_epochs, batch_size, learning_rate_multiplier), training_file, seed, ... "
      "or a dotted recipe path (lora.rank, learning_rate)");
  create->add_option("--run", a->run,
                     "one run as a JSON object, e.g. '{\"lora.rank\": 8}' (repeatable; instead of --grid)");
  create->add_option("--runs", a->runs_file, "JSON file: an array of runs [{field: value}, ...]");
  create->add_option("--body", a->body,
                     "JSON file: the whole request {\"job\", \"grid\"|\"runs\"}; flags add to it");
  create->add_option("--idempotency-key", a->idempotency_key, "the same key and body return the same sweep");
  create->add_flag("--wait", a->wait, "follow the sweep until every run ends (a live table on a terminal)");
  create->callback([a, rc] {
    ApiClient api(a->target);
    Json body = CreateBody(*a, api, a->json ? stderr : stdout);
    std::vector<std::pair<std::string, std::string>> headers;
    if (!a->idempotency_key.empty()) headers.emplace_back("Idempotency-Key", a->idempotency_key);
    Json sweep =
        OrThrow(api.Post(a->metric.empty() ? "/v1/sweeps" : "/v1/sweeps?metric=" + a->metric, body, headers));
    if (a->wait) {
      if (!a->json) {
        std::printf("created %s (%zu runs)\n", Str(sweep, "id").c_str(), Field(sweep, "runs").size());
        std::fflush(stdout);
      }
      *rc = Watch(api, Str(sweep, "id"), a->metric, a->json);
      return;
    }
    if (a->json) return PrintJson(sweep);
    PrintTable(sweep, stdout);
  });

  auto* get = sweep->add_subcommand(
      "get", "Show a sweep: every run's overrides, status, losses, wall time, cost; the best run");
  get->add_option("sweep", a->id, "sweep id")->required();
  get->add_flag("--watch", a->watch, "keep the table up to date until every run ends");
  get->callback([a, rc] {
    ApiClient api(a->target);
    if (a->watch) {
      *rc = Watch(api, a->id, a->metric, a->json);
      return;
    }
    Json sweep = OrThrow(api.Get(SweepPath(a->id, a->metric)));
    if (a->json) return PrintJson(sweep);
    PrintTable(sweep, stdout);
  });

  auto* list = sweep->add_subcommand("list", "List sweeps, newest first");
  list->add_option("--limit", a->limit, "how many")->capture_default_str();
  list->add_option("--after", a->after, "continue after this sweep id");
  list->callback([a] {
    std::string path = "/v1/sweeps?limit=" + std::to_string(a->limit);
    if (!a->after.empty()) path += "&after=" + a->after;
    if (!a->metric.empty()) path += "&metric=" + a->metric;
    Json page = OrThrow(ApiClient(a->target).Get(path));
    if (a->json) return PrintJson(page);
    const Json& data = Field(page, "data");
    if (data.empty()) return (void)std::printf("no sweeps\n");
    std::printf("%-30s %-10s %-5s %-19s  %-12s %s\n", "id", "status", "runs", "created", "metric", "best");
    for (const Json& s : data) {
      const Json& best = Field(s, "best");
      std::string b = best.is_object() ? "#" + Str(best, "index") + " " + Fixed(Field(best, "value")) : "-";
      std::printf("%-30s %-10s %-5zu %-19s  %-12s %s\n", Str(s, "id").c_str(), Str(s, "status").c_str(),
                  Field(s, "runs").size(), When(s, "created_at").c_str(), Str(s, "metric").c_str(),
                  b.c_str());
    }
    if (Field(page, "has_more") == true) std::printf("(more: --after %s)\n", Str(data.back(), "id").c_str());
  });

  auto* cancel = sweep->add_subcommand("cancel", "Cancel every run of a sweep that has not ended");
  cancel->add_option("sweep", a->id, "sweep id")->required();
  cancel->callback([a] {
    Json s = OrThrow(ApiClient(a->target).Post(kSweeps + a->id + "/cancel", Json::object()));
    if (a->json) return PrintJson(s);
    std::printf("%s %s\n", Str(s, "id").c_str(), Str(s, "status").c_str());
  });

  for (CLI::App* cmd : {create, get, list}) {
    cmd->add_option("--metric", a->metric,
                    "rank runs by: eval_loss (default with a validation file), train_loss, eval_token_acc, "
                    "eval_exact_match, eval_label_acc, wall_s, cost");
  }
  for (CLI::App* cmd : {create, get, list, cancel}) {
    cmd->add_flag("--json", a->json, "print the API's JSON");
    AddApiTargetArgs(cmd, a->target);
  }
}

}  // namespace burst
