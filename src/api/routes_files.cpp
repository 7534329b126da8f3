// Files (OpenAI's /v1/files): uploads checked line by line before anything
// is stored, their records, their bytes, their deletion.
#include "api/batch_request.h"
#include "api/context.h"
#include "api/http/multipart.h"
#include "api/result_files.h"
#include "core/fs.h"
#include "core/ids.h"
#include "core/utf8.h"
#include "store/keys.h"
#include "train/data.h"

namespace burst {
namespace {

Json FileJson(const FileRecord& f) {
  return {{"id", f.id},
          {"object", "file"},
          {"bytes", f.bytes},
          {"created_at", f.created_at},
          {"filename", f.filename},
          {"purpose", f.purpose},
          {"status", "processed"},
          {"sha256", f.sha256},
          {"format", f.format},
          {"examples", f.examples}};
}

// An upload's filename as it will be stored and listed: valid UTF-8, no
// control characters, no folders, at most 255 bytes.
Status CheckFilename(const std::string& name) {
  if (name.size() > 255) return Status(Code::kInvalidArgument, "filename is over 255 bytes", "filename");
  if (auto at = InvalidUtf8At(name)) {
    return Status(Code::kInvalidArgument, "filename is not valid UTF-8 (byte " + std::to_string(*at) + ")",
                  "filename");
  }
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f)
      return Status(Code::kInvalidArgument, "filename contains control characters", "filename");
  }
  if (name.find('/') != std::string::npos || name.find('\\') != std::string::npos || name == "." ||
      name == "..") {
    return Status(Code::kInvalidArgument, "filename must be a name, not a path", "filename");
  }
  return Status();
}

void Upload(ApiContext& ctx, const ApiKey& key, const http::Request& req, http::Response& res) {
  const std::optional<std::string> boundary = http::MultipartBoundary(req.header("content-type"));
  if (!boundary) {
    return SendStatus(res, Status(Code::kInvalidArgument, "upload a file as multipart/form-data", "file"));
  }
  // The body was spooled to a file: its parts are read from the file's
  // pages in place, never copied whole into memory.
  const std::string_view body = req.body_file ? req.body_file->View() : std::string_view(req.body);
  if (req.body_file && req.body_file->size() > 0 && body.empty()) {
    return SendStatus(res,
                      Status(Code::kUnavailable, "cannot read the upload back for checking; retry", "file"));
  }
  auto parts = http::ParseMultipart(body, *boundary);
  if (!parts.ok()) return SendStatus(res, parts.status());
  const http::Part* file = http::FindPart(parts.value(), "file");
  if (!file) return SendStatus(res, Status(Code::kInvalidArgument, "missing the \"file\" part", "file"));
  const http::Part* purpose_part = http::FindPart(parts.value(), "purpose");
  const std::string purpose = purpose_part ? std::string(purpose_part->content) : "";
  if (purpose != "fine-tune" && purpose != "batch") {
    return SendStatus(res, Status(Code::kInvalidArgument,
                                  "purpose must be \"fine-tune\" or \"batch\" (got " +
                                      JsonPreview(Json(ToValidUtf8(purpose))) + ")",
                                  "purpose"));
  }
  const std::string filename = file->filename && !file->filename->empty() ? *file->filename : "upload.jsonl";
  if (Status s = CheckFilename(filename); !s.ok()) return SendStatus(res, s);
  const std::string_view content = file->content;
  DataFileCheck check;
  Status checked = Try([&] {
    if (purpose == "fine-tune") {
      check = CheckDataBytes(content, filename);
      return;
    }
    const BatchFileCheck b = CheckBatchBytes(content, filename);  // a batch's input (api/batch_request.h)
    check.sha256 = b.sha256;
    check.format = "batch";
    check.examples = b.lines;
  });
  if (!checked.ok()) return SendStatus(res, checked);

  FileRecord f;
  f.id = NewId("file");
  f.org_id = key.org_id;
  f.filename = filename;
  f.purpose = purpose;
  f.bytes = static_cast<int64_t>(content.size());
  f.sha256 = check.sha256;
  f.format = check.format;
  f.examples = check.examples;
  f.object_key = FileKey(key.org_id, f.id);
  if (Status quota = ctx.CheckStorage(key.org_id, f.bytes, "file"); !quota.ok())
    return SendStatus(res, quota);
  if (Status put = ctx.store.Put(f.object_key, content); !put.ok()) return SendStatus(res, put);
  if (Status rec = ctx.md.CreateFile(f); !rec.ok()) {
    // Nothing half-made: the bytes go too (a failure here leaves bytes no
    // record points at, which is harmless).
    ctx.store.Delete(f.object_key).IgnoreError("the upload already failed; orphaned bytes are unreachable");
    return SendStatus(res, rec);
  }
  ctx.quota->Added(key.org_id, f.bytes);
  SendJson(res, 200, FileJson(f));
}

void List(ApiContext& ctx, const ApiKey& key, const http::Request& req, http::Response& res) {
  int64_t limit = 0;
  if (!ReadLimit(req, res, &limit)) return;
  auto files = ctx.md.ListFiles(key.org_id, req.param("after"), limit + 1);
  if (!files.ok()) return SendStatus(res, files.status());
  SendJson(res, 200, Page(files.value(), limit, FileJson));
}

// A succeeded job's result file (api/result_files.h): its metrics as CSV.
void GetResultFile(ApiContext& ctx, const ApiKey& key, const std::string& file_id, const std::string& job_id,
                   http::Response& res, bool content) {
  auto job = ctx.md.GetJob(key.org_id, job_id);
  if (!job.ok() || job.value().status != JobStatus::kSucceeded) {
    return SendStatus(res, job.ok() || job.status().code() == Code::kNotFound
                               ? Status(Code::kNotFound, "no file " + file_id, "file_id")
                               : job.status());
  }
  auto metrics = ctx.store.Get(MetricsKey(JobPrefix(key.org_id, job_id)));
  if (!metrics.ok()) return SendStatus(res, metrics.status());
  const std::string csv = MetricsCsv(metrics.value());
  if (content) {
    res.status = 200;
    res.set_content(csv, "text/csv");
    return;
  }
  SendJson(res, 200,
           {{"id", file_id},
            {"object", "file"},
            {"bytes", static_cast<int64_t>(csv.size())},
            {"created_at", job.value().finished_at},
            {"filename", "step_metrics.csv"},
            {"purpose", "fine-tune-results"},
            {"status", "processed"}});
}

void Get(ApiContext& ctx, const ApiKey& key, const http::Request& req, http::Response& res, bool content) {
  if (const std::optional<std::string> job = ResultFileJob(req.matches[1])) {
    return GetResultFile(ctx, key, req.matches[1], *job, res, content);
  }
  auto f = OrAnswer(ctx.md.GetFile(key.org_id, req.matches[1]), res);
  if (!f) return;
  if (!content) return SendJson(res, 200, FileJson(*f));
  auto bytes = ctx.store.Get(f->object_key);
  if (!bytes.ok()) return SendStatus(res, bytes.status());
  res.status = 200;
  res.set_content(std::move(bytes).value(), "application/octet-stream");
}

void Delete(ApiContext& ctx, const ApiKey& key, const http::Request& req, http::Response& res) {
  auto f = OrAnswer(ctx.md.GetFile(key.org_id, req.matches[1]), res);
  if (!f) return;
  // The record goes first: a file is gone once nothing refers to it; bytes
  // that outlive a crash here are unreachable and harmless.
  if (Status s = ctx.md.DeleteFile(key.org_id, f->id); !s.ok()) return SendStatus(res, s);
  ctx.store.Delete(f->object_key).IgnoreError("the record is gone; bytes left behind are unreachable");
  ctx.quota->Added(key.org_id, -f->bytes);
  SendJson(res, 200, {{"id", f->id}, {"object", "file"}, {"deleted", true}});
}

}  // namespace

void AddFileRoutes(ApiContext& ctx, Routes& routes) {
  ApiContext* c = &ctx;
  routes.Upload(
      "/v1/files", [c](const ApiKey& k, const auto& req, auto& res) { Upload(*c, k, req, res); },
      ctx.opt.max_body_bytes);
  routes.Get("/v1/files", [c](const ApiKey& k, const auto& req, auto& res) { List(*c, k, req, res); });
  routes.Get("/v1/files/{}",
             [c](const ApiKey& k, const auto& req, auto& res) { Get(*c, k, req, res, false); });
  routes.Get("/v1/files/{}/content",
             [c](const ApiKey& k, const auto& req, auto& res) { Get(*c, k, req, res, true); });
  routes.Delete("/v1/files/{}",
                [c](const ApiKey& k, const auto& req, auto& res) { Delete(*c, k, req, res); });
}

}  // namespace burst
