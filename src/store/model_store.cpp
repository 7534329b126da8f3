#include "store/model_store.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <set>

#include "core/fs.h"
#include "core/json.h"

namespace burst {
namespace {

namespace fs = std::filesystem;

bool IsHex64(const std::string& s) {
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

Json FilesArray(const std::vector<ModelFile>& files) {
  Json a = Json::array();
  for (const ModelFile& f : files) a.push_back({{"name", f.name}, {"sha256", f.sha256}, {"size", f.size}});
  return a;
}

// Names, sizes and mtimes of the folder's entries: what changes when any
// file does (the same test BaseModelCache uses for its warm model).
std::string FolderStamp(const fs::path& dir) {
  std::vector<std::string> lines;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::error_code ec;
    const auto size = e.is_regular_file(ec) ? e.file_size(ec) : 0;
    const auto mtime = e.last_write_time(ec).time_since_epoch().count();
    lines.push_back(e.path().filename().string() + ":" + std::to_string(size) + ":" + std::to_string(mtime));
  }
  std::sort(lines.begin(), lines.end());
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

// Removes the temp folders of fetches whose process is gone (killed
// mid-download); a live one's is left alone.
void RemoveAbandonedFetches(const fs::path& cache_root, const std::string& digest) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(cache_root, ec)) {
    const std::string name = e.path().filename().string();
    const std::string head = digest + ".tmp-";
    if (name.rfind(head, 0) != 0) continue;
    const pid_t pid = static_cast<pid_t>(std::atol(name.c_str() + head.size()));
    if (pid > 0 && pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH) fs::remove_all(e.path(), ec);
  }
}

}  // namespace

std::string ModelManifest::Text() const {
  return Json{{"format", kModelManifestFormat}, {"digest", digest}, {"files", FilesArray(files)}}.dump(1) +
         "\n";
}

Result<ModelManifest> ScanModelFolder(const fs::path& dir) {
  ModelManifest m;
  Status s = Try([&] {
    if (!fs::is_directory(dir))
      throw Error(Code::kNotFound, "model folder " + dir.string() + " is missing", "model");
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string name = e.path().filename().string();
      if (name.empty() || name[0] == '.') continue;
      if (e.is_directory()) {
        throw Error(Code::kInvalidArgument,
                    "model folder " + dir.string() + " has a subfolder \"" + name +
                        "\": only a flat Hugging Face folder can be shipped to workers through the store",
                    "model");
      }
      if (!e.is_regular_file()) continue;
      if (Status k = ValidateKey(name, "model"); !k.ok() || name.find('/') != std::string::npos) {
        throw Error(
            Code::kInvalidArgument,
            "model file " + e.path().string() + ": the name is not a valid store key (letters, digits, ._=-)",
            "model");
      }
      if (m.files.size() >= kMaxModelFiles) {
        throw Error(
            Code::kInvalidArgument,
            "model folder " + dir.string() + " has more than " + std::to_string(kMaxModelFiles) + " files",
            "model");
      }
      m.files.push_back({name, static_cast<int64_t>(e.file_size()), Sha256File(e.path())});
    }
    if (m.files.empty())
      throw Error(Code::kInvalidArgument, "model folder " + dir.string() + " is empty", "model");
    std::sort(m.files.begin(), m.files.end(),
              [](const ModelFile& a, const ModelFile& b) { return a.name < b.name; });
    m.digest = Sha256Hex(FilesArray(m.files).dump());
  });
  if (!s.ok()) return s;
  return m;
}

Result<ModelManifest> ParseModelManifest(const std::string& text, const std::string& expected_digest,
                                         const std::string& where) {
  ModelManifest m;
  Status s = Try([&] {
    const Json j = ParseJson(text, where);
    FieldReader f(j, "");
    auto bad = [&](const std::string& what) { throw Error(Code::kDataLoss, where + ": " + what, where); };
    if (f.String("format", "") != kModelManifestFormat)
      bad("format is not " + std::string(kModelManifestFormat));
    m.digest = f.String("digest", "");
    const Json files = f.Raw("files");
    f.RejectUnknown();
    if (!files.is_array() || files.empty() || files.size() > kMaxModelFiles)
      bad("files must be a non-empty array");
    std::set<std::string> names;
    for (size_t i = 0; i < files.size(); ++i) {
      FieldReader ff(files[i], "files[" + std::to_string(i) + "]");
      ModelFile mf{ff.String("name", ""), ff.Int("size", -1), ff.String("sha256", "")};
      ff.RejectUnknown();
      if (!ValidateKey(mf.name).ok() || mf.name.find('/') != std::string::npos || mf.name[0] == '.') {
        bad("files[" + std::to_string(i) + "].name is not a file name");
      }
      if (mf.size < 0) bad("files[" + std::to_string(i) + "].size must be >= 0");
      if (!IsHex64(mf.sha256)) bad("files[" + std::to_string(i) + "].sha256 is not a sha256");
      if (!names.insert(mf.name).second) bad("file " + mf.name + " is listed twice");
      if (!m.files.empty() && m.files.back().name > mf.name) bad("files are not sorted by name");
      m.files.push_back(std::move(mf));
    }
    const std::string digest = Sha256Hex(FilesArray(m.files).dump());
    if (digest != m.digest || digest != expected_digest) {
      bad("its files hash to " + digest + ", not the digest " + expected_digest + " it is stored under");
    }
  });
  if (!s.ok()) return s;
  return m;
}

int64_t ModelPublisher::uploads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return uploads_;
}

Result<std::string> ModelPublisher::Publish(const fs::path& dir) {
  std::shared_ptr<Entry> entry;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& e = entries_[fs::weakly_canonical(dir).string()];
    if (!e) e = std::make_shared<Entry>();
    entry = e;
  }
  std::lock_guard<std::mutex> lock(entry->mu);
  std::string stamp;
  if (Status s = Try([&] { stamp = FolderStamp(dir); }); !s.ok()) {
    return Status(Code::kNotFound, "model folder " + dir.string() + ": " + s.message(), "model");
  }
  if (!entry->prefix.empty() && entry->stamp == stamp) return entry->prefix;
  auto scanned = ScanModelFolder(dir);
  if (!scanned.ok()) return scanned.status();
  const ModelManifest& m = scanned.value();
  const std::string prefix = ModelPrefix(m.digest);
  // Published already (by this control plane before a restart, or another)?
  auto existing = store_.Stat(prefix + "manifest.json");
  if (!existing.ok() && existing.status().code() != Code::kNotFound) return existing.status();
  if (!existing.ok()) {
    for (const ModelFile& f : m.files) {
      if (Status s = store_.PutFile(prefix + "files/" + f.name, dir / f.name); !s.ok()) return s;
    }
    if (Status s = store_.Put(prefix + "manifest.json", m.Text()); !s.ok()) return s;
    std::lock_guard<std::mutex> count(mu_);
    ++uploads_;
  }
  // A file that changed while it was hashed and uploaded: publish again next
  // time rather than remember a digest that may not match what went up.
  std::string after;
  if (Status s = Try([&] { after = FolderStamp(dir); }); !s.ok() || after != stamp) {
    return Status(Code::kUnavailable,
                  "model folder " + dir.string() + " changed while it was published; try again", "model");
  }
  entry->stamp = stamp;
  entry->prefix = prefix;
  return prefix;
}

Result<fs::path> FetchModel(const ObjectStore& store, const std::string& prefix, const fs::path& cache_root,
                            bool* fetched) {
  if (fetched) *fetched = false;
  // "models/{digest}/"
  const std::string head = "models/";
  const std::string digest =
      prefix.rfind(head, 0) == 0 && prefix.size() > head.size() + 1 && prefix.back() == '/'
          ? prefix.substr(head.size(), prefix.size() - head.size() - 1)
          : "";
  if (!IsHex64(digest)) {
    return Status(Code::kInvalidArgument, "\"" + prefix + "\" is not a published model's prefix",
                  "model_store");
  }
  const fs::path final_dir = cache_root / digest;
  std::error_code ec;
  if (fs::is_directory(final_dir, ec)) {
    fs::last_write_time(final_dir, fs::file_time_type::clock::now(), ec);  // when it was last used
    return final_dir;
  }
  // "{digest}.tmp-{pid}-{n}": unique to this call, and its process known.
  static std::atomic<int64_t> fetch_number{0};
  const fs::path tmp = cache_root / (digest + ".tmp-" + std::to_string(::getpid()) + "-" +
                                     std::to_string(fetch_number.fetch_add(1)));
  Status s = Try([&] {
    CreateDirectories(cache_root, 0700);
    RemoveAbandonedFetches(cache_root, digest);
    fs::remove_all(tmp);  // a dead process's, whose pid this one reuses
    CreateDirectories(tmp, 0700);
    const std::string where = store.Url() + " " + prefix + "manifest.json";
    auto info = store.Stat(prefix + "manifest.json");
    if (!info.ok()) {
      if (info.status().code() == Code::kNotFound) {
        throw Error(Code::kNotFound, "base model " + prefix + " is not in the store " + store.Url(),
                    "model_store");
      }
      throw Error(info.status());
    }
    if (info.value().size > kMaxModelManifestBytes) {
      throw Error(Code::kDataLoss,
                  where + " is " + std::to_string(info.value().size) + " bytes: not a manifest",
                  "model_store");
    }
    auto text = store.Get(prefix + "manifest.json");
    if (!text.ok()) throw Error(text.status());
    const ModelManifest m = ParseModelManifest(text.value(), digest, where).ValueOrThrow();
    for (const ModelFile& f : m.files) {
      const fs::path dst = tmp / f.name;
      if (Status g = store.GetToFile(prefix + "files/" + f.name, dst); !g.ok()) throw Error(g);
      const auto size = static_cast<int64_t>(fs::file_size(dst));
      if (size != f.size || Sha256File(dst) != f.sha256) {
        throw Error(Code::kDataLoss,
                    "base model file " + prefix + "files/" + f.name + " in " + store.Url() +
                        " does not match its manifest (" + std::to_string(size) + " bytes, " +
                        std::to_string(f.size) + " expected)",
                    "model_store");
      }
    }
    WriteFileAtomic(tmp / ".burst-model.json", m.Text());
    SyncPath(tmp);
  });
  if (!s.ok()) {
    fs::remove_all(tmp, ec);
    return s;
  }
  fs::rename(tmp, final_dir, ec);
  if (ec) {
    // Another worker on this node finished the same model first: use its copy.
    std::error_code ignored;
    fs::remove_all(tmp, ignored);
    if (fs::is_directory(final_dir, ignored)) return final_dir;
    return IoStatus(ec.value(), "cannot move the fetched model to", final_dir, Code::kUnavailable);
  }
  SyncPath(cache_root);
  if (fetched) *fetched = true;
  return final_dir;
}

}  // namespace burst
