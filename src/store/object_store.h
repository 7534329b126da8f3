// ObjectStore: where Burst keeps every durable blob (uploaded files and
// checkpoints; logs and events live in the database), named by '/'-separated keys such as
// "orgs/{org}/files/{file}" or "orgs/{org}/jobs/{job}/checkpoints/step-00000100/sampler/model.safetensors".
//
// Backends: "mem://" (in memory; the fake for tests), "file:///abs/dir"
// (a local or shared directory) and "s3://bucket/prefix" (any S3 service;
// s3_store.h). Every backend passes the same test suite
// (object_store_suite.cpp): mem and file in store_test, s3 against a real
// radosgw in store_s3_test.
//
// Semantics every backend keeps:
//   - Put/PutFile replace the whole object atomically: a reader sees the old
//     object or the new one, never a part, even if the writer dies midway.
//     A checkpoint's files are Put first and its manifest last, so a reader
//     that finds the manifest finds the files (docs/design.md, invariant 2).
//   - Keys are validated (ValidateKey) before any I/O, so a key can never
//     name anything outside the store.
//   - Delete of a missing key succeeds (idempotent).
//
// Thread-safety: every method may be called from any thread at once; the file
// backend is also safe across processes sharing the directory.
// Errors: Status/Result, never exceptions; kNotFound for a missing key,
// kInvalidArgument for a bad key, kUnavailable for I/O failures worth a retry.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace burst {

struct ObjectInfo {
  std::string key;
  int64_t size = 0;
};

class ObjectStore {
 public:
  virtual ~ObjectStore() = default;

  virtual Status Put(const std::string& key, std::string_view data) = 0;
  // Copies a local file into the store.
  virtual Status PutFile(const std::string& key, const std::filesystem::path& src) = 0;
  virtual Result<std::string> Get(const std::string& key) const = 0;
  // Copies an object to a local file, atomically (temp file + rename).
  virtual Status GetToFile(const std::string& key, const std::filesystem::path& dst) const = 0;
  virtual Result<ObjectInfo> Stat(const std::string& key) const = 0;
  // Every object whose key starts with `prefix` (plain string prefix; "" is
  // everything), sorted by key.
  virtual Result<std::vector<ObjectInfo>> List(const std::string& prefix) const = 0;
  virtual Status Delete(const std::string& key) = 0;
  // Deletes every object under `prefix`, which must end in '/'.
  virtual Status DeletePrefix(const std::string& prefix) = 0;
  // The URL this store was opened with ("mem://", "file:///data/objects").
  virtual std::string Url() const = 0;
};

// A key is 1-1024 bytes of '/'-separated segments; each segment is non-empty,
// made of [A-Za-z0-9._=-], and is not "." or "..". `param` names the field in
// the error ("key" by default).
Status ValidateKey(std::string_view key, const std::string& param = "key");

// Opens a store by URL: "mem://", "file:///absolute/dir" (the directory is
// created when missing) or "s3://bucket[/prefix][?endpoint=URL&region=R]"
// (s3_store.h: credentials from AWS_*; the bucket must exist).
Result<std::unique_ptr<ObjectStore>> OpenObjectStore(const std::string& url);

std::unique_ptr<ObjectStore> NewMemStore();
Result<std::unique_ptr<ObjectStore>> NewFileStore(const std::filesystem::path& root);

}  // namespace burst
