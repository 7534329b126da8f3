// ApiServer: Burst's HTTP/JSON API (OpenAI-shaped), served by `burst serve`.
//
// Routes (docs/api.md), one file per resource (api/README.md): files,
// fine-tuning jobs, evaluations and the estimate, sweeps, deployments,
// completions and chat completions, workers, usage, prices and models on
// /v1, and the workers' protocol on /internal/v1 (worker tokens only).
// GET /v1/health needs nothing; every other /v1 route needs "Authorization:
// Bearer <API key>", checked from the headers before any body byte is read.
// Every object is looked up within the caller's organisation, so another
// organisation's object answers 404 like a missing one. Every 4xx/5xx body
// is {"error": {"code", "message", "param"}} (api/respond.h).
//
// The HTTP layer (api/http/) reads requests on one event loop with limits
// on heads, bodies, their rates and connections per address, and runs
// handlers on a pool of threads (api/http/http_server.h).
//
// Thread-safety: handlers run on many threads; Metadata, ObjectStore and
// Runtime are thread-safe. Stop() may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "api/http/http_server.h"
#include "core/status.h"
#include "db/metadata.h"
#include "runtime/loops.h"
#include "runtime/runtime.h"
#include "store/object_store.h"

namespace burst {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8470;  // 0: any free port (see ApiServer::port)
  // Connections, deadlines, rates and request threads (http_server.h).
  http::ServerLimits http;
  int64_t max_body_bytes = 512LL << 20;            // uploads; JSON bodies are limited to 4 MiB
  std::vector<std::filesystem::path> model_roots;  // where jobs' models may be read from
  std::filesystem::path data_dir;                  // named "data:" instead of by its path in error messages
  int64_t sample_wait_ms = 60'000;  // a sampling call waiting longer for a worker is 429 capacity
  // Base models go to workers through the store (store/model_store.h): each
  // job, evaluation, deployment and sampling call names its model's copy
  // there, so workers need nothing of this machine's filesystem.
  bool ship_models = false;
  // GET /metrics answers this bearer token only ("" = nobody; api/observe.h).
  std::string metrics_token;
  // The access log's lines: "text" or "json" (api/observe.h).
  std::string log_format = "text";
  // Training loops' shares per organisation (runtime/loops.h).
  LoopLimits loops;
  // Bytes of files and checkpoints one organisation may store (0: no quota).
  int64_t max_storage_per_org = 0;
  // API requests a second one key may send on average, bursts of twice
  // that (core/key_rates.h); more is 429 rate_limit. 0: no limit.
  double key_max_rps = 0;
  // The URL clients reach this server at, which the links it hands out
  // (a checkpoint archive's) start with, never the request's Host header
  // (a client names whatever host it likes there); "" = ApiServer::url()'s
  // default.
  std::string advertise_url;
};

class ApiServer {
 public:
  ApiServer(Metadata& metadata, ObjectStore& store, Runtime& runtime, ServerOptions options);
  ~ApiServer();

  // Binds the listening socket (kUnavailable when the address is taken).
  Status Bind();
  int port() const;
  // The URL clients reach this server at, after Bind: options.advertise_url,
  // else http://HOST:PORT of the bound address (127.0.0.1 for 0.0.0.0).
  std::string url() const;
  // Serves until Stop().
  void Serve();
  void Stop();
  http::ServerStats stats() const;
  // With ship_models: publishes every model of the catalog to the store,
  // saying so on stdout, so the first job on each does not wait for its
  // upload; returns early once `stop` is set (between models).
  void ShipModels(const std::atomic<bool>& stop);
  // Active (the default) or standby: a standby answers 503 "standby" naming
  // leader_url on every route but GET /v1/health, which tells the role.
  void SetRole(bool active, const std::string& leader_url);
  // Takes over the training loops of the store's journal (Loops::Recover):
  // once, when this control plane becomes the active one. How many runs.
  Result<int> RecoverLoops();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace burst
