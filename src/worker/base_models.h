// BaseModels: the base model a task names, as a folder on this node, kept
// loaded between tasks.
//
// A task names its base model by the control plane's folder ("model"). On
// the control plane's own machine (the local executor) the worker reads
// that folder. When the control plane ships models through the store (a
// task with "model_store": `burst serve --ship-models`, the default with
// the Slurm executor), the worker reads nothing of the control plane's
// filesystem: it fetches the model into its node's cache
// (BURST_MODEL_CACHE; store/model_store.h) once, and every later task on
// that node, by any worker, uses the copy. Checkpoints name the model as
// the control plane does either way (TrainOptions::base_model_name).
//
// Thread-safety: every method may be called from any thread.
// Errors: throw burst::Error (the store's, naming the model, or the loaders').
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/json.h"
#include "store/object_store.h"
#include "train/base_model_cache.h"

namespace burst {

class BaseModels {
 public:
  using LogFn = std::function<void(const std::string&)>;
  // `device`: where this worker's sampling and loops hold models (its GPU,
  // or the CPU).
  BaseModels(const ObjectStore& store, std::filesystem::path cache_root, torch::Device device = torch::kCPU)
      : store_(store), cache_root_(std::move(cache_root)), device_(device) {}
  torch::Device device() const { return device_; }

  // The task's base model folder on this node; `log` hears of a download.
  std::filesystem::path Dir(const Json& task, const LogFn& log = nullptr);
  // The task's base model, loaded on device() in FrozenDtypeOn(device())
  // (from the warm cache when it is the same).
  std::shared_ptr<const BaseModel> Get(const Json& task, const LogFn& log = nullptr);
  // The warm model as the control plane names it (a lease's "model"), or null.
  Json Loaded() const;
  BaseModelCache& cache() { return cache_; }

 private:
  const ObjectStore& store_;
  std::filesystem::path cache_root_;
  const torch::Device device_;
  BaseModelCache cache_;
  mutable std::mutex mu_;
  std::map<std::string, std::string> names_;  // GUARDED_BY(mu_): a fetched folder -> the control plane's name
};

}  // namespace burst
