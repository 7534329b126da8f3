// ApiServer: Burst's HTTP/JSON API (OpenAI-shaped), served by `burst serve`.
//
// Routes (docs/api.md): health, files, fine-tuning jobs with their events,
// checkpoints and logs, sweeps (api/sweeps.h), workers, usage and models on
// /v1; the workers' protocol on /internal/v1 (worker tokens only). Every other /v1 route needs "Authorization: Bearer <API key>"; every object is
// looked up within the caller's organisation, so another organisation's
// object answers 404 like a missing one. Every 4xx/5xx body is
// {"error": {"code", "message", "param"}}. An upload is checked line by line
// before anything is stored (the error names file:line and the field), then
// its bytes go to the object store and its record to the database; a failure
// between the two removes the stored bytes.
//
// Thread-safety: handlers run on a fixed pool of threads; Metadata and
// ObjectStore are thread-safe. Stop() may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"
#include <filesystem>
#include <vector>

#include "db/metadata.h"
#include "runtime/runtime.h"
#include "store/object_store.h"

namespace burst {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8470;        // 0: any free port (see ApiServer::port)
  int threads = 16;       // request-handling threads
  int64_t max_body_bytes = 512LL << 20;  // larger requests get 413
  std::vector<std::filesystem::path> model_roots;  // where jobs' models may be read from
  int64_t sample_wait_ms = 60'000;  // a sampling call waiting longer for a worker is 429 capacity
};

class ApiServer {
 public:
  ApiServer(Metadata& metadata, ObjectStore& store, Runtime& runtime, ServerOptions options);
  ~ApiServer();

  // Binds the listening socket (kUnavailable when the address is taken).
  Status Bind();
  int port() const;
  // Serves until Stop().
  void Serve();
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace burst
