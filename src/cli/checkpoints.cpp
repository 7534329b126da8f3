#include "cli/checkpoints.h"

#include <archive.h>
#include <archive_entry.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <vector>

#include "cli/api_client.h"
#include "cli/print.h"
#include "core/fs.h"

namespace burst {
namespace fs = std::filesystem;
namespace {

struct CheckpointsArgs {
  ApiTarget target;
  std::string job, checkpoint, output = ".", tar;
  bool json = false;
};

}  // namespace

std::vector<fs::path> UnpackTar(std::string_view tar, const fs::path& dir) {
  struct archive* a = archive_read_new();
  std::unique_ptr<struct archive, int (*)(struct archive*)> owner(a, archive_read_free);
  archive_read_support_format_tar(a);
  if (archive_read_open_memory(a, tar.data(), tar.size()) != ARCHIVE_OK) {
    throw Error(Code::kInvalidArgument, std::string("not a tar: ") + archive_error_string(a));
  }
  std::vector<fs::path> written;
  struct archive_entry* e = nullptr;
  int r;
  while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
    const std::string name = archive_entry_pathname(e) ? archive_entry_pathname(e) : "";
    const fs::path rel = fs::path(name).lexically_normal();
    if (name.empty() || rel.is_absolute() || rel.empty() || *rel.begin() == "..") {
      throw Error(Code::kInvalidArgument, "the tar's entry \"" + name + "\" would land outside " + dir.string());
    }
    const fs::path dst = dir / rel;
    if (archive_entry_filetype(e) == AE_IFDIR) {
      fs::create_directories(dst);
      continue;
    }
    if (archive_entry_filetype(e) != AE_IFREG) {
      throw Error(Code::kInvalidArgument, "the tar's entry \"" + name + "\" is not a plain file");
    }
    fs::create_directories(dst.parent_path());
    std::string data;
    const void* buf = nullptr;
    size_t size = 0;
    la_int64_t offset = 0;
    int d;
    while ((d = archive_read_data_block(a, &buf, &size, &offset)) == ARCHIVE_OK) {
      data.append(static_cast<const char*>(buf), size);
    }
    if (d != ARCHIVE_EOF) throw Error(Code::kDataLoss, "the tar is cut in \"" + name + "\": " + archive_error_string(a));
    WriteFileAtomic(dst, data);
    written.push_back(dst);
  }
  if (r != ARCHIVE_EOF) throw Error(Code::kDataLoss, std::string("the tar is damaged: ") + archive_error_string(a));
  return written;
}

void AddCheckpointsCommand(CLI::App& app, int* rc) {
  auto a = std::make_shared<CheckpointsArgs>();
  auto* cps = app.add_subcommand("checkpoints", "A job's checkpoints: list them, download one");
  cps->require_subcommand(1);

  auto* list = cps->add_subcommand("list", "List a job's checkpoints, newest first");
  list->add_option("job", a->job, "fine-tuning job id")->required();
  list->add_flag("--json", a->json, "print the API's JSON");
  list->callback([a, rc] {
    Json page = OrThrow(ApiClient(a->target).Get("/v1/fine_tuning/jobs/" + a->job + "/checkpoints?limit=100"));
    if (a->json) return PrintJson(page);
    std::printf("%-8s %-24s %s\n", "step", "id", "model");
    for (const Json& c : page["data"]) {
      std::printf("%-8lld %-24s %s\n", static_cast<long long>(c.value("step_number", 0LL)), c.value("id", "").c_str(),
                  c.value("fine_tuned_model_checkpoint", "").c_str());
    }
    *rc = 0;
  });

  auto* dl = cps->add_subcommand(
      "download", "Download a checkpoint's weights, adapter config and model card (OUTPUT/JOB-step-N/)");
  dl->add_option("job", a->job, "fine-tuning job id")->required();
  dl->add_option("checkpoint", a->checkpoint, "checkpoint id (ftckpt-...) or step number")->required();
  dl->add_option("-o,--output", a->output, "folder to unpack into")->capture_default_str();
  dl->add_option("--tar", a->tar, "write the tar to this file instead of unpacking it");
  dl->callback([a, rc] {
    const std::string tar = OrThrow(
        ApiClient(a->target).GetRaw("/v1/fine_tuning/jobs/" + a->job + "/checkpoints/" + a->checkpoint + "/content"));
    if (!a->tar.empty()) {
      WriteFileAtomic(a->tar, tar);
      std::printf("wrote %s (%zu bytes)\n", a->tar.c_str(), tar.size());
      *rc = 0;
      return;
    }
    const std::vector<fs::path> files = UnpackTar(tar, a->output);
    if (files.empty()) throw Error(Code::kDataLoss, "the download held no files");
    std::printf("unpacked %zu files into %s\n", files.size(), files.front().parent_path().c_str());
    *rc = 0;
  });
  for (CLI::App* cmd : {list, dl}) AddApiTargetArgs(cmd, a->target);
}

}  // namespace burst
