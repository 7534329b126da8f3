#include "cli/checkpoints.h"

#include <archive.h>
#include <archive_entry.h>

#include <CLI/CLI.hpp>
#include <cerrno>
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

namespace {

// One entry's bytes into `dst`, block by block (a temporary beside it, then
// renamed): a full fine-tune's weights never sit in memory.
void WriteEntry(struct archive* a, const std::string& name, const fs::path& dst) {
  fs::path part = dst;
  part += ".part";
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> out(std::fopen(part.c_str(), "wb"), std::fclose);
  if (!out) throw Error(IoStatus(errno, "cannot create", part, Code::kInternal));
  const void* buf = nullptr;
  size_t size = 0;
  la_int64_t offset = 0;
  int d;
  while ((d = archive_read_data_block(a, &buf, &size, &offset)) == ARCHIVE_OK) {
    if (std::fwrite(buf, 1, size, out.get()) != size) {
      const int err = errno;
      fs::remove(part);
      throw Error(IoStatus(err, "cannot write", part, Code::kInternal));
    }
  }
  if (d != ARCHIVE_EOF) {
    fs::remove(part);
    throw Error(Code::kDataLoss, "the tar is cut in \"" + name + "\": " + archive_error_string(a));
  }
  if (std::fclose(out.release()) != 0) {
    const int err = errno;
    fs::remove(part);
    throw Error(IoStatus(err, "cannot write", part, Code::kInternal));
  }
  fs::rename(part, dst);
}

std::vector<fs::path> Unpack(struct archive* a, const fs::path& dir) {
  std::vector<fs::path> written;
  struct archive_entry* e = nullptr;
  int r;
  while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
    const std::string name = archive_entry_pathname(e) ? archive_entry_pathname(e) : "";
    const fs::path rel = fs::path(name).lexically_normal();
    if (name.empty() || rel.is_absolute() || rel.empty() || *rel.begin() == "..") {
      throw Error(Code::kInvalidArgument,
                  "the tar's entry \"" + name + "\" would land outside " + dir.string());
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
    WriteEntry(a, name, dst);
    written.push_back(dst);
  }
  if (r != ARCHIVE_EOF)
    throw Error(Code::kDataLoss, std::string("the tar is damaged: ") + archive_error_string(a));
  return written;
}

using ArchivePtr = std::unique_ptr<struct archive, int (*)(struct archive*)>;

ArchivePtr NewTarReader() {
  ArchivePtr a(archive_read_new(), archive_read_free);
  archive_read_support_format_tar(a.get());
  return a;
}

}  // namespace

std::vector<fs::path> UnpackTarFile(const fs::path& tar, const fs::path& dir) {
  ArchivePtr a = NewTarReader();
  if (archive_read_open_filename(a.get(), tar.c_str(), 1 << 16) != ARCHIVE_OK) {
    throw Error(Code::kInvalidArgument, tar.string() + ": not a tar: " + archive_error_string(a.get()),
                tar.string());
  }
  return Unpack(a.get(), dir);
}

void AddCheckpointsCommand(CLI::App& app, int* rc) {
  auto a = std::make_shared<CheckpointsArgs>();
  auto* cps = app.add_subcommand("checkpoints", "A job's checkpoints: list them, download one");
  cps->require_subcommand(1);

  auto* list = cps->add_subcommand("list", "List a job's checkpoints, newest first");
  list->add_option("job", a->job, "fine-tuning job id")->required();
  list->add_flag("--json", a->json, "print the API's JSON");
  list->callback([a, rc] {
    Json page =
        OrThrow(ApiClient(a->target).Get("/v1/fine_tuning/jobs/" + a->job + "/checkpoints?limit=100"));
    if (a->json) return PrintJson(page);
    std::printf("%-8s %-24s %s\n", "step", "id", "model");
    for (const Json& c : page["data"]) {
      std::printf("%-8lld %-24s %s\n", static_cast<long long>(c.value("step_number", 0LL)),
                  c.value("id", "").c_str(), c.value("fine_tuned_model_checkpoint", "").c_str());
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
    // Streamed to a file (the tar, or a temporary one beside the output),
    // then unpacked from it: memory stays flat whatever the weights weigh.
    const std::string path = "/v1/fine_tuning/jobs/" + a->job + "/checkpoints/" + a->checkpoint + "/content";
    const bool keep_tar = !a->tar.empty();
    if (!keep_tar) fs::create_directories(a->output);
    const fs::path tar = keep_tar ? fs::path(a->tar) : fs::path(a->output) / (".download-" + a->job + ".tar");
    auto progress = [](int64_t bytes) {
      std::fprintf(stderr, "\rdownloaded %.1f MiB", static_cast<double>(bytes) / (1 << 20));
    };
    const int64_t bytes = OrThrow(ApiClient(a->target).GetToFile(path, tar, progress));
    std::fprintf(stderr, "\n");
    if (keep_tar) {
      std::printf("wrote %s (%lld bytes)\n", a->tar.c_str(), static_cast<long long>(bytes));
      *rc = 0;
      return;
    }
    std::vector<fs::path> files;
    Status unpacked = Try([&] { files = UnpackTarFile(tar, a->output); });
    std::error_code ec;
    fs::remove(tar, ec);  // the temporary tar, unpacked or not; what failed is reported below
    if (!unpacked.ok()) throw Error(unpacked);
    if (files.empty()) throw Error(Code::kDataLoss, "the download held no files");
    std::printf("unpacked %zu files into %s\n", files.size(), files.front().parent_path().c_str());
    *rc = 0;
  });
  for (CLI::App* cmd : {list, dl}) AddApiTargetArgs(cmd, a->target);
}

}  // namespace burst
