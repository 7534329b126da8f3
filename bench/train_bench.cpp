// burst_bench: Burst's side of the training / sampling benchmark, and this
// machine's GEMM reference (docs/bench.md).
//
// Subcommands mirror the plain PyTorch eager peers bench/peer_train.py and
// bench/peer_sample.py flag for flag, and each prints ONE JSON line:
//
//   burst_bench train  --model DIR | --preset NAME [--vocab V] --method lora|full
//                      --rank 8 --alpha 16 --targets q,k,v,o,gate,up,down
//                      --batch-size B --seq-len T --steps N --warmup W
//                      --threads N --lr 1e-4 --seed S
//   burst_bench sample --model DIR | --preset NAME [--vocab V] --prompt-len P
//                      --new-tokens N --batch-size B --threads N --seed S
//   burst_bench gemm   --threads N --size 1024 [--repeats 10]
//   burst_bench init   --preset NAME [--vocab V] --seed S --out DIR
//                      (writes the random preset model as an HF folder, so the
//                       peer loads exactly the weights Burst trains)
//   burst_bench parity | resume: the GPU checks (gpu_bench.h)
//   burst_bench batches --recipe FILE --out FILE: a recipe's micro-batches for
//                      the real-data peers (train_batches.cpp)
//
// train, sample and gemm take --device cpu|cuda and --precision
// auto|float32|bfloat16 (auto: bfloat16 on CUDA). On CUDA in bfloat16 a
// LoRA model's frozen base is bfloat16 (FreezeBaseAs) and the forward runs
// under autocast; a --preset model is made on the GPU directly. Results then
// carry the caching allocator's peak memory (gpu_bench.h).
//
// The training step is the trainer's own hot path (trainer.cpp,
// SupervisedStep): Hidden -> SelectedLogProbs over every position that has a
// next token -> mean NLL -> backward -> AdamW (betas 0.9/0.999, eps 1e-8,
// weight decay 0, constant lr, no clipping, like the peer) -> grads dropped.
// Token batches (B, T) are drawn before timing from a CPU generator seeded
// with --seed in the same order as the peer (torch.randint), so with the same
// model folder the first loss matches the peer's.
//
// Errors: a message on stderr and exit status 1.
#include <sys/resource.h>
#if __has_include(<torch/csrc/autograd/profiler_legacy.h>)
#include <torch/csrc/autograd/profiler_legacy.h>
#define BURST_BENCH_PROFILE 1  // --profile (libtorch's legacy profiler; not in every version)
#endif
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "core/alloc.h"
#include "core/json.h"
#include "core/status.h"
#include "gpu_bench.h"
#include "model/cpu_threads.h"
#include "model/hf_io.h"
#include "model/llama.h"
#include "model/presets.h"
#include "train/optimizer.h"
#include "train_batches.h"

namespace burst {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Peak resident set of this process in MiB (Linux reports KiB).
double PeakRssMb() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

double Round(double x, int digits) {
  double f = std::pow(10.0, digits);
  return std::round(x * f) / f;
}

std::string TorchVersion() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

void SetThreads(int threads) {
  burst::SetCpuThreads(threads);
  try {
    at::set_num_interop_threads(threads);  // as the peer does; fails if already used
  } catch (const std::exception&) {
  }
}

struct ModelArgs {
  std::string model;     // HF folder
  std::string preset;    // or a preset with random weights
  int64_t vocab = 4096;  // for presets that take the vocabulary from a tokenizer
  uint64_t seed = 0;
  std::string device = "cpu";
  std::string precision = "auto";
  torch::Device where() const { return BenchDevice(device); }
  // bfloat16 autocast on CUDA (the CPU computes in float32).
  bool bf16() const { return where().is_cuda() && precision != "float32"; }
};

void AddModelArgs(CLI::App* app, ModelArgs& m) {
  auto* model = app->add_option("--model", m.model, "Hugging Face model folder");
  auto* preset = app->add_option("--preset", m.preset, "random model of a preset (tiny, small, 100m)");
  model->excludes(preset);
  app->add_option("--vocab", m.vocab, "vocabulary of a --preset that has none of its own (100m has 32000)")
      ->capture_default_str();
  app->add_option("--device", m.device, "cpu or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  app->add_option("--precision", m.precision, "auto (bfloat16 on CUDA), float32 or bfloat16")
      ->check(CLI::IsMember({"auto", "float32", "bfloat16"}))
      ->capture_default_str();
}

// The preset's config: its own vocabulary when it has one, else --vocab.
LlamaConfig BenchPresetConfig(const std::string& name, int64_t vocab) {
  for (const auto& p : Presets())
    if (p.name == name && p.config.vocab_size > 0) return PresetConfig(name, 0);
  return PresetConfig(name, vocab);
}

// The model on --device; `frozen`: its base weights will not train, so on
// CUDA in bfloat16 they are kept in bfloat16.
LlamaModel MakeModel(const ModelArgs& m, bool frozen) {
  const torch::Device where = m.where();
  const bool half_base = m.bf16() && frozen;
  LlamaModel model;
  if (!m.model.empty()) {
    model = LoadModel(m.model, where);
  } else if (m.preset.empty()) {
    throw Error(Code::kInvalidArgument, "pass --model DIR or --preset NAME", "model");
  } else {
    auto opts = torch::TensorOptions().device(where).dtype(half_base ? torch::kBFloat16 : torch::kFloat32);
    model = LlamaModel::Random(BenchPresetConfig(m.preset, m.vocab), m.seed, 0.02, opts);
  }
  if (half_base) model.FreezeBaseAs(torch::kBFloat16);
  model.cuda_bf16 = m.bf16();
  return model;
}

std::string PrecisionName(const ModelArgs& m) { return m.bf16() ? "bfloat16" : "float32"; }

// The JSON line's device fields: the device, its precision and, on CUDA,
// the peak memory.
void AddDeviceFields(OrderedJson& res, const ModelArgs& m) {
  res["device"] = m.device;
  res["precision"] = PrecisionName(m);
  OrderedJson mem = GpuPeakMemory(m.where());
  if (mem.is_object()) {
    for (auto& [k, v] : mem.items()) res[k] = v;
  }
}

int64_t Numel(const NamedTensors& ts) {
  int64_t n = 0;
  for (const auto& [name, t] : ts) n += t.numel();
  return n;
}

// Weights that are matrix-multiplied per token: the seven projections of
// every layer and the LM head (norms and the embedding lookup cost no GEMM).
int64_t MatmulParams(const LlamaModel& m) {
  int64_t n = m.lm_head.numel();
  for (const auto& l : m.layers)
    for (const auto* w : {&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.gate_proj, &l.up_proj, &l.down_proj})
      n += w->numel();
  return n;
}

// ----------------------------------------------------------------------------
// train

struct TrainArgs {
  ModelArgs m;
  std::string method = "lora";
  int64_t rank = 8;
  double alpha = 16;
  std::string targets = "q,k,v,o,gate,up,down";
  int64_t batch = 8, seq = 128, steps = 10, warmup = 2;
  int threads = 1;
  double lr = 1e-4;
  std::string profile;
  bool checkpoint_layers = false;  // activation checkpointing
};

int TrainBench(const TrainArgs& a) {
  if (a.seq < 2) throw Error(Code::kInvalidArgument, "--seq-len must be at least 2", "seq-len");
  if (a.steps < 1) throw Error(Code::kInvalidArgument, "--steps must be at least 1", "steps");
  SetThreads(a.threads);
  torch::manual_seed(a.m.seed);
  const bool full = a.method == "full";

  auto t_load = Clock::now();
  LlamaModel model = MakeModel(a.m, /*frozen=*/!full);
  const torch::Device where = model.device;
  if (!full) {
    LoraSpec spec;
    spec.rank = a.rank;
    spec.alpha = a.alpha;
    spec.targets.clear();
    std::stringstream ss(a.targets);
    for (std::string t; std::getline(ss, t, ',');)
      if (!t.empty()) spec.targets.push_back(NormalizeLoraTarget(t, "targets"));
    model.AddLora(spec, a.m.seed);
  }
  if (full) model.Unfuse();  // trains q/k/v, gate/up one by one
  model.SetTrainable(full);
  const double load_s = Seconds(t_load, Clock::now());
  const double load_rss = PeakRssMb();

  NamedTensors trainable = full ? model.BaseWeights() : model.LoraWeights();
  std::vector<torch::Tensor> params;
  for (auto& nt : trainable) params.push_back(nt.second);
  AdamW optim(trainable, 0.9, 0.999, 1e-8, /*weight_decay=*/0.0);

  // Batches as the peer draws them: one randint (B, T) per step, in order.
  const int64_t total = a.warmup + a.steps, vocab = model.config.vocab_size;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(a.m.seed);
  std::vector<torch::Tensor> batches;
  for (int64_t s = 0; s < total; ++s)
    batches.push_back(torch::randint(0, vocab, {a.batch, a.seq}, gen, torch::kInt64));
  // Every position with a next token carries loss weight 1 (the last none).
  for (auto& b : batches) b = b.to(where);
  torch::Tensor weights = torch::ones({a.batch, a.seq}, torch::TensorOptions().device(where));
  weights.narrow(1, a.seq - 1, 1).zero_();
  const double n_loss = static_cast<double>(a.batch * (a.seq - 1));

  ForwardOptions fo;
  fo.training = true;
  at::Generator drop_gen = at::make_generator<at::CPUGeneratorImpl>(a.m.seed + 1);
  fo.generator = &drop_gen;
  fo.checkpoint_layers = a.checkpoint_layers;
  auto step = [&](const torch::Tensor& ids) {
    torch::Tensor targets = torch::zeros_like(ids);
    targets.narrow(1, 0, a.seq - 1).copy_(ids.narrow(1, 1, a.seq - 1));
    torch::Tensor hidden = model.Hidden(ids, nullptr, fo);  // (B, T, C)
    TargetLogProbs t = SelectedLogProbs(model, hidden, targets, weights);
    torch::Tensor loss = -(t.logp * t.weights).sum() / n_loss;
    loss.backward();
    optim.Step(a.lr);
    for (auto& p : params) p.mutable_grad() = torch::Tensor();
    return loss.item<double>();
  };

  std::vector<double> losses;
  for (int64_t s = 0; s < a.warmup; ++s) losses.push_back(step(batches[s]));
  SyncDevice(where);
  auto t0 = Clock::now();
  {
    // --profile: a chrome://tracing file of every op in the timed steps
    // (the profiler's own overhead makes this run's tokens/s meaningless).
#ifdef BURST_BENCH_PROFILE
    std::unique_ptr<torch::autograd::profiler::RecordProfile> prof;
    if (!a.profile.empty()) prof = std::make_unique<torch::autograd::profiler::RecordProfile>(a.profile);
#else
    if (!a.profile.empty())
      throw Error(Code::kUnimplemented, "--profile: this libtorch has no legacy profiler", "profile");
#endif
    for (int64_t s = a.warmup; s < total; ++s) losses.push_back(step(batches[s]));
  }
  SyncDevice(where);
  const double elapsed = Seconds(t0, Clock::now());

  const double tokens = static_cast<double>(a.batch * a.seq * a.steps);
  const double tps = tokens / elapsed;
  const int64_t n_params = Numel(model.BaseWeights()) + Numel(model.LoraWeights());
  const int64_t n_train = Numel(trainable);
  const int64_t n_mm = MatmulParams(model);
  const int64_t n_lora = full ? 0 : Numel(model.LoraWeights());
  // docs/bench.md: full 6 N; LoRA 4 N (forward + input grads) + 6 N_lora.
  const double flops_tok = full ? 6.0 * n_mm : 4.0 * n_mm + 6.0 * n_lora;
  // Attention score and value matmuls: 4 L T (H D) forward per token as
  // computed (the full T x T block, masked), times 3 with the backward.
  const auto& c = model.config;
  const double attn_tok = 12.0 * c.num_hidden_layers * a.seq * c.num_attention_heads * c.head_dim;
  OrderedJson res = {
      {"impl", "burst"},
      {"method", a.method},
      {"tokens_per_s", tps},
      {"step_s", elapsed / static_cast<double>(a.steps)},
      {"peak_rss_mb", Round(PeakRssMb(), 1)},
      {"load_peak_rss_mb", Round(load_rss, 1)},
      {"threads", a.threads},
      {"blas_threads", GetCpuThreads().blas},
      {"blas", BlasCoreName()},
      {"params", n_params},
      {"trainable_params", n_train},
      {"matmul_params", n_mm},
      {"gflops", flops_tok * tps / 1e9},
      {"gflops_incl_attn", (flops_tok + attn_tok) * tps / 1e9},
      {"batch_size", a.batch},
      {"seq_len", a.seq},
      {"checkpoint_layers", a.checkpoint_layers},
      {"steps", a.steps},
      {"warmup", a.warmup},
      {"rank", full ? OrderedJson() : OrderedJson(a.rank)},
      {"alpha", full ? OrderedJson() : OrderedJson(a.alpha)},
      {"targets", full ? OrderedJson() : OrderedJson(a.targets)},
      {"lr", a.lr},
      {"seed", a.m.seed},
      {"first_loss", losses.front()},
      {"last_loss", losses.back()},
      {"load_s", Round(load_s, 3)},
      {"torch", TorchVersion()},
  };
  AddDeviceFields(res, a.m);
  std::printf("%s\n", res.dump().c_str());
  return 0;
}

// ----------------------------------------------------------------------------
// sample

struct SampleArgs {
  ModelArgs m;
  int64_t prompt_len = 32, new_tokens = 64, batch = 1;
  int threads = 1;
};

struct Generated {
  torch::Tensor tokens;  // (B, N)
  double prefill_s = 0, decode_s = 0;
};

// Greedy decoding with the KV cache, as GreedyIds does (Forward with a
// cache, last position only), for a batch of prompts.
Generated Generate(const LlamaModel& model, const torch::Tensor& prompt, int64_t new_tokens) {
  torch::NoGradGuard no_grad;
  ForwardOptions opt;
  opt.last_only = true;
  Generated g;
  std::vector<torch::Tensor> out;
  SyncDevice(model.device);
  auto t0 = Clock::now();
  KVCache cache = model.NewCache(prompt.size(0), prompt.size(1) + new_tokens);
  torch::Tensor logits = model.Forward(prompt, &cache, opt);              // (B, 1, V)
  torch::Tensor next = logits.select(1, 0).argmax(-1, /*keepdim=*/true);  // (B, 1)
  out.push_back(next);
  SyncDevice(model.device);
  auto t1 = Clock::now();
  for (int64_t i = 1; i < new_tokens; ++i) {
    logits = model.Forward(next, &cache, opt);
    next = logits.select(1, 0).argmax(-1, /*keepdim=*/true);
    out.push_back(next);
  }
  SyncDevice(model.device);
  auto t2 = Clock::now();
  g.tokens = torch::cat(out, 1);
  g.prefill_s = Seconds(t0, t1);
  g.decode_s = Seconds(t1, t2);
  return g;
}

int SampleBench(const SampleArgs& a) {
  if (a.prompt_len < 1 || a.new_tokens < 1)
    throw Error(Code::kInvalidArgument, "--prompt-len and --new-tokens must be >= 1", "new-tokens");
  SetThreads(a.threads);
  LlamaModel model = MakeModel(a.m, /*frozen=*/true);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(a.m.seed);
  torch::Tensor prompt =
      torch::randint(0, model.config.vocab_size, {a.batch, a.prompt_len}, gen, torch::kInt64)
          .to(model.device);
  Generate(model, prompt, std::min<int64_t>(4, a.new_tokens));  // warmup, untimed
  Generated g = Generate(model, prompt, a.new_tokens);
  const double total = g.prefill_s + g.decode_s;
  const double n = static_cast<double>(a.batch * a.new_tokens);
  std::vector<int64_t> first;
  for (int64_t i = 0; i < std::min<int64_t>(8, a.new_tokens); ++i)
    first.push_back(g.tokens[0][i].item<int64_t>());
  OrderedJson res = {
      {"impl", "burst"},
      {"method", "sample"},
      {"tokens_per_s", n / total},
      {"sample_tokens_per_s", n / total},
      {"decode_tokens_per_s",
       a.new_tokens > 1 && g.decode_s > 0
           ? OrderedJson(static_cast<double>(a.batch * (a.new_tokens - 1)) / g.decode_s)
           : OrderedJson()},
      {"prefill_s", g.prefill_s},
      {"decode_s", g.decode_s},
      {"prompt_len", a.prompt_len},
      {"new_tokens", a.new_tokens},
      {"batch_size", a.batch},
      {"peak_rss_mb", Round(PeakRssMb(), 1)},
      {"threads", a.threads},
      {"blas_threads", GetCpuThreads().blas},
      {"blas", BlasCoreName()},
      {"params", Numel(model.BaseWeights())},
      {"seed", a.m.seed},
      {"first_tokens", first},
      {"torch", TorchVersion()},
  };
  AddDeviceFields(res, a.m);
  std::printf("%s\n", res.dump().c_str());
  return 0;
}

// ----------------------------------------------------------------------------
// gemm: this machine's float32 GEMM peak reference

// (on CUDA: that GPU's matrix rate in --dtype, the MFU reference)
int GemmBench(int threads, int64_t size, int repeats, const std::string& device, const std::string& dtype) {
  SetThreads(threads);
  torch::NoGradGuard no_grad;
  const torch::Device where = BenchDevice(device);
  const auto type = dtype == "bfloat16" ? torch::kBFloat16 : torch::kFloat32;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(0);
  torch::Tensor x = torch::randn({size, size}, gen).to(where, type);
  torch::Tensor y = torch::randn({size, size}, gen).to(where, type);
  torch::Tensor z = torch::empty({size, size}, x.options());
  for (int i = 0; i < 3; ++i) torch::mm_out(z, x, y);  // warmup
  double best = 1e30, sum = 0;
  for (int i = 0; i < repeats; ++i) {
    SyncDevice(where);
    auto t0 = Clock::now();
    torch::mm_out(z, x, y);
    SyncDevice(where);
    double s = Seconds(t0, Clock::now());
    best = std::min(best, s);
    sum += s;
  }
  const double flop = 2.0 * static_cast<double>(size) * size * size;
  OrderedJson res = {
      {"impl", "burst"},
      {"method", "gemm"},
      {"device", device},
      {"dtype", dtype},
      {"size", size},
      {"threads", threads},
      {"blas_threads", GetCpuThreads().blas},
      {"blas", BlasCoreName()},
      {"repeats", repeats},
      {"best_s", best},
      {"gflops", flop / best / 1e9},
      {"mean_gflops", flop / (sum / repeats) / 1e9},
      {"peak_rss_mb", Round(PeakRssMb(), 1)},
      {"torch", TorchVersion()},
  };
  std::printf("%s\n", res.dump().c_str());
  return 0;
}

// ----------------------------------------------------------------------------
// init: the random preset model as an HF folder (for the peer)

int InitBench(const ModelArgs& m, const std::string& out) {
  if (m.preset.empty()) throw Error(Code::kInvalidArgument, "init needs --preset", "preset");
  if (fs::exists(fs::path(out) / "config.json"))
    throw Error(Code::kAlreadyExists, out + " already holds a model", "out");
  LlamaConfig config = BenchPresetConfig(m.preset, m.vocab);
  LlamaModel model = LlamaModel::Random(config, m.seed);
  fs::create_directories(out);
  SaveModel(model, out);
  OrderedJson res = {{"impl", "burst"},
                     {"method", "init"},
                     {"preset", m.preset},
                     {"vocab", config.vocab_size},
                     {"params", config.NumParameters()},
                     {"out", out}};
  std::printf("%s\n", res.dump().c_str());
  return 0;
}

int Main(int argc, char** argv) {
  CLI::App app{"burst_bench: training/sampling throughput and GEMM peak (docs/bench.md)"};
  app.require_subcommand(1);
  int rc = 0;

  TrainArgs ta;
  auto* train = app.add_subcommand("train", "training tokens/s (LoRA or full), one JSON line");
  AddModelArgs(train, ta.m);
  train->add_option("--method", ta.method)->check(CLI::IsMember({"lora", "full"}))->capture_default_str();
  train->add_option("--rank", ta.rank)->capture_default_str();
  train->add_option("--alpha", ta.alpha)->capture_default_str();
  train->add_option("--targets", ta.targets)->capture_default_str();
  train->add_option("--batch-size", ta.batch)->capture_default_str();
  train->add_option("--seq-len", ta.seq)->capture_default_str();
  train->add_option("--steps", ta.steps, "timed steps")->capture_default_str();
  train->add_option("--warmup", ta.warmup, "untimed steps first")->capture_default_str();
  train->add_option("--threads", ta.threads)->capture_default_str();
  train->add_option("--profile", ta.profile,
                    "write a chrome://tracing op trace of the timed steps to this file");
  train->add_option("--lr", ta.lr)->capture_default_str();
  train->add_flag("--checkpoint-layers", ta.checkpoint_layers,
                  "activation checkpointing: each layer's activations computed again in the backward");
  train->add_option("--seed", ta.m.seed)->capture_default_str();
  train->callback([&] { rc = TrainBench(ta); });

  SampleArgs sa;
  auto* sample = app.add_subcommand("sample", "greedy KV-cache sampling tokens/s, one JSON line");
  AddModelArgs(sample, sa.m);
  sample->add_option("--prompt-len", sa.prompt_len)->capture_default_str();
  sample->add_option("--new-tokens", sa.new_tokens)->capture_default_str();
  sample->add_option("--batch-size", sa.batch)->capture_default_str();
  sample->add_option("--threads", sa.threads)->capture_default_str();
  sample->add_option("--seed", sa.m.seed)->capture_default_str();
  sample->callback([&] { rc = SampleBench(sa); });

  int gemm_threads = 1, repeats = 10;
  int64_t size = 1024;
  std::string gemm_device = "cpu", gemm_dtype = "float32";
  auto* gemm = app.add_subcommand("gemm", "square matmul GFLOP/s (best of --repeats)");
  gemm->add_option("--device", gemm_device)->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  gemm->add_option("--dtype", gemm_dtype)
      ->check(CLI::IsMember({"float32", "bfloat16"}))
      ->capture_default_str();
  gemm->add_option("--threads", gemm_threads)->capture_default_str();
  gemm->add_option("--size", size)->capture_default_str();
  gemm->add_option("--repeats", repeats)->capture_default_str();
  gemm->callback([&] { rc = GemmBench(gemm_threads, size, repeats, gemm_device, gemm_dtype); });
  AddGpuCommands(app, &rc);
  AddBatchesCommand(app, &rc);

  ModelArgs im;
  std::string out;
  auto* init = app.add_subcommand("init", "write a random preset model as an HF folder");
  init->add_option("--preset", im.preset)->required();
  init->add_option("--vocab", im.vocab, "vocabulary when the preset has none")->capture_default_str();
  init->add_option("--seed", im.seed)->capture_default_str();
  init->add_option("--out", out)->required();
  init->callback([&] { rc = InitBench(im, out); });

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (...) {
    Status s = CurrentExceptionToStatus();
    std::fprintf(stderr, "burst_bench: error: %s\n", s.message().c_str());
    return 1;
  }
  return rc;
}

}  // namespace
}  // namespace burst

int main(int argc, char** argv) {
  burst::EnsureCpuEnvironment(argv);  // as the burst binary does for train and sample
  burst::TuneAllocator();             // as the burst binary does: measure the engine as shipped
  return burst::Main(argc, argv);
}
