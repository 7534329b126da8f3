#include "api/sweeps.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <set>

namespace burst {
namespace {

// OpenAI hyperparameter names and the recipe fields they set.
const std::map<std::string, std::string>& HyperFields() {
  static const std::map<std::string, std::string> m = {{"n_epochs", "epochs"},
                                                       {"batch_size", "batch_size"},
                                                       {"learning_rate_multiplier", "learning_rate"},
                                                       {"beta", "dpo_beta"}};
  return m;
}

// Fields of the job body's top level.
bool TopField(const std::string& f) {
  static const std::set<std::string> s = {"model",         "training_file", "validation_file", "seed",
                                          "suffix",        "max_retries",   "timeout_s",       "workers",
                                          "communication", "average_every"};
  return s.count(f) > 0;
}

bool IsHyper(const std::string& f) { return HyperFields().count(f) > 0; }

// Checks a field name (dotted segments of letters, digits and '_'); the
// canonical name drops a leading "recipe.".
std::string CanonicalField(const std::string& name, const std::string& param) {
  bool ok = !name.empty() && name.size() <= 128 && name.front() != '.' && name.back() != '.';
  for (size_t i = 0; ok && i < name.size(); ++i) {
    const char c = name[i];
    ok = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || (c == '.' && name[i + 1] != '.');
  }
  if (!ok) {
    BadField(param,
             "\"" + name +
                 "\" is not a sweep field: an OpenAI hyperparameter (n_epochs, batch_size, "
                 "learning_rate_multiplier), a job field (training_file, seed, ...) or a dotted recipe path "
                 "(lora.rank)");
  }
  const std::string prefix = "recipe.";
  return name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
}

std::vector<std::string> Split(const std::string& path) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t dot = path.find('.', start);
    out.push_back(path.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) return out;
    start = dot + 1;
  }
}

// The error params of ParseJobRequest that a field's value can cause.
std::vector<std::string> Blamable(const std::string& field) {
  if (IsHyper(field)) {
    return {"hyperparameters." + field, "method.supervised.hyperparameters." + field,
            "method.dpo.hyperparameters." + field, "recipe." + HyperFields().at(field)};
  }
  if (field == "seed") return {"seed", "recipe.seed"};
  if (TopField(field)) return {field};
  return {"recipe." + field};
}

// `param` is `path` or lies inside it.
bool Covers(const std::string& path, const std::string& param) {
  if (param.rfind(path, 0) != 0) return false;
  return param.size() == path.size() || param[path.size()] == '.' || param[path.size()] == '[';
}

double Seconds(int64_t ms) { return static_cast<double>(ms) / 1000.0; }

const std::vector<std::string>& SweepMetricNames() {
  static const std::vector<std::string> m = {
      "train_loss", "eval_loss", "eval_token_acc", "eval_exact_match", "eval_label_acc", "wall_s", "cost"};
  return m;
}

// A run's status: its job's; before its job exists, cancelled if the sweep
// was, else none (the run is pending).
std::optional<JobStatus> RunStatus(const SweepRecord& sweep, const SweepRunView& r) {
  if (r.job) return r.job->status;
  if (sweep.cancelled_at) return JobStatus::kCancelled;
  return std::nullopt;
}

bool Over(std::optional<JobStatus> s) { return s && IsTerminal(*s); }

// The run's metric value, or null.
Json MetricOf(const Json& run, const std::string& metric) {
  if (metric == "wall_s") return run["wall_s"];
  if (metric == "cost") return run["usage"]["cost"];
  return run["metrics"].value(metric, Json());
}

}  // namespace

std::vector<SweepPoint> ExpandSweep(const Json& body) {
  if (!body.is_object()) BadField("body", "must be a JSON object");
  FieldReader f(body, "");
  const Json job = f.Raw("job");
  const Json grid = f.Raw("grid");
  const Json runs = f.Raw("runs");
  f.RejectUnknown();
  if (job.is_null())
    BadField("job", "required: the job body every run starts from (as for POST /v1/fine_tuning/jobs)");
  if (!job.is_object()) BadField("job", "must be an object (a fine-tuning job body)");
  if (grid.is_null() && runs.is_null()) {
    BadField("grid", "required: a grid {field: [values, ...]} or runs [{field: value, ...}, ...]");
  }
  if (!grid.is_null() && !runs.is_null()) BadField("runs", "give a grid or runs, not both");

  std::vector<SweepPoint> out;
  if (!grid.is_null()) {
    if (!grid.is_object() || grid.empty())
      BadField("grid", "must be an object {field: [values, ...]} naming a field");
    struct Axis {
      std::string name, canon;
      const Json* values;
    };
    std::vector<Axis> axes;
    std::set<std::string> seen;
    // The product of the value counts, checked: sixteen fields of sixteen
    // values make 2^64, which no integer holds (a double's did not convert
    // back), so past that the count is only "more than".
    uint64_t total = 1;
    bool saturated = false;
    for (auto it = grid.begin(); it != grid.end(); ++it) {
      const std::string param = "grid." + it.key();
      std::string canon = CanonicalField(it.key(), param);
      if (!seen.insert(canon).second) BadField(param, "names the same field as another grid entry");
      if (!it->is_array() || it->empty()) BadField(param, "must be a non-empty array of values");
      if (!saturated && __builtin_mul_overflow(total, static_cast<uint64_t>(it->size()), &total))
        saturated = true;
      axes.push_back({it.key(), canon, &*it});
    }
    if (saturated || total > kMaxSweepPoints) {
      const std::string count = saturated ? "more than " + std::to_string(UINT64_MAX) : std::to_string(total);
      BadField("grid", "has " + count + " points; a sweep has at most " + std::to_string(kMaxSweepPoints));
    }
    std::sort(axes.begin(), axes.end(), [](const Axis& a, const Axis& b) { return a.name < b.name; });
    std::vector<size_t> at(axes.size(), 0);
    for (;;) {
      SweepPoint p;
      for (size_t k = 0; k < axes.size(); ++k) {
        p.overrides[axes[k].canon] = (*axes[k].values)[at[k]];
        p.where[axes[k].canon] = "grid." + axes[k].name + "[" + std::to_string(at[k]) + "]";
      }
      out.push_back(std::move(p));
      size_t k = axes.size();
      while (k > 0 && ++at[k - 1] == axes[k - 1].values->size()) at[--k] = 0;
      if (k == 0) break;
    }
    return out;
  }

  if (!runs.is_array() || runs.empty())
    BadField("runs", "must be a non-empty array of {field: value} objects");
  if (runs.size() > kMaxSweepPoints) {
    BadField("runs", "has " + std::to_string(runs.size()) + " runs; a sweep has at most " +
                         std::to_string(kMaxSweepPoints));
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    const std::string param = "runs[" + std::to_string(i) + "]";
    if (!runs[i].is_object()) BadField(param, "must be an object {field: value, ...}");
    SweepPoint p;
    for (auto it = runs[i].begin(); it != runs[i].end(); ++it) {
      const std::string where = param + "." + it.key();
      std::string canon = CanonicalField(it.key(), where);
      if (p.overrides.contains(canon)) BadField(where, "names the same field as another entry of " + param);
      p.overrides[canon] = *it;
      p.where[canon] = where;
    }
    out.push_back(std::move(p));
  }
  return out;
}

Json PointJobBody(const Json& job, const SweepPoint& point) {
  Json body = job;
  // Fields in name order, so "lora" is set before "lora.rank".
  for (auto it = point.overrides.begin(); it != point.overrides.end(); ++it) {
    const std::string& field = it.key();
    if (TopField(field)) {
      body[field] = *it;
    } else if (IsHyper(field)) {
      Json* hp = nullptr;
      if (body.contains("hyperparameters")) {
        if (!body["hyperparameters"].is_object()) BadField("job.hyperparameters", "must be an object");
        hp = &body["hyperparameters"];
      } else {
        if (!body.contains("method")) body["method"] = {{"type", "supervised"}};
        Json& m = body["method"];
        if (!m.is_object()) BadField("job.method", "must be an object");
        if (!m.contains("type")) m["type"] = "supervised";
        if (!m["type"].is_string()) BadField("job.method.type", "must be \"supervised\" or \"dpo\"");
        const std::string type = m["type"].get<std::string>();
        if (!m.contains(type)) m[type] = Json::object();
        if (!m[type].is_object()) BadField("job.method." + type, "must be an object");
        Json& part = m[type];
        if (!part.contains("hyperparameters")) part["hyperparameters"] = Json::object();
        if (!part["hyperparameters"].is_object())
          BadField("job.method." + type + ".hyperparameters", "must be an object");
        hp = &part["hyperparameters"];
      }
      (*hp)[field] = *it;
    } else {
      if (!body.contains("recipe")) body["recipe"] = Json::object();
      Json* cur = &body["recipe"];
      std::string path = "job.recipe";
      if (!cur->is_object()) BadField(path, "must be an object");
      const std::vector<std::string> parts = Split(field);
      for (size_t k = 0; k + 1 < parts.size(); ++k) {
        path += "." + parts[k];
        if (!cur->contains(parts[k])) (*cur)[parts[k]] = Json::object();
        cur = &(*cur)[parts[k]];
        if (!cur->is_object()) BadField(path, "is not an object, so " + field + " cannot be set in it");
      }
      (*cur)[parts.back()] = *it;
    }
  }
  return body;
}

Status SweepPointError(const Status& s, const SweepPoint& point, size_t index) {
  if (s.code() != Code::kInvalidArgument && s.code() != Code::kNotFound) return s;
  std::string field;
  size_t best = 0;
  for (const auto& [f, where] : point.where) {
    for (const std::string& path : Blamable(f)) {
      if (Covers(path, s.param()) && path.size() > best) {
        best = path.size();
        field = f;
      }
    }
  }
  if (field.empty()) {
    const std::string at = s.param().empty() ? "job" : "job." + s.param();
    return Status(s.code(), at + ": " + s.message(), at);
  }
  const std::string& at = point.where.at(field);
  return Status(
      s.code(),
      at + " (run " + std::to_string(index) + ": " + OverridesText(point.overrides) + "): " + s.message(),
      at);
}

std::string OverridesText(const Json& overrides) {
  std::string out;
  if (!overrides.is_object()) return out;
  for (auto it = overrides.begin(); it != overrides.end(); ++it) {
    out +=
        (out.empty() ? "" : " ") + it.key() + "=" + (it->is_string() ? it->get<std::string>() : it->dump());
  }
  return out;
}

std::vector<SweepRunView> LoadSweepRuns(Metadata& md, const SweepRecord& sweep) {
  std::vector<SweepRunView> out;
  for (const Json& r : sweep.runs) {
    SweepRunView v;
    v.job_id = r.value("job_id", "");
    v.overrides = r.value("overrides", Json::object());
    auto job = md.GetJob(sweep.org_id, v.job_id);
    if (job.ok()) {
      v.job = job.value();
      auto attempts = md.ListAttempts(v.job_id);
      if (!attempts.ok()) throw Error(attempts.status());
      v.attempts = attempts.value();
      auto usage = md.JobUsage(v.job_id);
      if (!usage.ok()) throw Error(usage.status());
      v.usage = usage.value();
    } else if (job.status().code() != Code::kNotFound) {
      throw Error(job.status());
    }
    out.push_back(std::move(v));
  }
  return out;
}

void CheckSweepMetric(const std::string& metric) {
  if (metric.empty() || std::count(SweepMetricNames().begin(), SweepMetricNames().end(), metric)) return;
  std::string names;
  for (const auto& m : SweepMetricNames()) names += (names.empty() ? "" : ", ") + m;
  BadField("metric", "unknown metric \"" + metric + "\"; runs are ranked by one of " + names);
}

bool MetricHigherIsBetter(const std::string& metric) {
  return metric.find("_acc") != std::string::npos || metric.find("exact_match") != std::string::npos;
}

JobStatus SweepStatus(const SweepRecord& sweep, const std::vector<SweepRunView>& runs) {
  bool all_succeeded = true, any_failed = false;
  for (const SweepRunView& r : runs) {
    const std::optional<JobStatus> s = RunStatus(sweep, r);
    if (!Over(s)) return JobStatus::kRunning;
    all_succeeded = all_succeeded && s == JobStatus::kSucceeded;
    any_failed = any_failed || s == JobStatus::kFailed;
  }
  if (all_succeeded) return JobStatus::kSucceeded;
  if (sweep.cancelled_at) return JobStatus::kCancelled;
  return any_failed ? JobStatus::kFailed : JobStatus::kCancelled;
}

Json SweepJson(const SweepRecord& sweep, const std::vector<SweepRunView>& runs, const std::string& metric_in,
               int64_t now_ms) {
  CheckSweepMetric(metric_in);
  std::string metric = metric_in;
  if (metric.empty()) {
    bool all_valid = true, any_job = false;
    for (const SweepRunView& r : runs) {
      if (!r.job) continue;
      any_job = true;
      const Json v = r.job->spec.value("validation_file", Json());
      all_valid = all_valid && v.is_string() && !v.get<std::string>().empty();
    }
    metric = any_job && all_valid ? "eval_loss" : "train_loss";
  }
  const JobStatus status = SweepStatus(sweep, runs);
  const bool higher = MetricHigherIsBetter(metric);

  Json table = Json::array();
  Json counts = Json::object();
  double seconds = 0, cost = 0;
  int64_t first_ms = 0, last_ms = 0, finished_at = 0;
  bool open = false;
  Json best;
  double best_value = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    const SweepRunView& r = runs[i];
    const std::optional<JobStatus> rs = RunStatus(sweep, r);
    const std::string rs_name = rs ? std::string(ToString(*rs)) : "pending";
    counts[rs_name] = counts.value(rs_name, 0) + 1;
    Json metrics = {{"train_loss", Json()},
                    {"eval_loss", Json()},
                    {"eval_token_acc", Json()},
                    {"eval_exact_match", Json()},
                    {"eval_label_acc", Json()}};
    Json wall;
    if (r.job) {
      const Json& res = r.job->result;
      if (res.is_object()) {
        if (res.contains("train_loss")) metrics["train_loss"] = res["train_loss"];
        const Json final = res.value("final", Json());
        if (final.is_object()) {
          for (const char* k : {"eval_loss", "eval_token_acc", "eval_exact_match", "eval_label_acc"}) {
            metrics[k] = final.value(k, Json());
          }
        }
      }
      int64_t start = 0, end = 0;
      bool run_open = false;
      for (const AttemptRecord& a : r.attempts) {
        if (!start || a.started_ms < start) start = a.started_ms;
        if (a.ended_ms)
          end = std::max(end, a.ended_ms);
        else
          run_open = true;
      }
      if (start) {
        if (run_open || !Over(rs)) end = std::max(end, now_ms);
        wall = Seconds(end - start);
        if (!first_ms || start < first_ms) first_ms = start;
        last_ms = std::max(last_ms, end);
        open = open || run_open || !Over(rs);
      }
      finished_at = std::max(finished_at, r.job->finished_at);
      seconds += r.usage.seconds;
      cost += r.usage.cost;
    }
    Json row = {{"index", i},
                {"job_id", r.job_id},
                {"overrides", r.overrides},
                {"status", rs_name},
                {"step", r.job ? Json(r.job->step) : Json()},
                {"total_steps", r.job ? Json(r.job->total_steps) : Json()},
                {"fine_tuned_model",
                 r.job && !r.job->fine_tuned_model.empty() ? Json(r.job->fine_tuned_model) : Json()},
                {"metrics", metrics},
                {"wall_s", wall},
                {"usage", {{"seconds", r.usage.seconds}, {"cost", r.usage.cost}}},
                {"error", r.job ? r.job->error : Json()}};
    const Json value = MetricOf(row, metric);
    if (rs == JobStatus::kSucceeded && value.is_number()) {
      const double v = value.get<double>();
      if (std::isfinite(v) && (best.is_null() || (higher ? v > best_value : v < best_value))) {
        best_value = v;
        best = {{"index", i},
                {"job_id", r.job_id},
                {"overrides", r.overrides},
                {"value", v},
                {"fine_tuned_model", row["fine_tuned_model"]}};
      }
    }
    table.push_back(std::move(row));
  }
  const bool over = IsTerminal(status);
  return {
      {"object", "sweep"},
      {"id", sweep.id},
      {"organization_id", sweep.org_id},
      {"created_at", sweep.created_at},
      {"finished_at", over && finished_at ? Json(finished_at) : Json()},
      {"status", ToString(status)},
      {"cancelled_at", sweep.cancelled_at ? Json(sweep.cancelled_at) : Json()},
      {"request", sweep.request},
      {"metric", metric},
      {"metric_goal", higher ? "max" : "min"},
      {"best", best},
      {"counts", counts},
      {"wall_s", first_ms ? Json(Seconds((open ? std::max(last_ms, now_ms) : last_ms) - first_ms)) : Json()},
      {"usage", {{"seconds", seconds}, {"cost", cost}}},
      {"runs", table}};
}

}  // namespace burst
