#include "api/batch_request.h"

#include <chrono>
#include <set>

#include "api/models.h"
#include "api/sample_request.h"
#include "core/fs.h"
#include "core/ids.h"
#include "core/status.h"
#include "store/object_store.h"

namespace burst {

namespace {

constexpr size_t kMaxCustomIdBytes = 512;
constexpr int64_t kBatchChunkLines = 64;  // lines per part (worker/batch_run.h)
constexpr int64_t kBatchWindowS = 86400;  // completion_window "24h"

bool IsBatchEndpoint(const std::string& url) {
  return url == "/v1/chat/completions" || url == "/v1/completions";
}

// Calls `each(line number, object)` for every non-empty line, after the
// line's envelope is checked; `where` names the file in errors.
template <typename Each>
void ForEachBatchLine(std::string_view content, const std::string& where, Each each) {
  std::set<std::string> ids;
  int64_t number = 0, lines = 0;
  for (size_t at = 0; at < content.size();) {
    size_t end = content.find('\n', at);
    if (end == std::string_view::npos) end = content.size();
    const std::string_view text = content.substr(at, end - at);
    at = end + 1;
    ++number;
    if (text.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string here = where + ":" + std::to_string(number);
    if (++lines > kMaxBatchLines)
      BadField(here, "a batch holds at most " + std::to_string(kMaxBatchLines) + " requests");
    Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) BadField(here, "each line must be a JSON object {custom_id, method, url, body}");
    const Json id = j.value("custom_id", Json());
    if (!id.is_string() || id.get<std::string>().empty() || id.get<std::string>().size() > kMaxCustomIdBytes)
      BadField(here + ": custom_id", "must be a string of 1 to 512 bytes");
    if (!ids.insert(id.get<std::string>()).second)
      BadField(here + ": custom_id", "\"" + id.get<std::string>() + "\" is used by an earlier line");
    if (j.value("method", Json()) != "POST") BadField(here + ": method", "must be \"POST\"");
    const Json url = j.value("url", Json());
    if (!url.is_string() || !IsBatchEndpoint(url.get<std::string>()))
      BadField(here + ": url", "must be \"/v1/chat/completions\" or \"/v1/completions\"");
    if (!j.value("body", Json()).is_object()) BadField(here + ": body", "must be a JSON object");
    for (const auto& [k, v] : j.items()) {
      if (k != "custom_id" && k != "method" && k != "url" && k != "body")
        BadField(here + ": " + k, "unknown field (a line holds custom_id, method, url and body)");
    }
    each(number, j);
  }
  if (lines == 0) BadField(where, "holds no requests");
}

}  // namespace

BatchFileCheck CheckBatchBytes(std::string_view content, const std::string& filename) {
  BatchFileCheck out;
  ForEachBatchLine(content, filename, [&](int64_t, const Json&) { ++out.lines; });
  out.sha256 = Sha256Hex(content);
  return out;
}

ParsedBatch ParseBatchRequest(const Json& body, const JobRequestContext& ctx) {
  if (!body.is_object()) BadField("body", "must be a JSON object");
  FieldReader f(body, "");
  const std::string file_id = f.String("input_file_id", "");
  if (file_id.empty()) BadField("input_file_id", "required: a file uploaded with purpose \"batch\"");
  const std::string endpoint = f.String("endpoint", "");
  if (!IsBatchEndpoint(endpoint))
    BadField("endpoint", "must be \"/v1/chat/completions\" or \"/v1/completions\"");
  const std::string window = f.String("completion_window", "");
  if (window != "24h") BadField("completion_window", "must be \"24h\"");
  Json metadata = f.Raw("metadata");
  if (metadata.is_null()) metadata = Json::object();
  if (!metadata.is_object() || metadata.size() > 16)
    BadField("metadata", "must be an object of at most 16 pairs");
  for (const auto& [k, v] : metadata.items()) {
    if (k.size() > 64 || !v.is_string() || v.get<std::string>().size() > 512)
      BadField("metadata." + k, "keys are at most 64 characters, values strings of at most 512");
  }
  f.Raw("output_expires_after");  // accepted: Burst keeps output files until they are deleted
  const GpuRequest gpu = CheckGpuField(f, ctx, 1);
  f.RejectUnknown();

  auto file = ctx.md->GetFile(ctx.org_id, file_id);
  if (!file.ok()) {
    if (file.status().code() == Code::kNotFound) BadField("input_file_id", "no file " + file_id);
    throw Error(file.status());
  }
  if (file.value().purpose != "batch") {
    BadField("input_file_id", "file " + file_id + " was uploaded with purpose \"" + file.value().purpose +
                                  "\"; a batch reads a file uploaded with purpose \"batch\"");
  }
  auto bytes = ctx.store->Get(file.value().object_key);
  if (!bytes.ok()) throw Error(bytes.status());

  ParsedBatch out;
  std::string model;
  int64_t lines = 0;
  const bool chat = endpoint == "/v1/chat/completions";
  ForEachBatchLine(bytes.value(), file_id, [&](int64_t number, const Json& j) {
    const std::string here = file_id + ":" + std::to_string(number);
    if (j["url"] != endpoint) BadField(here + ": url", "is not the batch's endpoint " + endpoint);
    const Json m = j["body"].value("model", Json());
    if (!m.is_string() || m.get<std::string>().empty()) BadField(here + ": body.model", "required");
    if (model.empty()) model = m.get<std::string>();
    if (m != model) BadField(here + ": body.model", "a batch runs one model; the first line names " + model);
    Json line = {{"custom_id", j["custom_id"]}};
    Status s = Try([&] {
      Json req = ParseSampleRequest(j["body"], chat);
      if (req.value("stream", false)) BadField("stream", "a batch's requests are not streamed");
      if (req.contains("scope")) BadField("scope", "a batch's scope is the batch's own");
      line["chat"] = chat;
      line["request"] = std::move(req);
    });
    if (!s.ok()) {  // this line fails alone, in the error file
      line = {{"custom_id", j["custom_id"]},
              {"error",
               {{"status_code", 400},
                {"message", s.message()},
                {"param", s.param()},
                {"code", "invalid_request"}}}};
    }
    out.requests += line.dump() + "\n";
    ++lines;
  });

  const SampleTarget t = ResolveSampleModel(model, ctx.org_id, *ctx.md, ctx.model_roots, ctx.store);
  const ModelInfo entry = CatalogEntryFor(t.base_model, ctx.model_roots);
  CheckDeviceAgainstCatalog(entry, gpu.Asks());
  const ScopeChoice scope = ChooseScope(AskedScope(""), entry, t.full ? "full" : "lora", 0, 0);
  const int64_t now =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  out.job.spec = {{"kind", ToString(TaskKind::kBatch)},
                  {"endpoint", endpoint},
                  {"input_file_id", file_id},
                  {"completion_window", window},
                  {"metadata", metadata},
                  {"model", model},
                  {"base_model", t.base_model},
                  {"checkpoint_prefix", t.checkpoint_prefix},
                  {"full", t.full},
                  {"expires_at", now + kBatchWindowS},
                  {"output_file_id", NewId("file")},
                  {"error_file_id", NewId("file")},
                  {"max_retries", 5},
                  {"scope", ToString(scope.scope)},
                  {"scope_reason", scope.reason},
                  {"batch", {{"chunk_lines", kBatchChunkLines}, {"lines", lines}, {"model", model}}}};
  if (gpu.Asks()) out.job.spec["gpu"] = GpuRequestJson(gpu);
  out.job.total_steps = lines;
  return out;
}

Json BatchJson(const JobRecord& job, const UsageSum& usage) {
  const Json& s = job.spec;
  const Json r = job.result.is_object() ? job.result : Json::object();
  const auto at = [](int64_t t) { return t > 0 ? Json(t) : Json(); };
  std::string status;
  switch (job.status) {
    case JobStatus::kValidatingFiles:
      status = "validating";
      break;
    case JobStatus::kQueued:
      status = job.attempts == 0 ? "validating" : "in_progress";
      break;
    case JobStatus::kRunning:
    case JobStatus::kPaused:
      status = r.contains("finalizing_at") ? "finalizing" : "in_progress";
      break;
    case JobStatus::kSucceeded:
      status = "completed";
      break;
    case JobStatus::kFailed:
      status = "failed";
      break;
    case JobStatus::kCancelled:
      status = "cancelled";
      break;
  }
  Json counts = r.value("request_counts", Json::object());
  counts = {{"total", s.value("batch", Json::object()).value("lines", int64_t{0})},
            {"completed", counts.value("completed", int64_t{0})},
            {"failed", counts.value("failed", int64_t{0})}};
  Json errors;
  if (job.error.is_object()) {
    errors = {{"object", "list"},
              {"data", Json::array({{{"code", job.error.value("code", "")},
                                     {"message", job.error.value("message", "")},
                                     {"param", job.error.value("param", Json())},
                                     {"line", nullptr}}})}};
  }
  const Json u = r.value("usage", Json::object());
  const int64_t in = u.value("input_tokens", int64_t{0}), out = u.value("output_tokens", int64_t{0});
  const bool done = job.status == JobStatus::kSucceeded;
  return {{"id", job.id},
          {"object", "batch"},
          {"endpoint", s.value("endpoint", "")},
          {"errors", errors},
          {"input_file_id", s.value("input_file_id", "")},
          {"completion_window", s.value("completion_window", "24h")},
          {"status", status},
          {"output_file_id", done ? r.value("output_file_id", Json()) : Json()},
          {"error_file_id", done ? r.value("error_file_id", Json()) : Json()},
          {"created_at", job.created_at},
          {"in_progress_at", at(job.started_at)},
          {"expires_at", s.value("expires_at", Json())},
          {"finalizing_at", r.value("finalizing_at", Json())},
          {"completed_at", done ? at(job.finished_at) : Json()},
          {"failed_at", job.status == JobStatus::kFailed ? at(job.finished_at) : Json()},
          {"expired_at", nullptr},
          {"cancelling_at", nullptr},
          {"cancelled_at", job.status == JobStatus::kCancelled ? at(job.finished_at) : Json()},
          {"request_counts", counts},
          {"metadata", s.value("metadata", Json::object())},
          {"model", s.value("model", "")},
          {"usage",
           {{"input_tokens", in},
            {"input_tokens_details", {{"cached_tokens", 0}}},
            {"output_tokens", out},
            {"output_tokens_details", {{"reasoning_tokens", 0}}},
            {"total_tokens", in + out}}},
          {"burst",
           {{"scope", s.value("scope", "")},
            {"scope_reason", s.value("scope_reason", "")},
            {"gpu", s.value("gpu", Json())},
            {"usage",
             {{"seconds", usage.seconds},
              {"cost", usage.cost},
              {"tokens", usage.tokens},
              {"line", ToString(UsageLine::kBatch)}}}}}};
}

}  // namespace burst
