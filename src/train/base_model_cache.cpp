#include "train/base_model_cache.h"

#include <algorithm>
#include <vector>

#include "core/fs.h"
#include "model/hf_io.h"

namespace burst {
namespace {

// Names, sizes and mtimes of the folder's files: changes when any is replaced.
std::string FilesStamp(const fs::path& dir) {
  std::vector<std::string> rows;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_regular_file(ec)) continue;
    auto size = e.file_size(ec);
    auto mtime = e.last_write_time(ec).time_since_epoch().count();
    rows.push_back(e.path().filename().string() + ":" + std::to_string(size) + ":" + std::to_string(mtime));
  }
  std::sort(rows.begin(), rows.end());
  std::string out;
  for (const auto& r : rows) out += r + "\n";
  return out;
}

fs::path Key(const fs::path& dir) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(dir, ec);
  return ec ? fs::absolute(dir).lexically_normal() : p;
}

}  // namespace

std::string BaseModelSha(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string n = e.path().filename().string();
    if (n == "config.json" || n.find(".safetensors") != std::string::npos) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  std::string all;
  for (const auto& f : files) all += f.filename().string() + ":" + Sha256File(f) + "\n";
  return Sha256Hex(all);
}

std::shared_ptr<const BaseModel> BaseModelCache::Get(const fs::path& dir, torch::Device device,
                                                     torch::ScalarType dtype) {
  std::lock_guard<std::mutex> get_lock(get_mu_);
  const fs::path key = Key(dir);
  std::string stamp = FilesStamp(dir);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (current_ && key_ == key && current_->device == device && current_->dtype == dtype && stamp_ == stamp)
      return current_;
    current_.reset();  // the old weights go before the new ones arrive (unless a run still holds them)
    key_.clear();
    stamp_.clear();
  }
  auto m = std::make_shared<BaseModel>();
  m->dir = dir;
  m->device = device;
  m->dtype = dtype;
  m->tokenizer = LoadTokenizer(dir);
  m->sha256 = BaseModelSha(dir);
  m->model = LoadModel(dir, device, dtype);
  m->model.SetTrainable(false);
  std::lock_guard<std::mutex> lock(mu_);
  current_ = m;
  key_ = key;
  stamp_ = std::move(stamp);
  ++loads_;
  return current_;
}

int64_t BaseModelCache::loads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return loads_;
}

std::optional<fs::path> BaseModelCache::loaded() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!current_) return std::nullopt;
  return current_->dir;
}

void BaseModelCache::Clear() {
  std::lock_guard<std::mutex> get_lock(get_mu_);
  std::lock_guard<std::mutex> lock(mu_);
  current_.reset();
  key_.clear();
  stamp_.clear();
}

}  // namespace burst
