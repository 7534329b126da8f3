// Metadata: the control plane's durable records, on the SQLite layer.
//
// This first part holds organisations and their API keys. A key is shown to
// its owner once, when created; the database keeps only its sha256, so a
// leaked database file does not leak usable keys. Later parts (files, jobs,
// attempts, events, checkpoints, workers, usage) extend the same schema with
// further migration steps, never by editing a step that has shipped.
//
// Thread-safety: every method takes the connection's mutex; one Metadata may
// be shared by all of the server's threads.
// Errors: Status/Result (kNotFound for unknown ids and keys).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"
#include "db/sqlite.h"

namespace burst {

struct Org {
  std::string id;  // "org-..."
  std::string name;
  int64_t created_at = 0;  // unix seconds
};

struct ApiKey {
  std::string id;      // "key-..."; names the key in lists and logs
  std::string org_id;
  std::string name;
  std::string prefix;  // the secret's first 12 characters, to recognise it
  int64_t created_at = 0;
  bool revoked = false;
};

struct NewApiKey {
  ApiKey key;
  std::string secret;  // "burst-...": returned once, never stored
};

// An uploaded file (OpenAI's File object, plus what Burst checked).
struct FileRecord {
  std::string id;  // "file-..."
  std::string org_id;
  std::string filename;
  std::string purpose;  // "fine-tune"
  int64_t bytes = 0;
  std::string sha256;
  std::string format;  // from the upload check: messages, text, preference, ...
  int64_t examples = 0;
  int64_t created_at = 0;
  std::string object_key;  // where the bytes are in the ObjectStore
};

class Metadata {
 public:
  // Opens (creating when missing) and migrates the database at `path`
  // (":memory:" for tests).
  static Result<std::unique_ptr<Metadata>> Open(const std::string& path);

  Result<Org> CreateOrg(const std::string& name);
  Result<Org> GetOrg(const std::string& id);
  Result<std::vector<Org>> ListOrgs();

  Result<NewApiKey> CreateApiKey(const std::string& org_id, const std::string& name);
  // The organisation a presented secret belongs to; kNotFound for unknown or
  // revoked keys (the caller answers 401 either way).
  Result<ApiKey> Authenticate(const std::string& secret);
  Status RevokeApiKey(const std::string& org_id, const std::string& key_id);
  Result<std::vector<ApiKey>> ListApiKeys(const std::string& org_id);

  // Files. Every lookup is by organisation too: another organisation's file
  // is kNotFound, exactly like a missing one.
  // Stamps file.created_at.
  Status CreateFile(FileRecord& file);
  Result<FileRecord> GetFile(const std::string& org_id, const std::string& id);
  // Newest first; `after` (a file id) continues a previous page.
  Result<std::vector<FileRecord>> ListFiles(const std::string& org_id, const std::string& after,
                                            int64_t limit);
  Status DeleteFile(const std::string& org_id, const std::string& id);

 private:
  explicit Metadata(std::unique_ptr<Db> db) : db_(std::move(db)) {}
  std::mutex mu_;
  std::unique_ptr<Db> db_;  // GUARDED_BY(mu_)
};

// The schema, one migration step per element (db/metadata.cpp).
const std::vector<std::string>& MetadataSchema();

}  // namespace burst
