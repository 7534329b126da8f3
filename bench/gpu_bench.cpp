// burst_bench's GPU side: gpu_bench.h says what each part does.
#include "gpu_bench.h"

#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/fs.h"
#include "core/status.h"
#include "model/hf_io.h"
#include "model/llama.h"
#include "train/trainer.h"

namespace burst {

namespace fs = std::filesystem;

torch::Device BenchDevice(const std::string& device) {
  if (device == "cpu") return torch::kCPU;
  if (device == "cuda") {
    if (!torch::cuda::is_available()) {
      throw Error(Code::kFailedPrecondition, "--device cuda: this build or machine has no CUDA", "device");
    }
    return torch::kCUDA;
  }
  throw Error(Code::kInvalidArgument, "--device must be cpu or cuda (got " + device + ")", "device");
}

void SyncDevice(torch::Device device) {
  if (device.is_cuda()) torch::cuda::synchronize();
}

OrderedJson GpuPeakMemory(torch::Device device) {
  if (!device.is_cuda()) return OrderedJson();
  const auto [allocated, reserved] = CudaPeakBytes();
  return OrderedJson{{"peak_mem_allocated_mb", static_cast<double>(allocated) / 1048576.0},
                     {"peak_mem_reserved_mb", static_cast<double>(reserved) / 1048576.0}};
}

namespace {

// ----------------------------------------------------------------------------
// parity

struct ParityArgs {
  std::string model, out;
  int64_t batch = 2, seq = 24, rank = 4;
  uint64_t seed = 0;
};

// What one variant computed, on the CPU.
struct ParityResult {
  torch::Tensor logits;  // base model (no adapter), (B, T, V) float32
  torch::Tensor loss;    // with the adapter: mean NLL of ids[:, 1:]
  NamedTensors grads;    // d loss / d each LoRA weight, PEFT names
};

ParityResult RunVariant(LlamaModel model, const torch::Tensor& ids_cpu) {
  ParityResult r;
  const torch::Tensor ids = ids_cpu.to(model.device);
  {
    torch::NoGradGuard no_grad;
    LlamaModel base = model;  // the same tensors, the adapter switched off
    base.lora.reset();
    base.head_lora.reset();
    r.logits = base.Forward(ids).to(torch::kCPU, torch::kFloat32);
  }
  model.SetTrainable(false);  // the adapters train, the base is frozen
  const int64_t b = ids.size(0), t = ids.size(1);
  torch::Tensor targets = torch::zeros_like(ids);
  targets.narrow(1, 0, t - 1).copy_(ids.narrow(1, 1, t - 1));
  torch::Tensor weights = torch::ones({b, t}, torch::TensorOptions().device(model.device));
  weights.narrow(1, t - 1, 1).zero_();
  torch::Tensor hidden = model.Hidden(ids);
  TargetLogProbs lp = SelectedLogProbs(model, hidden, targets, weights);
  torch::Tensor loss = -(lp.logp * lp.weights).sum() / static_cast<double>(b * (t - 1));
  loss.backward();
  r.loss = loss.detach().to(torch::kCPU).reshape({1});
  for (auto& [name, w] : model.LoraWeights()) {
    if (!w.grad().defined()) throw Error(Code::kInternal, "parity: no gradient reached " + name);
    r.grads.emplace_back(name, w.grad().to(torch::kCPU, torch::kFloat32));
  }
  return r;
}

void SaveVariant(const fs::path& path, const torch::Tensor& ids, const ParityResult& r) {
  NamedTensors out = {{"ids", ids}, {"logits", r.logits}, {"loss", r.loss}};
  for (const auto& [name, g] : r.grads) out.emplace_back("grad." + name, g);
  WriteSafetensors(path, out);
}

// Largest |a - b| over the largest |b|: a difference on the scale of the values.
double RelDiff(const torch::Tensor& a, const torch::Tensor& b) {
  const double scale = std::max(b.abs().max().item<double>(), 1e-30);
  return (a - b).abs().max().item<double>() / scale;
}

OrderedJson Compare(const ParityResult& got, const ParityResult& ref, double logits_bound, double loss_bound,
                    double grad_bound) {
  double grad_rel = 0;
  for (size_t i = 0; i < ref.grads.size(); ++i) {
    grad_rel = std::max(grad_rel, RelDiff(got.grads[i].second, ref.grads[i].second));
  }
  const double logits_rel = RelDiff(got.logits, ref.logits);
  const double loss_rel = RelDiff(got.loss, ref.loss);
  const bool ok = logits_rel <= logits_bound && loss_rel <= loss_bound && grad_rel <= grad_bound;
  return OrderedJson{
      {"logits_max_abs", (got.logits - ref.logits).abs().max().item<double>()},
      {"logits_rel", logits_rel},
      {"loss", got.loss.item<double>()},
      {"loss_rel", loss_rel},
      {"grad_rel", grad_rel},
      {"grads", ref.grads.size()},
      {"bounds", {{"logits_rel", logits_bound}, {"loss_rel", loss_bound}, {"grad_rel", grad_bound}}},
      {"within_bounds", ok}};
}

int Parity(const ParityArgs& a) {
  if (a.seq < 2) throw Error(Code::kInvalidArgument, "--seq-len must be at least 2", "seq-len");
  const torch::Device cuda = BenchDevice("cuda");
  LlamaModel model = LoadModel(a.model);  // float32 on the CPU
  LoraSpec spec;
  spec.rank = a.rank;
  spec.alpha = 2.0 * static_cast<double>(a.rank);
  model.AddLora(spec, a.seed);
  {
    // B is zero after AddLora (no effect, no gradient for A): random B makes
    // every adapter weight's gradient count.
    torch::NoGradGuard no_grad;
    auto gen = at::make_generator<at::CPUGeneratorImpl>(a.seed + 1);
    for (auto& [name, slot] : model.LoraWeightSlots()) {
      if (name.find("lora_B") != std::string::npos) slot->normal_(0.0, 0.05, gen);
    }
  }
  auto gen = at::make_generator<at::CPUGeneratorImpl>(a.seed);
  const torch::Tensor ids = torch::randint(0, model.config.vocab_size, {a.batch, a.seq}, gen, torch::kInt64);
  fs::create_directories(a.out);
  SaveAdapter(model, fs::path(a.out) / "adapter", a.model);

  const ParityResult cpu = RunVariant(model, ids);
  LlamaModel m32 = model;
  m32.To(cuda);
  m32.cuda_bf16 = false;
  const ParityResult fp32 = RunVariant(m32, ids);
  LlamaModel m16 = model;
  m16.To(cuda);
  m16.FreezeBaseAs(torch::kBFloat16);
  m16.cuda_bf16 = true;
  const ParityResult bf16 = RunVariant(m16, ids);
  SaveVariant(fs::path(a.out) / "cpu.safetensors", ids, cpu);
  SaveVariant(fs::path(a.out) / "cuda_fp32.safetensors", ids, fp32);
  SaveVariant(fs::path(a.out) / "cuda_bf16.safetensors", ids, bf16);
  // float32: the parity bound, 1e-5. bfloat16 keeps 8 bits of mantissa (0.4% a
  // rounding) through every product; these bounds are docs/bench.md's.
  OrderedJson res = {{"impl", "burst"},
                     {"method", "parity"},
                     {"model", a.model},
                     {"batch_size", a.batch},
                     {"seq_len", a.seq},
                     {"rank", a.rank},
                     {"cpu_loss", cpu.loss.item<double>()},
                     {"cuda_fp32", Compare(fp32, cpu, 1e-5, 1e-5, 1e-5)},
                     {"cuda_bf16", Compare(bf16, cpu, 3e-2, 1e-2, 5e-2)}};
  std::printf("%s\n", res.dump().c_str());
  return res["cuda_fp32"]["within_bounds"].get<bool>() && res["cuda_bf16"]["within_bounds"].get<bool>() ? 0
                                                                                                        : 1;
}

// ----------------------------------------------------------------------------
// resume

struct ResumeArgs {
  std::string out, device = "cuda";
  int64_t steps = 20, stop_at = 10;
  bool deterministic = false;
};

// A new folder under `parent` (mkdtemp).
std::string MakeTempDirIn(const std::string& parent) {
  std::string tmpl = (fs::path(parent) / "run-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) throw Error(Code::kInternal, "cannot make a folder under " + parent);
  return tmpl;
}

std::string FileBytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw Error(Code::kNotFound, "cannot read " + p.string());
  return std::string(std::istreambuf_iterator<char>(in), {});
}

int Resume(const ResumeArgs& a) {
  BenchDevice(a.device);
  if (a.stop_at < 1 || a.stop_at >= a.steps) {
    throw Error(Code::kInvalidArgument, "--stop-at must be in 1..steps-1", "stop-at");
  }
  // Deterministic kernels where CUDA has a choice (cuBLAS also needs
  // CUBLAS_WORKSPACE_CONFIG=:4096:8 in the environment: gpu-check.sh sets it).
  // warn_only: an op without a deterministic kernel warns (in the log)
  // instead of stopping the run.
  at::globalContext().setDeterministicAlgorithms(a.deterministic, /*warn_only=*/true);
  const fs::path src = BURST_SOURCE_DIR;
  const Json j = {{"model", (src / "models" / "burst-small").string()},
                  {"train_file", (src / "examples" / "support" / "train.jsonl").string()},
                  {"method", "lora"},
                  {"lora", {{"rank", 16}, {"alpha", 32}}},
                  {"learning_rate", 1e-3},
                  {"batch_size", 16},
                  {"max_steps", a.steps},
                  {"max_seq_len", 256},
                  {"checkpoint_every", a.stop_at},
                  {"keep_last", 0},
                  {"seed", 0},
                  {"device", a.device}};
  const Recipe recipe = Recipe::Parse(j, src, "resume bench");
  // Fresh folders each time, so nothing is removed: on the GPU machine a
  // std::filesystem::remove_all here crashed inside pip PyTorch's
  // libtorch.so, which exports its own copy of it (docs/bench.md, "GPU").
  fs::create_directories(a.out);
  const std::string run = MakeTempDirIn(a.out);
  const fs::path whole = fs::path(run) / "whole", split = fs::path(run) / "split";
  std::vector<double> losses, resumed_losses;
  auto collect = [](std::vector<double>* into) {
    return [into](const Json& line) {
      if (line.value("type", "") == "train") into->push_back(line["train_loss"].get<double>());
    };
  };
  TrainOptions o;
  o.on_metrics = collect(&losses);
  const TrainResult r1 = Train(recipe, whole, o);
  TrainOptions first;
  first.stop_after_step = a.stop_at;
  Train(recipe, split, first);
  TrainOptions again;
  again.resume = true;
  again.on_metrics = collect(&resumed_losses);
  const TrainResult r2 = Train(recipe, split, again);
  const std::string adapter = "adapter_model.safetensors";
  const bool exact = FileBytes(r1.sampler_dir / adapter) == FileBytes(r2.sampler_dir / adapter);
  // The resumed run's losses from stop_at+1 on, against the same steps of the whole run.
  double max_loss_diff = 0;
  const size_t skip = static_cast<size_t>(a.stop_at);
  for (size_t i = 0; i < resumed_losses.size() && skip + i < losses.size(); ++i) {
    max_loss_diff = std::max(max_loss_diff, std::abs(resumed_losses[i] - losses[skip + i]));
  }
  OrderedJson res = {{"impl", "burst"},
                     {"method", "resume"},
                     {"device", r1.device},
                     {"deterministic", a.deterministic},
                     {"steps", a.steps},
                     {"stop_at", a.stop_at},
                     {"resumed_from", r2.resumed_from},
                     {"losses", losses},
                     {"resumed_losses", resumed_losses},
                     {"max_loss_diff", max_loss_diff},
                     {"adapter_bit_exact", exact},
                     {"wall_s", r1.wall_s}};
  std::printf("%s\n", res.dump().c_str());
  return 0;
}

}  // namespace

void AddGpuCommands(CLI::App& app, int* rc) {
  static ParityArgs pa;
  auto* parity =
      app.add_subcommand("parity", "CUDA (float32, bfloat16) against CPU: logits, loss, LoRA grads");
  parity->add_option("--model", pa.model, "Hugging Face model folder (float32)")->required();
  parity->add_option("--out", pa.out, "folder for the tensors and the adapter")->required();
  parity->add_option("--batch-size", pa.batch)->capture_default_str();
  parity->add_option("--seq-len", pa.seq)->capture_default_str();
  parity->add_option("--rank", pa.rank)->capture_default_str();
  parity->add_option("--seed", pa.seed)->capture_default_str();
  parity->callback([rc] { *rc = Parity(pa); });

  static ResumeArgs ra;
  auto* resume = app.add_subcommand("resume", "a short LoRA run and its resume: bit-exact or not");
  resume->add_option("--out", ra.out, "folder for the two runs")->required();
  resume->add_option("--device", ra.device)->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  resume->add_option("--steps", ra.steps)->capture_default_str();
  resume->add_option("--stop-at", ra.stop_at)->capture_default_str();
  resume->add_flag("--deterministic", ra.deterministic, "deterministic CUDA kernels");
  resume->callback([rc] { *rc = Resume(ra); });
}

}  // namespace burst
