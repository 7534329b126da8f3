#include "train/checkpoint.h"

#include <algorithm>
#include <cstdio>

#include "core/fs.h"

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
    return Status(Code::kDataLoss, dir.string() + ": no manifest.json (incomplete checkpoint)",
                  dir.string());
  }
  Json m;
  try {
    m = Json::parse(ReadFile(mpath));
  } catch (const std::exception& e) {
    return Status(Code::kDataLoss, mpath.string() + ": unreadable manifest", mpath.string());
  }
  if (!m.is_object() || !m.contains("files") || !m["files"].is_object() ||
      m.value("version", 0) != kManifestVersion) {
    return Status(Code::kDataLoss, mpath.string() + ": not a Burst manifest of version " +
                  std::to_string(kManifestVersion), mpath.string());
  }
  if (!expected_format.empty() && m.value("format", "") != expected_format) {
    return Status(Code::kDataLoss, mpath.string() + ": format " + m.value("format", "?") +
                  ", expected " + expected_format, mpath.string());
  }
  for (auto it = m["files"].begin(); it != m["files"].end(); ++it) {
    fs::path p = dir / it.key();
    if (!fs::exists(p)) return Status(Code::kDataLoss, p.string() + ": missing", p.string());
    if (fs::file_size(p) != it->value("bytes", uint64_t{0})) {
      return Status(Code::kDataLoss, p.string() + ": size differs from the manifest (truncated?)",
                    p.string());
    }
    if (Sha256File(p) != it->value("sha256", "")) {
      return Status(Code::kDataLoss, p.string() + ": sha256 differs from the manifest (corrupt)",
                    p.string());
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
