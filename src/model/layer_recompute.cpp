#include "model/layer_recompute.h"

#include <atomic>
#include <mutex>

#include "model/cuda_ops.h"
#include "model/small_linear.h"

namespace burst {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

std::atomic<int64_t> checkpointed_layers{0};

// What the backward needs to run the layer again.
struct Recompute : torch::CustomClassHolder {
  const LlamaModel* model = nullptr;
  size_t layer = 0;
  LayerInputs in;
  ForwardOptions opt;       // expert_choices cleared: the recomputation records nothing
  torch::Tensor rng_state;  // opt.generator's state before the layer, when it has one
};

torch::Tensor GeneratorState(torch::Generator* gen) {
  std::lock_guard<std::mutex> lock(gen->mutex());
  return gen->get_state();
}

void SetGeneratorState(torch::Generator* gen, const torch::Tensor& state) {
  std::lock_guard<std::mutex> lock(gen->mutex());
  gen->set_state(state);
}

// While alive, `gen` (if any) draws from `state`; after, from where it was.
class GeneratorReplay {
 public:
  GeneratorReplay(torch::Generator* gen, const torch::Tensor& state)
      : gen_(gen), now_(gen != nullptr ? GeneratorState(gen) : torch::Tensor()) {
    if (gen_ != nullptr) SetGeneratorState(gen_, state);
  }
  ~GeneratorReplay() {
    if (gen_ != nullptr) SetGeneratorState(gen_, now_);
  }
  GeneratorReplay(const GeneratorReplay&) = delete;
  GeneratorReplay& operator=(const GeneratorReplay&) = delete;

 private:
  torch::Generator* gen_;
  torch::Tensor now_;
};

class LayerFn : public torch::autograd::Function<LayerFn> {
 public:
  // x (B, T, C); anchor: a tensor that requires grad, so that the backward
  // runs for a layer whose input needs none (a LoRA's first layer).
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& /*anchor*/,
                               const c10::intrusive_ptr<Recompute>& r, const ForwardOptions& opt) {
    ctx->save_for_backward({x});
    ctx->saved_data["recompute"] = c10::IValue::make_capsule(r);
    const AutogradKernelsGuard same_kernels;  // as the recomputation will
    return LayerForward(*r->model, r->layer, x, r->in, nullptr, opt);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto r = c10::static_intrusive_pointer_cast<Recompute>(ctx->saved_data["recompute"].toCapsule());
    const torch::Tensor xd = ctx->get_saved_variables()[0].detach().requires_grad_(ctx->needs_input_grad(0));
    torch::Tensor y;
    {
      // As the forward ran: under autograd, and on the GPU under the same
      // autocast (thread-local, and the backward may run on another thread).
      torch::AutoGradMode grad_on(true);
      CudaAutocast autocast(r->model->device.is_cuda() && r->model->cuda_bf16);
      const GeneratorReplay replay(r->opt.generator, r->rng_state);
      y = LayerForward(*r->model, r->layer, xd, r->in, nullptr, r->opt);
    }
    // Into the parameters' .grad, as the backward without checkpointing
    // puts them there; the input's gradient goes on down the graph.
    if (y.requires_grad()) torch::autograd::backward({y}, {grads[0]});
    return {xd.requires_grad() ? xd.grad() : torch::Tensor(), torch::Tensor(), torch::Tensor(),
            torch::Tensor()};
  }
};

}  // namespace

torch::Tensor CheckpointedLayer(const LlamaModel& m, size_t li, const torch::Tensor& x, const LayerInputs& in,
                                const ForwardOptions& opt) {
  checkpointed_layers.fetch_add(1, std::memory_order_relaxed);
  auto r = c10::make_intrusive<Recompute>();
  r->model = &m;
  r->layer = li;
  r->in = in;
  r->opt = opt;
  r->opt.expert_choices = nullptr;
  if (opt.generator != nullptr) r->rng_state = GeneratorState(opt.generator);
  const torch::Tensor anchor =
      torch::empty({0}, torch::TensorOptions().device(x.device()).requires_grad(true));
  return LayerFn::apply(x, anchor, r, opt);
}

int64_t CheckpointedLayerCount() { return checkpointed_layers.load(std::memory_order_relaxed); }

}  // namespace burst
