#include "train/trainer.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/fs.h"
#include "model/cpu_threads.h"
#include "model/hf_io.h"
#include "train/activation_memory.h"
#include "train/base_model_cache.h"
#include "train/checkpoint.h"
#include "train/optimizer.h"
#include "train/run_folder.h"
#include "train/schedule.h"

#ifndef BURST_VERSION
#define BURST_VERSION "0.0.0"
#endif

namespace burst {
namespace {

// ----------------------------------------------------------------------------
// signals: stop at the next step boundary

std::atomic<int> g_signal{0};
void OnSignal(int sig) { g_signal.store(sig); }

class SignalScope {
 public:
  SignalScope() {
    g_signal.store(0);
    struct sigaction sa {};
    sa.sa_handler = OnSignal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~SignalScope() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }

 private:
  struct sigaction old_int_ {
  }, old_term_{};
};

}  // namespace

int ResolveThreads(int64_t threads) {
  if (threads > 0) return static_cast<int>(threads);
  unsigned n = std::thread::hardware_concurrency();
  return n ? static_cast<int>(n) : 1;
}

torch::Device ResolveDevice(const std::string& device) {
  if (device == "cpu") return torch::kCPU;
  if (device == "cuda") {
    if (!torch::cuda::is_available()) {
      throw Error(Code::kFailedPrecondition, "device cuda requested but this build or machine has no CUDA",
                  "device");
    }
    return torch::kCUDA;
  }
  return torch::cuda::is_available() ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
}

torch::ScalarType FrozenBaseDtype(const Recipe& recipe, torch::Device device) {
  if (recipe.method != "lora" || recipe.base_dtype == "float32") return torch::kFloat32;
  if (device.is_cuda()) return FrozenDtypeOn(device);
  if (recipe.base_dtype == "bfloat16") {
    throw Error(
        Code::kFailedPrecondition,
        "base_dtype bfloat16 needs a GPU, and this run's device is the CPU (which computes in float32)",
        "base_dtype");
  }
  return torch::kFloat32;
}

int64_t NewestValidState(const fs::path& run_dir) {
  for (int64_t step : ListCheckpointSteps(run_dir)) {
    fs::path dir = run_dir / "checkpoints" / StepDirName(step) / "state";
    Status s = VerifyManifest(dir, "burst-state");
    if (s.ok()) return step;
    std::fprintf(stderr, "burst: skipping checkpoint %s: %s\n", StepDirName(step).c_str(),
                 s.message().c_str());
  }
  return -1;
}

// ----------------------------------------------------------------------------
// the run

namespace {

class Run {
 public:
  Run(const Recipe& recipe, const fs::path& out, const TrainOptions& options)
      : r_(recipe), out_(fs::absolute(out)), opt_(options) {}

  TrainResult Go();

 private:
  // Refuses a previous run without --resume/--overwrite, or a resume with
  // another recipe. Writes nothing, so a run that fails to start (bad data,
  // bad model) leaves DIR as it was.
  void CheckDir();
  // After Load succeeded: replaces a previous run (--overwrite) and writes recipe.json.
  void PrepareDir();
  void Load();
  int64_t Restore();
  double TrainStep(int64_t step);
  // The loss sum of micro-batches [first, last) of the step's `micro`
  // (backpropagated, normalised by the whole step's *normaliser: loss tokens
  // or pairs); *tokens gets the tokens they fed.
  double SupervisedStep(const std::vector<std::vector<size_t>>& micro, size_t first, size_t last,
                        int64_t step, double* normaliser, int64_t* tokens);
  double DpoStep(const std::vector<std::vector<size_t>>& micro, size_t first, size_t last, double* normaliser,
                 int64_t* tokens);
  // Data parallel: sums the gradients, *loss_sum and *tokens across the
  // members, with this member's stop vote; sets dp_stop_ and exchange_s_.
  void AllReduce(double* loss_sum, int64_t* tokens);
  // Model averaging: sums *loss_sum, *tokens and the stop votes only.
  void ExchangeStats(double* loss_sum, int64_t* tokens);
  // Model averaging: every member's trainable weights and AdamW moments
  // replaced by the members' mean (adds to exchange_s_).
  void AverageModel();
  // The sum over `flat` across the members, timed into exchange_s_.
  void Exchange(std::vector<float>& flat);
  // AllReduce on a GPU with DataParallel::all_reduce_device: the flat
  // gradients as one tensor on the device.
  void AllReduceOnDevice(double* loss_sum, int64_t* tokens);
  float Vote() const {
    return g_signal.load() != 0 || (opt_.should_stop && opt_.should_stop()) ? 1.0f : 0.0f;
  }
  bool Averaging() const { return opt_.data_parallel && opt_.data_parallel->average_every > 0; }
  // Whether this member evaluates / writes checkpoints (data parallel: rank 0).
  bool Evaluates() const { return dp_rank_ == 0; }
  bool WritesCheckpoints() const {
    return dp_rank_ == 0 || (opt_.data_parallel && opt_.data_parallel->all_write_checkpoints);
  }
  int64_t StepMicroBatches() const { return r_.grad_accum * dp_size_; }
  std::vector<std::vector<size_t>> MicroBatches(int64_t step) const;
  EvalResult RunEval();
  void WriteMetrics(const Json& line);
  void WriteCheckpoint(int64_t step);
  Json RunInfo() const;
  void Progress(int64_t step, double loss, double lr);

  const Recipe& r_;
  fs::path out_;
  TrainOptions opt_;
  TrainResult result_;
  fs::path base_dir_;
  std::string BaseName() const {
    return opt_.base_model_name.empty() ? base_dir_.string() : opt_.base_model_name;
  }
  std::string base_sha_;
  std::shared_ptr<const BaseModel> cached_;  // from opt_.models, held for the run
  std::shared_ptr<const Tokenizer> tok_;
  LlamaModel model_;
  std::optional<LlamaModel> reference_;  // DPO with full fine-tuning
  Dataset train_, valid_;
  std::vector<double> ref_chosen_, ref_rejected_;  // DPO reference log-probs
  std::unique_ptr<AdamW> optim_;
  std::vector<torch::Tensor> params_;
  int64_t n_items_ = 0, mb_per_epoch_ = 0, steps_per_epoch_ = 0, total_ = 0;
  int64_t tokens_ = 0;
  double wall_offset_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::ofstream metrics_;
  int threads_ = 1;
  bool checkpoint_layers_ = false;  // activation_memory.h
  torch::Device device_ = torch::kCPU;
  bool replace_ = false;           // --overwrite of a previous run
  int dp_rank_ = 0, dp_size_ = 1;  // TrainOptions::data_parallel
  bool dp_stop_ = false;           // a member voted to stop in the last step's all-reduce
  double exchange_s_ = 0;          // the last step's all-reduce
};

void Run::CheckDir() {
  fs::path recipe_path = out_ / "recipe.json";
  bool has_run =
      fs::exists(recipe_path) || fs::exists(out_ / "checkpoints") || fs::exists(out_ / "metrics.jsonl");
  if (has_run && opt_.resume) {
    if (fs::exists(recipe_path)) {
      Json old = ParseJson(ReadFile(recipe_path), recipe_path.string());
      Recipe prev = Recipe::Parse(old, out_, recipe_path.string());
      std::string diff = DescribeDiff(r_.TrainingRelevant(), prev.TrainingRelevant());
      if (!diff.empty()) {
        throw Error(Code::kFailedPrecondition,
                    "cannot resume " + out_.string() + ": the recipe differs from " + recipe_path.string() +
                        " in " + diff,
                    "recipe");
      }
    }
  } else if (has_run && !opt_.overwrite) {
    throw Error(Code::kAlreadyExists,
                out_.string() +
                    " already holds a run; pass --resume to continue it or "
                    "--overwrite to replace it",
                out_.string());
  }
  replace_ = has_run && !opt_.resume;
}

void Run::PrepareDir() {
  if (replace_) {
    for (const char* name : {"checkpoints", "metrics.jsonl", "recipe.json"}) fs::remove_all(out_ / name);
  }
  fs::create_directories(out_ / "checkpoints");
  WriteFileAtomic(out_ / "recipe.json", r_.ToJson().dump(2) + "\n");
}

void Run::Load() {
  threads_ = ResolveThreads(r_.threads);
  SetCpuThreads(threads_);
  device_ = ResolveDevice(r_.device);
  const torch::ScalarType base_dtype = FrozenBaseDtype(r_, device_);
  result_.base_dtype = base_dtype == torch::kBFloat16 ? "bfloat16" : "float32";
  base_dir_ = ResolveModelPath(r_.model);
  if (opt_.models) {
    cached_ = opt_.models->Get(base_dir_, device_, base_dtype);
    tok_ = cached_->tokenizer;
  } else {
    tok_ = LoadTokenizer(base_dir_);
  }
  DataOptions dopt{r_.max_seq_len, r_.truncate, r_.chat_template, r_.template_kwargs};
  if (r_.loss == "dpo") {
    train_ = LoadPreferences(r_.train_file, *tok_, dopt);
    n_items_ = static_cast<int64_t>(train_.pairs.size());
  } else {
    train_ = LoadSupervised(r_.train_file, *tok_, dopt);
    n_items_ = static_cast<int64_t>(train_.examples.size());
  }
  if (!r_.valid_file.empty()) valid_ = LoadSupervised(r_.valid_file, *tok_, dopt);
  if (cached_) {
    // LoRA: a copy of the struct sharing the frozen base tensors; AddLora
    // fills the copy's own adapter maps. Full: tensors of its own.
    model_ = r_.method == "full" ? CloneWeights(cached_->model) : cached_->model;
    base_sha_ = cached_->sha256;
  } else {
    model_ = LoadModel(base_dir_, device_, base_dtype);
    base_sha_ = BaseModelSha(base_dir_);
  }
  // A full fine-tune trains q/k/v and gate/up one by one (the loaded,
  // frozen model has them fused).
  if (r_.method == "full") model_.Unfuse();
  if (r_.method == "lora") model_.AddLora(r_.lora, r_.seed);
  if (r_.loss == "dpo" && r_.method == "full") {
    // Frozen and used without gradients: the cached tensors serve as they are.
    reference_ = cached_ ? cached_->model : LoadModel(base_dir_, device_);
  }
  model_.SetTrainable(r_.method == "full");
  NamedTensors trainable;
  for (auto& nt : (r_.method == "full" ? model_.BaseWeights() : model_.LoraWeights()))
    trainable.push_back(nt);
  for (auto& nt : trainable) params_.push_back(nt.second);
  for (const torch::Tensor& p : params_) result_.trainable_floats += p.numel();
  optim_ = std::make_unique<AdamW>(trainable, r_.beta1, r_.beta2, r_.eps, r_.weight_decay);
  mb_per_epoch_ = (n_items_ + r_.batch_size - 1) / r_.batch_size;
  if (opt_.data_parallel) {
    const auto& dp = *opt_.data_parallel;
    if (dp.size < 1 || dp.rank < 0 || dp.rank >= dp.size || !dp.all_reduce) {
      throw Error(Code::kInvalidArgument, "data parallel: rank must be in [0, size) with an all_reduce",
                  "data_parallel");
    }
    dp_rank_ = dp.rank;
    dp_size_ = dp.size;
  }
  steps_per_epoch_ = (mb_per_epoch_ + StepMicroBatches() - 1) / StepMicroBatches();
  total_ = steps_per_epoch_ * r_.epochs;
  if (r_.max_steps) total_ = std::min(total_, *r_.max_steps);
  result_.total_steps = total_;
  result_.threads = threads_;
  result_.device = device_.str();
  const int64_t rows = r_.loss == "dpo" ? 2 * r_.batch_size : r_.batch_size;  // DPO: chosen and rejected
  // Host memory only (a GPU's is not read: unknown, so off unless asked),
  // less the gradients and AdamW's two moments not allocated yet.
  const int64_t free_bytes = device_.is_cuda() ? -1 : AvailableMemoryBytes();
  const int64_t for_activations =
      free_bytes < 0 ? -1 : std::max<int64_t>(0, free_bytes - 12 * result_.trainable_floats);
  const CheckpointingChoice ck = ChooseCheckpointing(r_.activation_checkpointing, model_.config, rows,
                                                     r_.max_seq_len, r_.Packs(), for_activations);
  checkpoint_layers_ = ck.on;
  result_.activation_checkpointing = ck.on;
  if (opt_.progress) std::fprintf(stderr, "%s\n", ck.why.c_str());
}

int64_t Run::Restore() {
  int64_t step = opt_.resume ? NewestValidState(out_) : -1;
  // Checkpoint folders past the one resumed from (corrupt or half-written, so
  // skipped) belong to the abandoned timeline: drop them, or PruneCheckpoints
  // would count them as the newest and delete the checkpoints this run writes.
  for (int64_t s : ListCheckpointSteps(out_)) {
    if (s > step) fs::remove_all(out_ / "checkpoints" / StepDirName(s));
  }
  if (step < 0) {
    fs::remove(out_ / "metrics.jsonl");
    return 0;
  }
  fs::path dir = out_ / "checkpoints" / StepDirName(step) / "state";
  Json st = ParseJson(ReadFile(dir / "state.json"), (dir / "state.json").string());
  if (st.value("threads", 0) != threads_ || st.value("device", "") != device_.str()) {
    throw Error(Code::kFailedPrecondition,
                "checkpoint " + dir.string() + " was written with " + std::to_string(st.value("threads", 0)) +
                    " threads on " + st.value("device", "?") + "; this run has " + std::to_string(threads_) +
                    " on " + device_.str() + ", and exact resume needs them equal (set threads/device)",
                "threads");
  }
  // A step's micro-batches are shared out by the members' number.
  if (st.value("members", int64_t{1}) != dp_size_) {
    throw Error(Code::kFailedPrecondition,
                "checkpoint " + dir.string() + " was written by a run on " +
                    std::to_string(st.value("members", int64_t{1})) + " workers; this run has " +
                    std::to_string(dp_size_) + ", and exact resume needs them equal (set workers)",
                "workers");
  }
  // Different GEMM kernels round differently (on the CPU, where the BLAS
  // computes), and so may another version or build of the same library: the
  // library first, since no variable changes it. Checkpoints from before
  // these were recorded carry no "blas", or no "blas_library": what one
  // lacks is not checked.
  if (device_.is_cpu()) CheckSameBlas(st, dir);
  if (st.value("base_model_sha256", "") != base_sha_) {
    throw Error(Code::kFailedPrecondition,
                "checkpoint " + dir.string() + " was trained from a different base model", "model");
  }
  if (st.value("train_sha256", "") != train_.sha256) {
    throw Error(Code::kFailedPrecondition,
                "checkpoint " + dir.string() + " was trained on a different " + r_.train_file, "train_file");
  }
  TensorMap weights = ReadSafetensors(dir / "trainable.safetensors");
  {
    torch::NoGradGuard no_grad;
    auto slots = r_.method == "full" ? model_.BaseWeightSlots() : model_.LoraWeightSlots();
    for (auto& [name, slot] : slots) {
      auto it = weights.find(name);
      if (it == weights.end()) throw Error(Code::kDataLoss, dir.string() + ": lacks " + name, name);
      slot->copy_(it->second);
    }
  }
  optim_->LoadState(ReadSafetensors(dir / "optimizer.safetensors"), st.at("optimizer_steps").get<int64_t>());
  tokens_ = st.at("tokens").get<int64_t>();
  wall_offset_ = st.value("wall_s", 0.0);
  TruncateMetrics(out_ / "metrics.jsonl", step);
  // The baseline eval (step 0) ran in an earlier attempt; report it again.
  std::istringstream lines(fs::exists(out_ / "metrics.jsonl") ? ReadFile(out_ / "metrics.jsonl") : "");
  for (std::string line; std::getline(lines, line);) {
    Json j = Json::parse(line);
    if (j.value("type", "") != "eval" || j.value("step", -1) != 0) continue;
    EvalResult base;
    base.loss = j.value("eval_loss", 0.0);
    base.token_acc = j.value("eval_token_acc", 0.0);
    if (j["eval_exact_match"].is_number()) base.exact_match = j["eval_exact_match"].get<double>();
    if (j["eval_label_acc"].is_number()) base.label_acc = j["eval_label_acc"].get<double>();
    result_.baseline = base;
  }
  result_.resumed = true;
  result_.resumed_from = step;
  return step;
}

std::vector<std::vector<size_t>> Run::MicroBatches(int64_t step) const {
  StepSchedule sched{n_items_, r_.batch_size, StepMicroBatches(), r_.seed};
  return sched.MicroBatches(step);
}

double Run::SupervisedStep(const std::vector<std::vector<size_t>>& micro, size_t first, size_t last,
                           int64_t step, double* normaliser, int64_t* tokens) {
  // The step's loss is the sum over all its loss tokens divided by their
  // count, so grad_accum x batch_size equals one big batch (and the members
  // of a data-parallel step, each with its share, one member).
  double total_weight = 0;
  for (const auto& items : micro)
    for (size_t i : items)
      for (size_t t = 1; t < train_.examples[i].weights.size(); ++t)
        total_weight += train_.examples[i].weights[t];
  double loss_sum = 0;
  ForwardOptions fo;
  fo.training = true;
  fo.checkpoint_layers = checkpoint_layers_;
  for (size_t k = first; k < last; ++k) {
    // Dropout draws from a generator of the micro-batch's own: (seed, step)
    // for the first, mixed with k for the others, so a member computing
    // micro-batch k draws what one member computing them all draws.
    const uint64_t s0 = StepSeed(r_.seed, step);
    const uint64_t seed = k == 0 ? s0 : SplitMix(s0 ^ (k * 0x9e3779b97f4a7c15ull));
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    fo.generator = &gen;
    std::vector<const Example*> ptrs;
    for (size_t i : micro[k]) ptrs.push_back(&train_.examples[i]);
    // Packed: the examples end to end in one row (1, N); else padded (B, T).
    PackedBatch b;
    if (r_.Packs()) {
      b = MakePackedBatch(ptrs, device_);
      fo.seq_lens = b.seq_lens;
    } else {
      static_cast<Batch&>(b) = MakeBatch(ptrs, device_);
    }
    // Only the loss positions leave the last layer (ForwardOptions::outputs).
    SelectLossPositions(&b, &fo);
    torch::Tensor hidden = model_.Hidden(b.inputs, nullptr, fo);  // (1, M, C)
    TargetLogProbs t = SelectedLogProbs(model_, hidden, b.targets, b.weights);
    torch::Tensor nll = -(t.logp * t.weights).sum();  // ()
    (nll / total_weight).backward();
    loss_sum += nll.item<double>();
    *tokens += b.tokens;
  }
  *normaliser = total_weight;
  return loss_sum;
}

// log p(chosen | prompt) and log p(rejected | prompt) of each pair: (P), (P).
static std::pair<torch::Tensor, torch::Tensor> PairLogps(const LlamaModel& m,
                                                         const std::vector<const PreferenceExample*>& pairs,
                                                         int64_t* tokens, bool checkpoint_layers) {
  std::vector<PromptCompletion> seqs;
  for (const auto* p : pairs) {
    seqs.emplace_back(&p->prompt_ids, &p->chosen_ids);
    seqs.emplace_back(&p->prompt_ids, &p->rejected_ids);
  }
  torch::Tensor sums = CompletionLogProbs(m, seqs, tokens, checkpoint_layers).view({-1, 2});  // (P, 2)
  return {sums.select(1, 0), sums.select(1, 1)};
}

double Run::DpoStep(const std::vector<std::vector<size_t>>& micro, size_t first, size_t last,
                    double* normaliser, int64_t* tokens) {
  int64_t n_pairs = 0;
  for (const auto& items : micro) n_pairs += static_cast<int64_t>(items.size());
  double loss_sum = 0;
  for (size_t k = first; k < last; ++k) {
    const std::vector<size_t>& items = micro[k];
    std::vector<const PreferenceExample*> ptrs;
    for (size_t i : items) ptrs.push_back(&train_.pairs[i]);
    auto [pc, pr] = PairLogps(model_, ptrs, tokens, checkpoint_layers_);
    std::vector<double> rc, rr;
    for (size_t i : items) {
      rc.push_back(ref_chosen_[i]);
      rr.push_back(ref_rejected_[i]);
    }
    torch::Tensor ref_c = torch::tensor(rc, torch::kFloat64).to(torch::kFloat32).to(device_);
    torch::Tensor ref_r = torch::tensor(rr, torch::kFloat64).to(torch::kFloat32).to(device_);
    torch::Tensor margin = r_.dpo_beta * ((pc - ref_c) - (pr - ref_r));  // (P)
    torch::Tensor loss = -torch::log_sigmoid(margin).sum();
    (loss / static_cast<double>(n_pairs)).backward();
    loss_sum += loss.item<double>();
  }
  *normaliser = static_cast<double>(n_pairs);
  return loss_sum;
}

void Run::AllReduce(double* loss_sum, int64_t* tokens) {
  if (opt_.data_parallel->all_reduce_device) {
    AllReduceOnDevice(loss_sum, tokens);
    return;
  }
  std::vector<float> flat;
  for (const torch::Tensor& p : params_) {
    const torch::Tensor g = p.grad().defined() ? p.grad().to(torch::kCPU, torch::kFloat32).contiguous()
                                               : torch::zeros({p.numel()});
    const float* d = g.data_ptr<float>();
    flat.insert(flat.end(), d, d + g.numel());
  }
  flat.push_back(static_cast<float>(*loss_sum));
  flat.push_back(static_cast<float>(*tokens));  // exact below 2^24 a step
  flat.push_back(Vote());
  exchange_s_ = 0;
  Exchange(flat);
  size_t at = 0;
  for (torch::Tensor& p : params_) {
    torch::Tensor g = torch::from_blob(flat.data() + at, p.sizes(), torch::kFloat32).clone();
    p.mutable_grad() = g.to(p.device(), p.scalar_type());
    at += static_cast<size_t>(p.numel());
  }
  *loss_sum = flat[at];
  *tokens = static_cast<int64_t>(std::llround(flat[at + 1]));
  dp_stop_ = flat[at + 2] > 0.5f;
}

void Run::AllReduceOnDevice(double* loss_sum, int64_t* tokens) {
  torch::NoGradGuard no_grad;
  // The same layout as AllReduce's: every gradient, then loss, tokens, vote.
  std::vector<torch::Tensor> parts;
  for (const torch::Tensor& p : params_) {
    parts.push_back(p.grad().defined() ? p.grad().to(torch::kFloat32).reshape({-1})
                                       : torch::zeros({p.numel()}, p.options().dtype(torch::kFloat32)));
  }
  parts.push_back(
      torch::tensor({static_cast<float>(*loss_sum), static_cast<float>(*tokens), Vote()}).to(device_));
  torch::Tensor flat = torch::cat(parts).contiguous();
  exchange_s_ = 0;
  const auto t0 = std::chrono::steady_clock::now();
  if (Status s = opt_.data_parallel->all_reduce_device(flat); !s.ok()) throw Error(s);
  int64_t at = 0;
  for (torch::Tensor& p : params_) {
    p.mutable_grad() = flat.narrow(0, at, p.numel()).view(p.sizes()).to(p.scalar_type()).clone();
    at += p.numel();
  }
  const torch::Tensor stats = flat.narrow(0, at, 3).cpu();  // waits for the reduction
  exchange_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  *loss_sum = stats[0].item<float>();
  *tokens = static_cast<int64_t>(std::llround(stats[1].item<float>()));
  dp_stop_ = stats[2].item<float>() > 0.5f;
}

void Run::Exchange(std::vector<float>& flat) {
  const auto t0 = std::chrono::steady_clock::now();
  if (Status s = opt_.data_parallel->all_reduce(flat); !s.ok()) throw Error(s);
  exchange_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void Run::ExchangeStats(double* loss_sum, int64_t* tokens) {
  std::vector<float> flat = {static_cast<float>(*loss_sum), static_cast<float>(*tokens), Vote()};
  exchange_s_ = 0;
  Exchange(flat);
  *loss_sum = flat[0];
  *tokens = static_cast<int64_t>(std::llround(flat[1]));
  dp_stop_ = flat[2] > 0.5f;
}

void Run::AverageModel() {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> all = params_;
  for (auto& [name, t] : optim_->State()) all.push_back(t);
  std::vector<float> flat;
  for (const torch::Tensor& t : all) {
    const torch::Tensor c = t.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    flat.insert(flat.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  }
  Exchange(flat);
  const float inv = 1.0f / static_cast<float>(dp_size_);
  size_t at = 0;
  for (torch::Tensor& t : all) {
    torch::Tensor mean = torch::from_blob(flat.data() + at, t.sizes(), torch::kFloat32).mul(inv);
    t.copy_(mean.to(t.device(), t.scalar_type()));
    at += static_cast<size_t>(t.numel());
  }
}

double Run::TrainStep(int64_t step) {
  const auto t_step = std::chrono::steady_clock::now();
  auto micro = MicroBatches(step);  // the whole step's; this member's share: [first, last)
  const size_t first = std::min(micro.size(), static_cast<size_t>(dp_rank_ * r_.grad_accum));
  const size_t last = std::min(micro.size(), first + static_cast<size_t>(r_.grad_accum));
  double normaliser = 0;
  int64_t step_tokens = 0;
  double loss_sum = r_.loss == "dpo" ? DpoStep(micro, first, last, &normaliser, &step_tokens)
                                     : SupervisedStep(micro, first, last, step, &normaliser, &step_tokens);
  const int64_t member_tokens = step_tokens;
  if (Averaging()) {
    // This member's own update: the mean gradient over its share alone.
    double share = 0;
    for (size_t k = first; k < last; ++k)
      for (size_t i : micro[k])
        share += r_.loss == "dpo" ? 1.0 : [&] {
          double w = 0;
          for (size_t t = 1; t < train_.examples[i].weights.size(); ++t) w += train_.examples[i].weights[t];
          return w;
        }();
    if (share > 0) {
      torch::NoGradGuard no_grad;
      for (torch::Tensor& p : params_)
        if (p.grad().defined()) p.mutable_grad().mul_(normaliser / share);
    }
    ExchangeStats(&loss_sum, &step_tokens);
  } else if (opt_.data_parallel) {
    AllReduce(&loss_sum, &step_tokens);
  }
  tokens_ += step_tokens;
  const double loss = loss_sum / normaliser;
  // DPO's loss tokens: the chosen and rejected completions of the step's pairs.
  double loss_tokens = normaliser;
  if (r_.loss == "dpo") {
    loss_tokens = 0;
    for (const auto& items : micro)
      for (size_t i : items)
        loss_tokens +=
            static_cast<double>(train_.pairs[i].chosen_ids.size() + train_.pairs[i].rejected_ids.size());
  }
  double grad_norm = ClipGradNorm(params_, r_.grad_clip);
  double lr = ScheduledLr(r_.schedule, r_.learning_rate, step, r_.warmup_steps, total_);
  optim_->Step(lr);
  for (auto& p : params_) p.mutable_grad() = torch::Tensor();
  // Model averaging: where the members meet (every K steps, and wherever
  // a checkpoint is written or they stop, all alike on every member).
  bool averaged = false;
  if (Averaging()) {
    const int64_t k = opt_.data_parallel->average_every;
    averaged = step % k == 0 || step == total_ || dp_stop_ ||
               (r_.checkpoint_every > 0 && step % r_.checkpoint_every == 0) ||
               (opt_.stop_after_step && step >= *opt_.stop_after_step);
    if (averaged) AverageModel();
  }
  double wall =
      wall_offset_ + std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  OrderedJson line;
  line["type"] = "train";
  line["step"] = step;
  line["train_loss"] = loss;
  line["lr"] = lr;
  line["tokens"] = tokens_;
  line["loss_tokens"] = static_cast<int64_t>(loss_tokens);
  line["grad_norm"] = grad_norm;
  line["epoch"] = (step - 1) / steps_per_epoch_ + 1;
  line["wall_s"] = wall;
  // The step alone (its compute, and its exchange where there are members):
  // what the cost model is measured on (docs/cost-model.md).
  line["step_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_step).count();
  if (opt_.data_parallel) {  // this member's share of the step, and its exchange
    line["member_tokens"] = member_tokens;
    line["step_tokens"] = step_tokens;
    if (Averaging()) line["averaged"] = averaged;
    line["exchange_s"] = exchange_s_;
  }
  WriteMetrics(Json::parse(line.dump()));
  Progress(step, loss, lr);
  return loss;
}

EvalResult Run::RunEval() {
  EvalOptions eo;
  eo.batch_size = r_.batch_size;
  return Evaluate(model_, *tok_, valid_, eo);
}

void Run::WriteMetrics(const Json& line) {
  // Keys in a stable, readable order: type, step first.
  OrderedJson o;
  o["type"] = line.value("type", "");
  o["step"] = line.value("step", int64_t{0});
  for (auto it = line.begin(); it != line.end(); ++it)
    if (it.key() != "type" && it.key() != "step") o[it.key()] = *it;
  metrics_ << o.dump() << "\n";
  metrics_.flush();
  if (opt_.on_metrics) opt_.on_metrics(line);
}

Json Run::RunInfo() const {
  return {{"burst_version", BURST_VERSION},
          {"torch_version", TORCH_VERSION},
          {"recipe", Json::parse(r_.ToJson().dump())},
          {"base_model", BaseName()},
          {"base_model_sha256", base_sha_},
          {"train_sha256", train_.sha256},
          {"valid_sha256", valid_.sha256},
          {"device", device_.str()},
          {"base_dtype", result_.base_dtype},
          {"threads", threads_},
          {"activation_checkpointing", checkpoint_layers_},
          {"blas", BlasCoreName()},
          {"blas_library", BlasLibraryName()}};
}

void Run::WriteCheckpoint(int64_t step) {
  fs::path dir = out_ / "checkpoints" / StepDirName(step);
  fs::remove_all(dir);  // a half-written folder from a killed attempt
  fs::path sampler = dir / "sampler", state = dir / "state";
  fs::create_directories(sampler);
  fs::create_directories(state);
  Json info = RunInfo();
  info["step"] = step;
  // sampler: loadable by the Hugging Face ecosystem as it is
  if (r_.method == "lora") {
    SaveAdapter(model_, sampler, BaseName());
  } else {
    SaveModel(model_, sampler);
  }
  CopyTokenizerFiles(base_dir_, sampler);
  if (!fs::exists(sampler / "generation_config.json")) {
    Json gen = {{"do_sample", true}, {"temperature", 1.0}, {"top_p", 1.0}};
    if (tok_->bos_id) gen["bos_token_id"] = *tok_->bos_id;
    if (!tok_->stop_ids.empty()) gen["eos_token_id"] = tok_->stop_ids;
    WriteFileAtomic(sampler / "generation_config.json", gen.dump(2) + "\n");
  }
  WriteFileAtomic(sampler / "run.json", info.dump(2) + "\n");
  CommitManifest(sampler, r_.method == "lora" ? "peft-lora" : "hf-llama", {{"step", step}});
  // state: everything needed to continue exactly
  WriteSafetensors(state / "trainable.safetensors",
                   r_.method == "full" ? model_.BaseWeights() : model_.LoraWeights());
  WriteSafetensors(state / "optimizer.safetensors", optim_->State());
  double wall =
      wall_offset_ + std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  Json st = {{"step", step},
             {"total_steps", total_},
             {"optimizer_steps", optim_->steps()},
             {"tokens", tokens_},
             {"wall_s", wall},
             {"cursor",
              {{"epoch", step / steps_per_epoch_},
               {"step_in_epoch", step % steps_per_epoch_},
               {"micro_batches_per_epoch", mb_per_epoch_}}},
             {"schedule",
              {{"kind", r_.schedule},
               {"warmup_steps", r_.warmup_steps},
               {"next_lr", ScheduledLr(r_.schedule, r_.learning_rate, step + 1, r_.warmup_steps, total_)}}},
             {"rng",
              {{"seed", r_.seed},
               {"shuffle", "Fisher-Yates per epoch, splitmix64 seeded by (seed, epoch)"},
               {"dropout", "CPU generator seeded by splitmix64(seed, step) at each step"},
               {"next_step_seed", StepSeed(r_.seed, step + 1)}}},
             {"threads", threads_},
             {"members", dp_size_},
             {"device", device_.str()},
             {"blas", BlasCoreName()},
             {"blas_library", BlasLibraryName()},
             {"base_model_sha256", base_sha_},
             {"train_sha256", train_.sha256},
             {"recipe", r_.TrainingRelevant()}};
  WriteFileAtomic(state / "state.json", st.dump(2) + "\n");
  CommitManifest(state, "burst-state", {{"step", step}});
  SyncPath(dir);
  result_.sampler_dir = sampler;
  result_.state_dir = state;
  if (opt_.on_checkpoint) opt_.on_checkpoint(step, dir);  // before pruning, which may delete older ones
  PruneCheckpoints(out_, r_.keep_last);
}

void Run::Progress(int64_t step, double loss, double lr) {
  if (!opt_.progress) return;
  double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  int64_t done = step - result_.resumed_from;
  double eta = done > 0 ? el / static_cast<double>(done) * static_cast<double>(total_ - step) : 0;
  const int width = 28;
  int filled = static_cast<int>(width * step / std::max<int64_t>(1, total_));
  std::string bar(static_cast<size_t>(filled), '=');
  bar.resize(width, ' ');
  std::fprintf(stderr, "\r[%s] step %lld/%lld  loss %.4f  lr %.2e  %.0f tok/s  eta %s   ", bar.c_str(),
               static_cast<long long>(step), static_cast<long long>(total_), loss, lr,
               el > 0 ? static_cast<double>(tokens_) / (el + wall_offset_) : 0.0,  // whole-run average
               FormatDuration(eta).c_str());
  if (step == total_) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

TrainResult Run::Go() {
  SignalScope signals;  // first, so a signal while loading stops cleanly too
  CheckDir();
  Load();
  PrepareDir();
  start_ = std::chrono::steady_clock::now();
  int64_t step = Restore();
  // Members vote in each step's all-reduce instead (a member leaving here
  // would leave the others waiting in step 1).
  const bool stop_first = !opt_.data_parallel && opt_.should_stop && opt_.should_stop();
  if (g_signal.load() != 0 || stop_first) {  // stopped before the first step: nothing to save
    result_.step = step;
    result_.interrupted = true;
    result_.signal = g_signal.load();
    result_.stop_requested = stop_first;
    return result_;
  }
  metrics_.open(out_ / "metrics.jsonl", std::ios::app);
  if (r_.loss == "dpo") {
    // Reference log-probs: the base model (LoRA switched off, or a frozen copy).
    torch::NoGradGuard no_grad;
    LlamaModel ref = reference_ ? *reference_ : model_;
    ref.lora.reset();
    for (size_t i = 0; i < train_.pairs.size(); i += static_cast<size_t>(r_.batch_size)) {
      std::vector<const PreferenceExample*> ptrs;
      for (size_t j = i; j < std::min(train_.pairs.size(), i + static_cast<size_t>(r_.batch_size)); ++j)
        ptrs.push_back(&train_.pairs[j]);
      auto [c, rj] = PairLogps(ref, ptrs, nullptr, /*checkpoint_layers=*/false);
      for (int64_t k = 0; k < c.size(0); ++k) {
        ref_chosen_.push_back(c[k].item<double>());
        ref_rejected_.push_back(rj[k].item<double>());
      }
    }
  }
  const bool has_valid = !valid_.examples.empty() && Evaluates();
  if (step == 0 && has_valid) {
    EvalResult e = RunEval();
    result_.baseline = e;
    Json line = e.ToJson();
    line["type"] = "eval";
    line["step"] = 0;
    WriteMetrics(line);
  }
  if (step >= total_) {
    result_.step = step;
    fs::path dir = out_ / "checkpoints" / StepDirName(step);
    result_.sampler_dir = dir / "sampler";
    result_.state_dir = dir / "state";
    return result_;
  }
  for (++step; step <= total_; ++step) {
    TrainStep(step);
    bool last = step == total_;
    if (has_valid && (last || (r_.eval_every > 0 && step % r_.eval_every == 0))) {
      EvalResult e = RunEval();
      if (last) result_.final_eval = e;
      Json line = e.ToJson();
      line["type"] = "eval";
      line["step"] = step;
      WriteMetrics(line);
    }
    // Not polled after the last step: there is nothing left to stop. Data
    // parallel: the members' votes in this step's all-reduce, alike on all.
    const bool requested = !last && (opt_.data_parallel ? dp_stop_ : opt_.should_stop && opt_.should_stop());
    bool stop = (!opt_.data_parallel && g_signal.load() != 0) || requested ||
                (opt_.stop_after_step && step >= *opt_.stop_after_step);
    if (WritesCheckpoints() &&
        (last || stop || (r_.checkpoint_every > 0 && step % r_.checkpoint_every == 0))) {
      WriteCheckpoint(step);
    }
    if (stop && !last) {
      if (opt_.progress) std::fprintf(stderr, "\n");
      result_.interrupted = true;
      result_.signal = g_signal.load();
      result_.stop_requested = requested;
      break;
    }
  }
  result_.step = std::min(step, total_);
  result_.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  return result_;
}

}  // namespace

TrainResult Train(const Recipe& recipe, const fs::path& out_dir, const TrainOptions& options) {
  Run run(recipe, out_dir, options);
  return run.Go();
}

}  // namespace burst
