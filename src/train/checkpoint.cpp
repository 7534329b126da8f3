#include "train/checkpoint.h"

#include <algorithm>
#include <cstdio>

#include "core/fs.h"
#include "core/json.h"
#include "core/status.h"

namespace burst {

std::string StepDirName(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "step-%08lld", static_cast<long long>(step));
  return buf;
}

void CommitManifest(const fs::path& dir, const std::string& format, const Json& extra) {
  Json files = Json::object();
  std::vector<fs::path> paths;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().filename() != "manifest.json") paths.push_back(e.path());
  }
  std::sort(paths.begin(), paths.end());
  for (const auto& p : paths) {
    SyncPath(p);
    files[fs::relative(p, dir).string()] = {{"bytes", fs::file_size(p)}, {"sha256", Sha256File(p)}};
  }
  Json manifest = {{"format", format}, {"version", kManifestVersion}, {"files", files}};
  if (extra.is_object())
    for (auto it = extra.begin(); it != extra.end(); ++it) manifest[it.key()] = *it;
  WriteFileAtomic(dir / "manifest.json", manifest.dump(2) + "\n");
}

Status VerifyManifest(const fs::path& dir, const std::string& expected_format) {
  fs::path mpath = dir / "manifest.json";
  if (!fs::exists(mpath)) {
    return Status(Code::kDataLoss, dir.string() + ": no manifest.json (incomplete checkpoint)", dir.string());
  }
  // A manifest comes back from the object store: any JSON, any types.
  Json m;
  try {
    m = ParseJson(ReadFile(mpath), mpath.string());
  } catch (const Error& e) {
    return Status(Code::kDataLoss, mpath.string() + ": unreadable manifest: " + e.status().message(),
                  mpath.string());
  }
  auto format = m.is_object() ? m.find("format") : m.end();
  auto version = m.is_object() ? m.find("version") : m.end();
  auto files = m.is_object() ? m.find("files") : m.end();
  if (!m.is_object() || files == m.end() || !files->is_object() || version == m.end() ||
      *version != Json(kManifestVersion)) {
    return Status(Code::kDataLoss,
                  mpath.string() + ": not a Burst manifest of version " + std::to_string(kManifestVersion),
                  mpath.string());
  }
  if (!expected_format.empty() && (format == m.end() || *format != Json(expected_format))) {
    return Status(Code::kDataLoss,
                  mpath.string() + ": format " +
                      (format == m.end() ? std::string("missing") : JsonPreview(*format)) + ", expected " +
                      expected_format,
                  mpath.string());
  }
  for (auto it = files->begin(); it != files->end(); ++it) {
    const fs::path rel = fs::path(it.key()).lexically_normal();
    // Names stay inside the checkpoint: a manifest must not make a reader
    // hash (or trust) a file elsewhere.
    if (rel.empty() || rel.is_absolute() || *rel.begin() == "..") {
      return Status(Code::kDataLoss, mpath.string() + ": file " + it.key() + " lies outside the checkpoint",
                    mpath.string());
    }
    const auto bytes = it->is_object() ? it->find("bytes") : it->end();
    const auto sha = it->is_object() ? it->find("sha256") : it->end();
    if (bytes == it->end() || !bytes->is_number_unsigned() || sha == it->end() || !sha->is_string()) {
      return Status(Code::kDataLoss, mpath.string() + ": entry " + it.key() + " lacks bytes or sha256",
                    mpath.string());
    }
    fs::path p = dir / rel;
    if (!fs::is_regular_file(p)) return Status(Code::kDataLoss, p.string() + ": missing", p.string());
    if (fs::file_size(p) != bytes->get<uint64_t>()) {
      return Status(Code::kDataLoss, p.string() + ": size differs from the manifest (truncated?)",
                    p.string());
    }
    if (Sha256File(p) != sha->get<std::string>()) {
      return Status(Code::kDataLoss, p.string() + ": sha256 differs from the manifest (corrupt)", p.string());
    }
  }
  return Status();
}

std::vector<int64_t> ListCheckpointSteps(const fs::path& run_dir) {
  std::vector<int64_t> steps;
  fs::path root = run_dir / "checkpoints";
  if (!fs::is_directory(root)) return steps;
  for (const auto& e : fs::directory_iterator(root)) {
    std::string name = e.path().filename().string();
    if (!e.is_directory() || name.rfind("step-", 0) != 0) continue;
    try {
      steps.push_back(std::stoll(name.substr(5)));
    } catch (...) {
    }
  }
  std::sort(steps.rbegin(), steps.rend());
  return steps;
}

void PruneCheckpoints(const fs::path& run_dir, int64_t keep_last) {
  if (keep_last <= 0) return;
  auto steps = ListCheckpointSteps(run_dir);
  for (size_t i = static_cast<size_t>(keep_last); i < steps.size(); ++i) {
    std::error_code ec;
    fs::remove_all(run_dir / "checkpoints" / StepDirName(steps[i]), ec);
  }
}

}  // namespace burst
