#include "cli/files.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "cli/api_client.h"
#include "cli/print.h"
#include "core/fs.h"

namespace burst {
namespace {

struct FilesArgs {
  ApiTarget target;
  std::string file, id, purpose = "fine-tune", after, output;
  int64_t limit = 20;
  bool json = false;
};

void PrintFileLine(const Json& f) {
  std::printf("%-32s %10lld bytes %7lld examples  %-18s %s  %s\n", f.value("id", "").c_str(),
              static_cast<long long>(f.value("bytes", 0LL)), static_cast<long long>(f.value("examples", 0LL)),
              f.value("format", "").c_str(), When(f, "created_at").c_str(), f.value("filename", "").c_str());
}

}  // namespace

void AddFilesCommand(CLI::App& app, int* rc) {
  auto a = std::make_shared<FilesArgs>();
  auto* files = app.add_subcommand("files", "Upload and manage training files on a Burst server");
  files->require_subcommand(1);

  auto* upload = files->add_subcommand("upload", "Upload a JSONL file (checked line by line by the server)");
  upload->add_option("file", a->file, "JSONL file")->required();
  upload->add_option("--purpose", a->purpose, "file purpose")->capture_default_str();
  upload->callback([a, rc] {
    Json f = OrThrow(ApiClient(a->target).Upload("/v1/files", "file", a->file, {{"purpose", a->purpose}}));
    if (a->json) return PrintJson(f);
    std::printf("uploaded %s as %s (%lld examples, %s)\n", a->file.c_str(), f.value("id", "").c_str(),
                static_cast<long long>(f.value("examples", 0LL)), f.value("format", "").c_str());
    *rc = 0;
  });

  auto* list = files->add_subcommand("list", "List files, newest first");
  list->add_option("--limit", a->limit, "how many")->capture_default_str();
  list->add_option("--after", a->after, "continue after this file id");
  list->callback([a, rc] {
    std::string path = "/v1/files?limit=" + std::to_string(a->limit);
    if (!a->after.empty()) path += "&after=" + a->after;
    Json page = OrThrow(ApiClient(a->target).Get(path));
    if (a->json) return PrintJson(page);
    for (const Json& f : page["data"]) PrintFileLine(f);
    if (page.value("has_more", false)) {
      std::printf("(more: --after %s)\n", page["data"].back().value("id", "").c_str());
    }
    *rc = 0;
  });

  auto* get = files->add_subcommand("get", "Show one file");
  get->add_option("id", a->id, "file id")->required();
  get->callback([a, rc] {
    Json f = OrThrow(ApiClient(a->target).Get("/v1/files/" + a->id));
    if (a->json) return PrintJson(f);
    PrintFileLine(f);
    std::printf("sha256 %s\n", f.value("sha256", "").c_str());
    *rc = 0;
  });

  auto* content = files->add_subcommand("content", "Download a file's bytes");
  content->add_option("id", a->id, "file id")->required();
  content->add_option("-o,--output", a->output, "write to this file (default: stdout)");
  content->callback([a, rc] {
    std::string bytes = OrThrow(ApiClient(a->target).GetRaw("/v1/files/" + a->id + "/content"));
    if (a->output.empty()) {
      std::fwrite(bytes.data(), 1, bytes.size(), stdout);
    } else {
      WriteFileAtomic(a->output, bytes);
    }
    *rc = 0;
  });

  auto* del = files->add_subcommand("delete", "Delete a file");
  del->add_option("id", a->id, "file id")->required();
  del->callback([a, rc] {
    Json r = OrThrow(ApiClient(a->target).Delete("/v1/files/" + a->id));
    if (a->json) return PrintJson(r);
    std::printf("deleted %s\n", a->id.c_str());
    *rc = 0;
  });

  for (CLI::App* cmd : {upload, list, get, del}) cmd->add_flag("--json", a->json, "print the API's JSON");
  for (CLI::App* cmd : {upload, list, get, content, del}) AddApiTargetArgs(cmd, a->target);
}

}  // namespace burst
