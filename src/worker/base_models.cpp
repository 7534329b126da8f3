#include "worker/base_models.h"

#include <chrono>
#include <cstdio>

#include "store/model_store.h"
#include "worker/control_plane.h"

namespace burst {

namespace fs = std::filesystem;

fs::path BaseModels::Dir(const Json& task, const LogFn& log) {
  const std::string name = task.at("model").get<std::string>();
  const std::string prefix = task.value("model_store", "");
  if (prefix.empty()) return fs::path(name);
  const auto t0 = std::chrono::steady_clock::now();
  bool fetched = false;
  auto dir = FetchModel(store_, prefix, cache_root_, &fetched);
  if (!dir.ok()) throw Error(dir.status());
  if (fetched && log) {
    int64_t bytes = 0;
    for (const auto& e : fs::directory_iterator(dir.value()))
      bytes += e.is_regular_file() ? e.file_size() : 0;
    char buf[96];
    std::snprintf(buf, sizeof buf, " (%.1f MB) in %.2f s", bytes / 1e6, SecondsSince(t0));
    log("fetched base model " + task.value("model_name", name) + " from the store into " +
        cache_root_.string() + buf);
  }
  std::lock_guard<std::mutex> lock(mu_);
  names_[fs::weakly_canonical(dir.value()).string()] = name;
  return dir.value();
}

std::shared_ptr<const BaseModel> BaseModels::Get(const Json& task, const LogFn& log) {
  return cache_.Get(Dir(task, log), device_, FrozenDtypeOn(device_));
}

Json BaseModels::Loaded() const {
  auto loaded = cache_.loaded();
  if (!loaded) return Json();
  const std::string local = fs::weakly_canonical(*loaded).string();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = names_.find(local);
  return it == names_.end() ? Json(local) : Json(it->second);
}

}  // namespace burst
