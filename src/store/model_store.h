// Base models through the object store, so that a worker on a cluster node
// needs nothing of the control plane's filesystem (docs/design.md, "Base
// models in the store").
//
//   models/{digest}/files/{name}    each file of the Hugging Face folder
//   models/{digest}/manifest.json   {"format": "burst.model.v1", "files":
//                                    [{"name", "size", "sha256"}, ...]}
//
// The digest is the sha256 of the manifest's "files" array (compact JSON,
// names sorted): content-addressed, so one model is uploaded once whoever
// publishes it (two control planes, a restart), a folder whose files change
// gets a new digest, and a worker's cached copy can never be stale. The
// manifest is written last: a reader that finds it finds every file
// (docs/design.md, invariant 2).
//
// The control plane publishes (ModelPublisher); a worker fetches into a
// cache folder on its node (FetchModel), each file checked against the
// manifest's size and sha256, the folder renamed into place whole, so
// workers sharing a node's cache never see a part.
//
// Thread-safety: ModelPublisher may be called from any thread (one publish
// of a folder at a time; other folders go on meanwhile). FetchModel is safe
// across processes sharing the cache folder.
// Errors: Status/Result; a folder that cannot be shipped (a file name no
// store key allows, a subfolder) is kInvalidArgument naming the file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"
#include "store/keys.h"
#include "store/object_store.h"

namespace burst {

inline constexpr const char* kModelManifestFormat = "burst.model.v1";
// A manifest is a few lines per file; anything this large is not one.
inline constexpr int64_t kMaxModelManifestBytes = 1 << 20;
inline constexpr size_t kMaxModelFiles = 4096;

struct ModelFile {
  std::string name;
  int64_t size = 0;
  std::string sha256;
};

struct ModelManifest {
  std::vector<ModelFile> files;  // sorted by name
  std::string digest;            // sha256 of the "files" array as compact JSON
  std::string Text() const;      // manifest.json's text
};

// Every regular file directly in `dir` (names starting with '.' skipped),
// hashed. A subfolder, a file name that is no valid key segment, or more
// than kMaxModelFiles files is kInvalidArgument naming it.
Result<ModelManifest> ScanModelFolder(const std::filesystem::path& dir);

// Parses and checks a manifest read from the store (`where` names it in
// errors): format, file names (valid key segments, unique, sorted), sizes
// and sha256s, and that its digest is the one its prefix says.
Result<ModelManifest> ParseModelManifest(const std::string& text, const std::string& expected_digest,
                                         const std::string& where);

class ModelPublisher {
 public:
  explicit ModelPublisher(ObjectStore& store) : store_(store) {}

  // The prefix of `dir` in the store ("models/{digest}/"), uploading the
  // folder first when the store lacks it. A folder unchanged since the last
  // call (names, sizes, mtimes) is not hashed again.
  Result<std::string> Publish(const std::filesystem::path& dir);
  // How many folders this publisher has uploaded (a published one found in
  // the store is not counted).
  int64_t uploads() const;

 private:
  struct Entry {
    std::mutex mu;       // one publish of this folder at a time
    std::string stamp;   // the folder's names, sizes and mtimes when published
    std::string prefix;  // its prefix then
  };
  ObjectStore& store_;
  mutable std::mutex mu_;  // guards entries_ and uploads_, never held across I/O
  std::map<std::string, std::shared_ptr<Entry>> entries_;
  int64_t uploads_ = 0;
};

// The published model at `prefix` as a folder under `cache_root`
// ({cache_root}/{digest}), downloaded and checked unless a complete copy is
// there already. `fetched`, when given, says whether this call downloaded.
Result<std::filesystem::path> FetchModel(const ObjectStore& store, const std::string& prefix,
                                         const std::filesystem::path& cache_root, bool* fetched = nullptr);

}  // namespace burst
