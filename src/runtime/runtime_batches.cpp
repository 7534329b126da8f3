// A batch's end (OpenAI's Batch API; api/batch_request.h): the files its
// attempt assembled become the organisation's files, under the ids the
// batch's spec fixed when it was created.
#include "runtime/runtime.h"
#include "runtime/runtime_internal.h"
#include "store/keys.h"

namespace burst {

namespace {

// One assembled file as the worker reports it: {key, bytes, sha256, lines}.
// Its key must be this attempt's own (store/keys.h BatchFileKey).
Status CheckAssembled(const Json& f, const std::string& want_key, const char* name) {
  if (!f.is_object() || f.value("key", "") != want_key || !f.value("bytes", Json()).is_number_integer() ||
      !f.value("lines", Json()).is_number_integer() || !f.value("sha256", Json()).is_string()) {
    return Status(Code::kInvalidArgument,
                  std::string("the batch's ") + name + " file is not this attempt's (" + want_key + ")",
                  name);
  }
  return Status();
}

}  // namespace

Status Runtime::FinishBatch(JobRecord& job, int64_t attempt, const Json& result, int64_t now) {
  const std::string prefix = JobPrefix(job.org_id, job.id);
  struct Out {
    const char* name;  // in the result and the key
    const char* id_field;
    const char* suffix;
  };
  Json files = Json::object();
  for (const Out& o :
       {Out{"output", "output_file_id", "_output.jsonl"}, Out{"errors", "error_file_id", "_error.jsonl"}}) {
    const Json f = result.is_object() ? result.value(o.name, Json()) : Json();
    // The attempt has ended: a result that does not check fails the batch
    // (it would fail the same way again) rather than leave it running.
    if (Status s = CheckAssembled(f, BatchFileKey(prefix, attempt, o.name), o.name); !s.ok())
      return FinishJob(job, JobStatus::kFailed, StatusJson(s), now);
    if (f.at("lines").get<int64_t>() == 0) continue;  // OpenAI gives no file for no lines
    FileRecord rec;
    rec.id = job.spec.value(o.id_field, "");
    rec.org_id = job.org_id;
    // Registered already when this control plane stopped between the files
    // and the job's end (the batch ran again): the file made then stands.
    if (!md_.GetFile(job.org_id, rec.id).ok()) {
      rec.filename = job.id + o.suffix;
      rec.purpose = "batch_output";
      rec.bytes = f.at("bytes").get<int64_t>();
      rec.sha256 = f.at("sha256").get<std::string>();
      rec.format = "batch_output";
      rec.examples = f.at("lines").get<int64_t>();
      rec.object_key = f.at("key").get<std::string>();
      if (Status s = md_.CreateFile(rec); !s.ok()) return s;
    }
    files[o.id_field] = rec.id;
  }
  Json kept = job.result.is_object() ? job.result : Json::object();
  for (const auto& [k, v] : result.items())
    if (k != "output" && k != "errors") kept[k] = v;
  kept.update(files);
  job.result = std::move(kept);
  const Json counts = job.result.value("request_counts", Json::object());
  job.step = counts.value("completed", int64_t{0}) + counts.value("failed", int64_t{0});
  return FinishJob(job, JobStatus::kSucceeded, Json(), now);
}

}  // namespace burst
