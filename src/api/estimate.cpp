#include "api/estimate.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/fs.h"

namespace burst {

namespace {
// The exchanges' constants where this organisation has measured none:
// bench/channel_bench.cpp on the 2-core VM (docs/bench.md, "Gradient
// exchange"): Gloo's all-reduce of two members took 0.56 ms + G / 1.0 GB/s
// (two rounds: 0.28 ms each), the folder's ScatterReduce 2.3 ms + G / 0.49
// GB/s (four requests: 0.575 ms each; G put and G got at 0.98 GB/s).
constexpr double kGlooRoundS = 0.28e-3, kGlooBytesPerS = 1.0e9;
constexpr double kStoreRequestS = 0.575e-3, kStoreBytesPerS = 0.98e9;

double FloatsOf(const Json& timing) { return timing.value("trainable_floats", 0.0); }

// Dense bfloat16 matrix rates by GPU type (FLOP/s, the vendors' figures;
// float16 for the T4 and V100, which have no bfloat16 units), for a first
// estimate before any job has finished on that type; 100 TFLOP/s for a
// type not listed.
double PeakBf16(const std::string& type) {
  static const std::map<std::string, double> peak = {
      {"h100", 989e12},      {"h200", 989e12}, {"h800", 989e12}, {"b200", 2250e12}, {"a100-80gb", 312e12},
      {"a100-40gb", 312e12}, {"l40s", 362e12}, {"l40", 181e12},  {"a10g", 70e12},   {"a10", 125e12},
      {"l4", 121e12},        {"t4", 65e12},    {"v100", 125e12}};
  auto it = peak.find(type);
  return it == peak.end() ? 100e12 : it->second;
}
}  // namespace

std::pair<std::string, int64_t> JobDevice(const JobRecord& job) {
  const Json t = job.result.is_object() ? job.result.value("timing", Json()) : Json();
  if (!t.is_object()) return {"cpu", 0};
  return {t.value("device", "cpu"), t.value("gpus", int64_t{0})};
}

double ExchangeSeconds(const std::string& communication, int64_t workers, double floats,
                       int64_t average_every) {
  if (workers <= 1) return 0;
  const double n = static_cast<double>(workers);
  auto one = [&](double f) {
    const double g = 4.0 * f;
    if (communication == "c10d") return 2 * (n - 1) * kGlooRoundS + 2 * (n - 1) / n * g / kGlooBytesPerS;
    return (3 * n - 2) * kStoreRequestS + g / kStoreBytesPerS + 2 * (n - 1) / n * g / kStoreBytesPerS;
  };
  // Model averaging: the step's loss, tokens and vote each step; weights
  // and both moments every K steps.
  if (average_every > 0) return one(3) + one(3 * floats) / static_cast<double>(average_every);
  return one(floats + 3);
}

int64_t TrainableFloats(const std::filesystem::path& model_dir, const Json& recipe) {
  Json c = Json::parse(ReadFile(model_dir / "config.json"), nullptr, /*allow_exceptions=*/false);
  if (!c.is_object()) return 0;
  const int64_t h = c.value("hidden_size", int64_t{0}), inter = c.value("intermediate_size", int64_t{0});
  const int64_t layers = c.value("num_hidden_layers", int64_t{0}),
                heads = c.value("num_attention_heads", int64_t{1});
  const int64_t kv_heads = c.value("num_key_value_heads", heads);
  const int64_t head_dim = c.value("head_dim", heads > 0 ? h / heads : 0);
  if (recipe.value("method", "lora") != "lora") return 0;  // full: the catalog's parameter count (below)
  const int64_t r = recipe.value("lora", Json::object()).value("rank", int64_t{8});
  const int64_t q = heads * head_dim, kv = kv_heads * head_dim;
  const std::map<std::string, int64_t> per_target = {
      {"q", h + q},        {"k", h + kv},     {"v", h + kv},      {"o", q + h},
      {"gate", h + inter}, {"up", h + inter}, {"down", inter + h}};
  Json targets = recipe.value("lora", Json::object()).value("targets", Json::array({"q", "v"}));
  int64_t per_layer = 0;
  for (const Json& t : targets) {
    if (!t.is_string()) continue;
    std::string name = t.get<std::string>();  // "q" or the resolved "q_proj"
    if (name.size() > 5 && name.compare(name.size() - 5, 5, "_proj") == 0) name.resize(name.size() - 5);
    if (per_target.count(name)) per_layer += r * per_target.at(name);
  }
  return per_layer * layers;
}

std::vector<JobRecord> RecentJobs(const std::string& org_id, Metadata& md) {
  auto jobs = md.ListJobs(org_id, "", 500, TaskKind::kTrain);
  if (!jobs.ok()) throw Error(jobs.status());
  return std::move(jobs).value();
}

std::pair<double, int64_t> MeasuredThroughput(const std::string& base_model, int threads,
                                              const std::vector<JobRecord>& jobs) {
  double tokens = 0, seconds = 0;
  int64_t n = 0;
  for (const JobRecord& j : jobs) {
    if (j.status != JobStatus::kSucceeded || j.trained_tokens <= 0 || j.run_seconds <= 0) continue;
    if (j.spec.value("base_model", "") != base_model) continue;
    if (j.spec.value("recipe", Json::object()).value("threads", 0) != threads) continue;
    if (JobDevice(j).first != "cpu") continue;
    tokens += static_cast<double>(j.trained_tokens);
    seconds += j.run_seconds;
    ++n;
  }
  return {n ? tokens / seconds : 0.0, n};
}

Json EstimateJob(const ParsedJob& job, const FileRecord& train, const ModelInfo& model,
                 const std::string& org_id, Metadata& md, const EstimatePrices& prices) {
  const std::vector<JobRecord> jobs = RecentJobs(org_id, md);
  const Json& recipe = job.spec.at("recipe");
  // A step feeds batch_size x grad_accum sequences on each of its workers.
  const int64_t batch = recipe.value("batch_size", int64_t{1}) * recipe.value("grad_accum", int64_t{1}) *
                        job.spec.value("workers", int64_t{1});
  const int64_t max_seq = recipe.value("max_seq_len", int64_t{512});
  const std::string base = job.spec.value("base_model", "");
  // Sequences the job will feed: steps x effective batch, at most the
  // dataset's examples per epoch.
  const int64_t steps = job.total_steps;
  const int64_t epochs = recipe.value("epochs", int64_t{1});
  const int64_t sequences = std::min(steps * batch, train.examples * epochs);
  // Tokens per sequence: measured on this model's finished jobs, else the
  // file's bytes per example at ~4 bytes a token.
  double per_seq = 0;
  std::string per_seq_source;
  {
    double toks = 0, seqs = 0;
    for (const JobRecord& j : jobs) {
      if (j.status != JobStatus::kSucceeded || j.trained_tokens <= 0 || j.step <= 0) continue;
      if (j.spec.value("base_model", "") != base) continue;
      // The same data: the same bytes, whatever upload they came from.
      auto f = md.GetFile(org_id, j.spec.value("training_file", ""));
      if (!f.ok() || f.value().sha256 != train.sha256) continue;
      const Json& r = j.spec.value("recipe", Json::object());
      toks += static_cast<double>(j.trained_tokens);
      seqs += static_cast<double>(j.step * r.value("batch_size", int64_t{1}) *
                                  r.value("grad_accum", int64_t{1}) * j.spec.value("workers", int64_t{1}));
    }
    if (seqs > 0) {
      per_seq = toks / seqs;
      per_seq_source = "measured: earlier jobs of this model on the same data";
    }
  }
  if (per_seq <= 0) {
    per_seq = std::min<double>(static_cast<double>(max_seq),
                               static_cast<double>(train.bytes) / std::max<int64_t>(1, train.examples) / 4.0);
    per_seq_source = "estimated: the file's bytes per example at ~4 bytes a token";
  }
  const double tokens = per_seq * static_cast<double>(sequences);
  const int64_t workers = job.spec.value("workers", int64_t{1});
  const int64_t average_every = job.spec.value("average_every", int64_t{0});
  std::string communication = job.spec.value("communication", "auto");
  if (communication == "auto") communication = prices.auto_communication;
  // Where it would run: its first GPU claim the pool can give, or a CPU slot.
  std::vector<DeviceClaim> claims;
  TaskDevices(job.spec, prices.pool, workers, &claims).IgnoreError("ParseJobRequest checked it");
  const DeviceClaim device = claims.empty() ? DeviceClaim{} : claims[0];
  const std::string where =
      device.gpu() ? device.Text() + " workers"
                   : std::to_string(prices.threads_per_slot) + "-thread " + prices.slot_type + " slots";
  auto same_device = [&](const JobRecord& j) {
    const auto [type, gpus] = JobDevice(j);
    if (!device.gpu())
      return type == "cpu" &&
             j.spec.value("recipe", Json::object()).value("threads", 0) == prices.threads_per_slot;
    return type == device.type && gpus == device.count;
  };
  // Per worker, the step's compute: measured on finished jobs' step times
  // (their results' "timing"), else their whole run, else the model's size.
  double tps = 0, overhead = 0;
  int64_t timed = 0, overheads = 0;
  std::map<std::string, std::pair<double, int64_t>> fit;  // communication -> (sum of measured/model, jobs)
  for (const JobRecord& j : jobs) {
    const Json timing = j.result.is_object() ? j.result.value("timing", Json()) : Json();
    if (j.status != JobStatus::kSucceeded || !timing.is_object() || j.step <= 0 || j.trained_tokens <= 0)
      continue;
    const int64_t n = timing.value("workers", int64_t{1});
    const double step_s = timing.value("step_s", 0.0), exchange_s = timing.value("exchange_s", 0.0);
    if (n > 1 && exchange_s > 0) {
      const double model_s = ExchangeSeconds(timing.value("communication", ""), n, FloatsOf(timing),
                                             timing.value("average_every", int64_t{0}));
      auto& [sum, count] = fit[timing.value("communication", "")];
      sum += exchange_s / model_s;
      ++count;
    }
    if (j.spec.value("base_model", "") != base || !same_device(j) || step_s <= exchange_s) continue;
    const double per_step = static_cast<double>(j.trained_tokens) / static_cast<double>(j.step);
    tps += per_step / static_cast<double>(n) / (step_s - exchange_s);
    ++timed;
    if (j.attempts == 1 && timing.value("steps", int64_t{0}) == j.step) {  // one attempt: its run is this one
      overhead += std::max(0.0, j.run_seconds - static_cast<double>(j.step) * step_s);
      ++overheads;
    }
  }
  std::string tps_source;
  if (timed > 0) {
    tps /= static_cast<double>(timed);
    tps_source = "measured: " + std::to_string(timed) + " finished job(s) of " + model.id + " on " + where +
                 " (their steps' compute)";
  } else if (auto [run_tps, measured_jobs] = device.gpu()
                                                 ? std::pair<double, int64_t>{0.0, 0}
                                                 : MeasuredThroughput(base, prices.threads_per_slot, jobs);
             measured_jobs > 0) {
    tps = run_tps;
    tps_source =
        "measured: " + std::to_string(measured_jobs) + " finished job(s) of " + model.id + " on " + where;
  } else if (device.gpu()) {
    // ~6 FLOPs per parameter per trained token at 40% of the type's bf16 rate.
    tps = 0.4 * PeakBf16(device.type) * static_cast<double>(device.count) /
          (6.0 * static_cast<double>(std::max<int64_t>(1, model.parameters)));
    tps_source = "estimated from the model's size at 40% of " + device.type + "'s bfloat16 rate: no job of " +
                 model.id + " has finished on " + where + " yet";
  } else {
    // ~6 FLOPs per parameter per trained token at ~25 GFLOP/s per thread.
    tps = prices.threads_per_slot * 2.5e10 /
          (6.0 * static_cast<double>(std::max<int64_t>(1, model.parameters)));
    tps_source =
        "estimated from the model's size: no job of " + model.id + " has finished on this server yet";
  }
  if (overheads > 0) overhead /= static_cast<double>(overheads);
  const std::string overhead_source =
      overheads > 0 ? "measured: the mean of " + std::to_string(overheads) +
                          " finished job(s)' run time outside their steps (loading, evaluation, checkpoints)"
                    : "not measured yet (0)";
  // The exchange: this organisation's gang jobs fit the model's scale for
  // their communication; otherwise the bench's constants.
  int64_t floats = TrainableFloats(job.spec.value("base_model", ""), recipe);
  if (floats <= 0) floats = model.parameters;
  double exchange = ExchangeSeconds(communication, workers, static_cast<double>(floats), average_every);
  std::string exchange_source = "no exchange (one worker)";
  if (workers > 1) {
    auto f = fit.find(communication);
    if (f != fit.end() && f->second.second > 0) {
      exchange *= f->second.first / static_cast<double>(f->second.second);
      exchange_source = "fitted: the model scaled to " + std::to_string(f->second.second) +
                        " finished job(s) of this organisation on " + communication;
    } else {
      exchange_source = "estimated: the model with the channel bench's constants (docs/cost-model.md), " +
                        std::string("no finished job on ") + communication + " to fit it to";
    }
  }
  const double compute = tokens / (static_cast<double>(workers) * tps);
  const double exchanges = static_cast<double>(steps) * exchange;
  const double seconds = overhead + compute + exchanges;
  const double per_worker_second =
      DevicePricePerSecond(device, prices.per_slot_second, prices.per_gpu_second).value_or(0.0);
  const double dedicated = static_cast<double>(workers) * seconds * per_worker_second;
  const double serverless = tokens / 1e6 * prices.train_per_mtok;
  // The scope ParseJobRequest just chose.
  const BillingScope scope = RecordedScope(job.spec, "the estimated job").ValueOrThrow();
  return {{"object", "fine_tuning.job.estimate"},
          {"model", job.spec.value("model", "")},
          {"scope", ToString(scope)},
          {"scope_reason", job.spec.value("scope_reason", "")},
          {"workers", workers},
          {"device", device.Text()},
          {"price_per_worker_hour", per_worker_second * 3600},
          {"communication", workers > 1 ? Json(communication) : Json()},
          {"over_slots", workers > prices.slots},
          {"total_steps", steps},
          {"sequences", sequences},
          {"tokens", std::llround(tokens)},
          {"tokens_per_sequence", per_seq},
          {"tokens_per_sequence_source", per_seq_source},
          {"tokens_per_second", tps},
          {"tokens_per_second_source", tps_source},
          {"trainable_floats", floats},
          {"seconds", seconds},
          {"seconds_compute", compute},
          {"seconds_exchange", exchanges},
          {"exchange_per_step_s", exchange},
          {"exchange_source", exchange_source},
          {"seconds_overhead", overhead},
          {"overhead_source", overhead_source},
          {"cost", scope == BillingScope::kServerless ? serverless : dedicated},
          {"cost_if_dedicated", dedicated},
          {"cost_if_serverless", model.serverless ? Json(serverless) : Json()}};
}

}  // namespace burst
