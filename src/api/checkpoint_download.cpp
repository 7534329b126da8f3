#include "api/checkpoint_download.h"

#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "api/context.h"
#include "core/checkpoint_names.h"
#include "core/fs.h"
#include "core/utf8.h"
#include "store/keys.h"

namespace burst {
namespace fs = std::filesystem;
namespace {

// A file of the tar: its name under NAME/ and where its bytes are.
struct Entry {
  std::string name;
  fs::path path;
};

// A spec's string field ("" when absent, null or not a string: a job
// without a validation file has null there).
std::string Text(const Json& spec, const char* key) {
  const Json v = spec.is_object() ? spec.value(key, Json()) : Json();
  return v.is_string() ? v.get<std::string>() : std::string();
}

// The training method of a job's recipe ("lora" unless it says otherwise).
std::string MethodOf(const JobRecord& job) {
  const std::string m = Text(job.spec.value("recipe", Json::object()), "method");
  return m.empty() ? "lora" : m;
}

std::string Num(double v, const char* fmt = "%.4f") {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// Markdown that shows `s` as it is and means nothing else: the card's
// names come from the organisation (a file's name, the model, the suffix,
// the recipe) and must not become raw HTML, a link or a table cell of their
// own in whatever renders the card. A plain name (letters, digits and
// . _ : / + = @ , -) goes in a code span, where nothing is markup; anything
// else goes as text with every ASCII character but letters, digits, the
// space and '-' (markup only at a line's start, where no name goes) as a
// numeric character reference (&#60; for <), which renderers show as that
// character and never read as markup (nor as a table's |).
// Control characters, which could end a table row, and the bidirectional
// overrides, which could make a name read as another, become U+FFFD.
std::string MdLiteral(const std::string& raw) {
  const std::string s = ToValidUtf8(raw);
  const auto plain = [](unsigned char c) {
    return std::isalnum(c) || std::strchr("._:/+=@,-", c) != nullptr;
  };
  if (!s.empty() &&
      std::all_of(s.begin(), s.end(), [&](char c) { return plain(static_cast<unsigned char>(c)); })) {
    return "`" + s + "`";
  }
  const auto byte = [&s](size_t i) { return i < s.size() ? static_cast<unsigned char>(s[i]) : 0; };
  static const std::string kReplacement = "\xEF\xBF\xBD";
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = byte(i);
    if (c < 0x20 || c == 0x7f) {
      out += kReplacement;
    } else if (c < 0x80) {
      const bool literal = std::isalnum(c) || c == ' ' || c == '-';
      out += literal ? std::string(1, static_cast<char>(c)) : "&#" + std::to_string(c) + ";";
    } else if (c == 0xE2 &&
               ((byte(i + 1) == 0x80 && byte(i + 2) >= 0xAA && byte(i + 2) <= 0xAE) ||   // U+202A..E
                (byte(i + 1) == 0x81 && byte(i + 2) >= 0xA6 && byte(i + 2) <= 0xA9))) {  // U+2066..9
      out += kReplacement;
      i += 2;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// libarchive's write callback: into the response stream; -1 once the client left.
la_ssize_t WriteToClient(struct archive*, void* out, const void* buf, size_t n) {
  auto* w = static_cast<http::StreamWriter*>(out);
  return w->Write(std::string_view(static_cast<const char*>(buf), n)) ? static_cast<la_ssize_t>(n) : -1;
}

// Writes the entries as a pax tar to the client, a file's bytes in 1 MiB pieces.
bool WriteTar(http::StreamWriter& out, const std::string& top, const std::vector<Entry>& entries) {
  struct archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  archive_write_set_bytes_per_block(a, 0);  // no padding to 10 KiB blocks: bytes go out as written
  bool ok = archive_write_open(a, &out, nullptr, WriteToClient, nullptr) == ARCHIVE_OK;
  std::vector<char> buf(1 << 20);
  for (const Entry& e : entries) {
    if (!ok) break;
    struct archive_entry* h = archive_entry_new();
    archive_entry_set_pathname(h, (top + "/" + e.name).c_str());
    archive_entry_set_size(h, static_cast<la_int64_t>(fs::file_size(e.path)));
    archive_entry_set_filetype(h, AE_IFREG);
    archive_entry_set_perm(h, 0644);
    archive_entry_set_mtime(h, static_cast<time_t>(std::time(nullptr)), 0);
    ok = archive_write_header(a, h) == ARCHIVE_OK;
    archive_entry_free(h);
    std::ifstream in(e.path, std::ios::binary);
    while (ok && in) {
      in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      const std::streamsize n = in.gcount();
      if (n > 0) ok = archive_write_data(a, buf.data(), static_cast<size_t>(n)) == n;
    }
  }
  ok = archive_write_close(a) == ARCHIVE_OK && ok;
  archive_write_free(a);
  return ok;
}

void Download(ApiContext& ctx, const ApiKey& key, const http::Request& req, http::Response& res) {
  auto job = ctx.md.GetJob(key.org_id, req.matches[1]);
  if (!job.ok()) return SendStatus(res, job.status());
  // The checkpoint: its id (ftckpt-...) or its step.
  const std::string ckpt = req.matches[2];
  int64_t step = 0;
  if (const std::optional<CheckpointName> n = ParseCheckpointName(ckpt)) {
    if (n->job_id == job.value().id) step = n->step;
  } else if (!ckpt.empty() && ckpt.size() < 19 && ckpt.find_first_not_of("0123456789") == std::string::npos) {
    step = std::stoll(ckpt);
  }
  auto cps = step > 0 ? ctx.md.ListCheckpoints(job.value().id, step + 1, 1)
                      : Result<std::vector<CheckpointRecord>>(std::vector<CheckpointRecord>{});
  if (!cps.ok()) return SendStatus(res, cps.status());
  if (cps.value().empty() || cps.value()[0].step != step) {
    return SendStatus(
        res, Status(Code::kNotFound,
                    "no checkpoint " + ckpt + " of " + job.value().id + " (GET /v1/fine_tuning/jobs/" +
                        job.value().id + "/checkpoints lists them)",
                    "checkpoint"));
  }
  const CheckpointRecord cp = cps.value()[0];
  const JobRecord& j = job.value();
  const std::string top = j.id + "-step-" + std::to_string(step);
  const std::string model_name = Text(j.spec, "model");
  const std::string prefix = SamplerPrefix(cp.prefix);

  // Fetch first: a store that fails answers an error, not a cut tar.
  const fs::path tmp = MakeTempDir("burst-download");
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  };
  auto cleanup = std::make_shared<Cleanup>(Cleanup{tmp});
  std::vector<Entry> entries;
  Status s = Try([&] {
    auto objects = ctx.store.List(prefix);
    if (!objects.ok()) throw Error(objects.status());
    if (objects.value().empty())
      throw Error(Code::kNotFound, "checkpoint " + ckpt + " has no files in the store", "checkpoint");
    for (const ObjectInfo& o : objects.value()) {
      const std::string rel = o.key.substr(prefix.size());
      if (rel == "manifest.json" || rel == "README.md" || rel.empty() || rel.find("..") != std::string::npos)
        continue;
      const fs::path dst = tmp / "files" / rel;
      fs::create_directories(dst.parent_path());
      if (Status g = ctx.store.GetToFile(o.key, dst); !g.ok()) throw Error(g);
      if (rel == "adapter_config.json") {
        // The base model by its catalog name, as a client of any server names it.
        Json cfg = ParseJson(ReadFile(dst), "adapter_config.json");
        if (!model_name.empty()) cfg["base_model_name_or_path"] = model_name;
        WriteFileAtomic(dst, cfg.dump(2) + "\n");
      }
      entries.push_back({rel, dst});
    }
    std::optional<FileRecord> train, valid;
    const std::string train_id = Text(j.spec, "training_file"), valid_id = Text(j.spec, "validation_file");
    if (auto f = ctx.md.GetFile(key.org_id, train_id); !train_id.empty() && f.ok()) train = f.value();
    if (auto f = ctx.md.GetFile(key.org_id, valid_id); !valid_id.empty() && f.ok()) valid = f.value();
    const fs::path base_dir = Text(j.spec, "base_model");
    std::string notice;
    if (!base_dir.empty() && fs::is_regular_file(base_dir / "NOTICE")) notice = ReadFile(base_dir / "NOTICE");
    const fs::path card = tmp / "files" / "README.md";
    WriteFileAtomic(card, ModelCard(j, cp, CheckpointModelName(j.id, step, SuffixOf(j.spec)),
                                    train ? &*train : nullptr, valid ? &*valid : nullptr, notice));
    entries.push_back({"README.md", card});
    // What was shipped, so a reader can check it (train/checkpoint.h's shape).
    Json files = Json::object();
    for (const Entry& e : entries)
      files[e.name] = {{"bytes", fs::file_size(e.path)}, {"sha256", Sha256File(e.path)}};
    const fs::path manifest = tmp / "files" / "manifest.json";
    WriteFileAtomic(manifest, Json{{"format", MethodOf(j) == "full" ? "hf-model" : "peft-adapter"},
                                   {"version", 1},
                                   {"files", files}}
                                      .dump(2) +
                                  "\n");
    entries.push_back({"manifest.json", manifest});
  });
  if (!s.ok()) return SendStatus(res, s);
  res.content_type = "application/x-tar";
  res.set_header("Content-Disposition", "attachment; filename=\"" + top + ".tar\"");
  res.stream = [cleanup, top, entries](http::StreamWriter& out) {
    if (!WriteTar(out, top, entries)) {
      std::fprintf(
          stderr,
          "burst serve: the download of %s stopped before its end (the client left or a write failed)\n",
          top.c_str());
    }
  };
}

}  // namespace

std::string ModelCard(const JobRecord& job, const CheckpointRecord& cp, const std::string& name,
                      const FileRecord* train, const FileRecord* valid, const std::string& notice) {
  const Json recipe = job.spec.value("recipe", Json::object());
  const std::string base = MdLiteral(Text(job.spec, "model"));
  std::string out = "# " + MdLiteral(name) + "\n\n";
  out += "Fine-tuned with Burst from " + base + ": job " + MdLiteral(job.id) + ", step " +
         std::to_string(cp.step) + (job.total_steps > 0 ? " of " + std::to_string(job.total_steps) : "") +
         ", method " + MdLiteral(MethodOf(job)) + ".\n\n";
  out += "| | |\n| --- | --- |\n";
  out += "| base model | " + base + " |\n";
  const auto data = [&out](const char* what, const FileRecord* f) {
    if (!f) return;
    out += std::string("| ") + what + " | " + MdLiteral(f->filename) + " (" + MdLiteral(f->id) + "), " +
           std::to_string(f->examples) + " examples, sha256 " + MdLiteral(f->sha256) + " |\n";
  };
  data("training data", train);
  data("validation data", valid);
  if (job.spec.contains("suffix") && job.spec["suffix"].is_string()) {
    out += "| suffix | " + MdLiteral(SuffixOf(job.spec)) + " |\n";
  }
  // A JSON string cannot hold a line break, so no line of the dump can
  // start with the ``` that would close the fence.
  out += "\n## Recipe\n\n```json\n" + recipe.dump(2) + "\n```\n";
  const Json& m = cp.metrics;
  const Json b = m.is_object() ? m.value("baseline", Json()) : Json();
  out += "\n## Evaluation against the base model\n\n";
  if (b.is_object() && m.contains("eval_loss")) {
    out += "On the validation data, the base model before training and this checkpoint:\n\n";
    out += "| metric | base model | this checkpoint |\n| --- | --- | --- |\n";
    for (const char* k : {"eval_loss", "eval_token_acc", "eval_exact_match", "eval_label_acc"}) {
      if (m.contains(k) && b.contains(k) && m[k].is_number() && b[k].is_number()) {
        out += std::string("| ") + k + " | " + Num(b[k].get<double>()) + " | " + Num(m[k].get<double>()) +
               " |\n";
      }
    }
  } else {
    out += "Not measured: the job had no validation file.\n";
  }
  if (m.is_object() && m.contains("train_loss") && m["train_loss"].is_number()) {
    out += "\nTraining loss at this step: " + Num(m["train_loss"].get<double>()) + ".\n";
  }
  out +=
      "\n## Use\n\n"
      "```sh\nburst sample --model . --prompt \"...\"          # or: burst export --model . --merge --out "
      "merged/\n"
      "```\n\n"
      "A LoRA adapter loads with PEFT (`PeftModel.from_pretrained(base, \".\")`) on the base model named in\n"
      "`adapter_config.json`; `manifest.json` lists each file's sha256.\n";
  if (!notice.empty())
    out += "\n## Notices of the base model\n\n" + notice + (notice.back() == '\n' ? "" : "\n");
  return out;
}

void AddCheckpointDownloadRoute(ApiContext& ctx, Routes& routes) {
  ApiContext* c = &ctx;
  routes.Get("/v1/fine_tuning/jobs/{}/checkpoints/{}/content",
             [c](const ApiKey& k, const auto& q, auto& r) { Download(*c, k, q, r); });
}

}  // namespace burst
