// The in-memory ObjectStore: the fake that tests use in place of a real one.
#include <map>
#include <mutex>

#include "core/fs.h"
#include "store/object_store.h"

namespace burst {
namespace {

class MemStore : public ObjectStore {
 public:
  Status Put(const std::string& key, std::string_view data) override {
    if (Status s = ValidateKey(key); !s.ok()) return s;
    std::lock_guard<std::mutex> lock(mu_);
    objects_[key] = std::string(data);
    return Status();
  }

  Status PutFile(const std::string& key, const std::filesystem::path& src) override {
    if (Status s = ValidateKey(key); !s.ok()) return s;
    std::string data;
    if (Status s = Try([&] { data = ReadFile(src); }); !s.ok()) return s;
    return Put(key, data);
  }

  Result<std::string> Get(const std::string& key) const override {
    if (Status s = ValidateKey(key); !s.ok()) return s;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = objects_.find(key);
    if (it == objects_.end()) return NotFound(key);
    return it->second;
  }

  Status GetToFile(const std::string& key, const std::filesystem::path& dst) const override {
    Result<std::string> data = Get(key);
    if (!data.ok()) return data.status();
    return Try([&] { WriteFileAtomic(dst, data.value()); });
  }

  Result<ObjectInfo> Stat(const std::string& key) const override {
    if (Status s = ValidateKey(key); !s.ok()) return s;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = objects_.find(key);
    if (it == objects_.end()) return NotFound(key);
    return ObjectInfo{key, static_cast<int64_t>(it->second.size())};
  }

  Result<std::vector<ObjectInfo>> List(const std::string& prefix) const override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<ObjectInfo> out;
    for (auto it = objects_.lower_bound(prefix);
         it != objects_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
      out.push_back({it->first, static_cast<int64_t>(it->second.size())});
    }
    return out;
  }

  Status Delete(const std::string& key) override {
    if (Status s = ValidateKey(key); !s.ok()) return s;
    std::lock_guard<std::mutex> lock(mu_);
    objects_.erase(key);
    return Status();
  }

  Status DeletePrefix(const std::string& prefix) override {
    if (prefix.empty() || prefix.back() != '/') {
      return Status(Code::kInvalidArgument, "DeletePrefix needs a prefix ending in '/'", "prefix");
    }
    std::lock_guard<std::mutex> lock(mu_);
    auto it = objects_.lower_bound(prefix);
    while (it != objects_.end() && it->first.compare(0, prefix.size(), prefix) == 0) it = objects_.erase(it);
    return Status();
  }

  std::string Url() const override { return "mem://"; }

 private:
  static Status NotFound(const std::string& key) {
    return Status(Code::kNotFound, "no object \"" + key + "\"", "key");
  }

  mutable std::mutex mu_;
  std::map<std::string, std::string> objects_;  // GUARDED_BY(mu_)
};

}  // namespace

std::unique_ptr<ObjectStore> NewMemStore() { return std::make_unique<MemStore>(); }

}  // namespace burst
