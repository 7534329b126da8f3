// The Llama decoder, forward pass written out; autograd supplies backward.
// The setup of a forward (positions, rotary tables, masks, the attention
// path) is here; one decoder layer is llama_layer.cpp.
//
// Notation: B batch, T new positions, S key positions (cache + new),
// C hidden size, H query heads, KV key/value heads, R = H / KV,
// D head dim, F MLP width, V vocabulary.
#include "model/llama.h"

#include <cmath>
#include <tuple>

#include "core/status.h"
#include "model/cuda_ops.h"
#include "model/decode_attention.h"
#include "model/layer_recompute.h"
#include "model/llama_layer.h"
#include "model/rope.h"
#include "model/small_linear.h"
#include "model/varlen_attention.h"

namespace burst {

// ----------------------------------------------------------------------------
// weights and their Hugging Face names

std::vector<std::pair<std::string, torch::Tensor*>> LlamaModel::BaseWeightSlots() {
  std::vector<std::pair<std::string, torch::Tensor*>> slots;
  slots.emplace_back("model.embed_tokens.weight", &embed);
  for (size_t i = 0; i < layers.size(); ++i) {
    LlamaLayer& l = layers[i];
    std::string p = "model.layers." + std::to_string(i) + ".";
    slots.emplace_back(p + "input_layernorm.weight", &l.input_norm);
    slots.emplace_back(p + "self_attn.q_proj.weight", &l.q_proj);
    slots.emplace_back(p + "self_attn.k_proj.weight", &l.k_proj);
    slots.emplace_back(p + "self_attn.v_proj.weight", &l.v_proj);
    slots.emplace_back(p + "self_attn.o_proj.weight", &l.o_proj);
    if (config.HasQkvBias()) {
      slots.emplace_back(p + "self_attn.q_proj.bias", &l.q_bias);
      slots.emplace_back(p + "self_attn.k_proj.bias", &l.k_bias);
      slots.emplace_back(p + "self_attn.v_proj.bias", &l.v_bias);
    }
    if (config.attention_bias) slots.emplace_back(p + "self_attn.o_proj.bias", &l.o_bias);
    if (config.qk_norm) {
      slots.emplace_back(p + "self_attn.q_norm.weight", &l.q_norm);
      slots.emplace_back(p + "self_attn.k_norm.weight", &l.k_norm);
    }
    slots.emplace_back(p + "post_attention_layernorm.weight", &l.post_norm);
    if (config.gemma) {
      slots.emplace_back(p + "pre_feedforward_layernorm.weight", &l.pre_ff_norm);
      slots.emplace_back(p + "post_feedforward_layernorm.weight", &l.post_ff_norm);
    }
    const auto layer = static_cast<int64_t>(i);
    if (config.IsMoeLayer(layer)) {
      const auto experts = static_cast<size_t>(config.num_experts);
      l.expert_gate.resize(experts);
      l.expert_up.resize(experts);
      l.expert_down.resize(experts);
      slots.emplace_back(config.ExpertWeightName(layer, -1), &l.router);
      for (int64_t e = 0; e < config.num_experts; ++e) {
        const auto x = static_cast<size_t>(e);
        slots.emplace_back(config.ExpertWeightName(layer, e, "gate"), &l.expert_gate[x]);
        slots.emplace_back(config.ExpertWeightName(layer, e, "up"), &l.expert_up[x]);
        slots.emplace_back(config.ExpertWeightName(layer, e, "down"), &l.expert_down[x]);
      }
      continue;
    }
    slots.emplace_back(p + "mlp.gate_proj.weight", &l.gate_proj);
    slots.emplace_back(p + "mlp.up_proj.weight", &l.up_proj);
    slots.emplace_back(p + "mlp.down_proj.weight", &l.down_proj);
  }
  slots.emplace_back("model.norm.weight", &norm);
  if (!config.tie_word_embeddings) slots.emplace_back("lm_head.weight", &lm_head);
  return slots;
}

torch::Tensor LlamaModel::HeadWeight() const {
  if (!lora || !head_lora) return lm_head;  // (a reference with lora reset: the base head)
  const auto dt = lm_head.scalar_type();    // bfloat16 when the frozen base is (FreezeBaseAs)
  return torch::addmm(lm_head, head_lora->b.to(dt), head_lora->a.to(dt), 1.0, lora->scale());  // (V, C)
}

NamedTensors LlamaModel::BaseWeights() const {
  NamedTensors out;
  for (auto& [name, slot] : const_cast<LlamaModel*>(this)->BaseWeightSlots()) out.emplace_back(name, *slot);
  return out;
}

LlamaModel LlamaModel::Random(const LlamaConfig& config, uint64_t seed, double init_std,
                              const torch::TensorOptions& where) {
  torch::NoGradGuard no_grad;
  LlamaModel m;
  m.config = config;
  m.layers.resize(static_cast<size_t>(config.num_hidden_layers));
  const int64_t c = config.hidden_size, d = config.head_dim, f = config.intermediate_size;
  const int64_t q = config.num_attention_heads * d, kv = config.num_key_value_heads * d;
  const bool on_cpu = where.device().is_cpu();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  if (!on_cpu) torch::manual_seed(seed);  // the device's default generator
  auto normal = [&](std::vector<int64_t> shape) {
    return on_cpu ? torch::empty(shape, where).normal_(0.0, init_std, gen)
                  : torch::empty(shape, where).normal_(0.0, init_std);
  };
  // Norms start as the identity: ones, or Gemma's (1 + w) zeros.
  auto ones = [&](int64_t n) { return config.gemma ? torch::zeros({n}, where) : torch::ones({n}, where); };
  auto zeros = [&](int64_t n) { return torch::zeros({n}, where); };
  m.device = where.device();
  m.embed = normal({config.vocab_size, c});
  for (size_t li = 0; li < m.layers.size(); ++li) {
    LlamaLayer& l = m.layers[li];
    l.input_norm = ones(c);
    l.q_proj = normal({q, c});
    l.k_proj = normal({kv, c});
    l.v_proj = normal({kv, c});
    l.o_proj = normal({c, q});
    if (config.HasQkvBias()) {
      l.q_bias = zeros(q);
      l.k_bias = zeros(kv);
      l.v_bias = zeros(kv);
    }
    if (config.attention_bias) l.o_bias = zeros(c);
    if (config.qk_norm) {
      l.q_norm = ones(d);
      l.k_norm = ones(d);
    }
    l.post_norm = ones(c);
    if (config.gemma) {
      l.pre_ff_norm = ones(c);
      l.post_ff_norm = ones(c);
    }
    if (config.IsMoeLayer(static_cast<int64_t>(li))) {
      const int64_t fm = config.moe_intermediate_size;
      l.router = normal({config.num_experts, c});
      for (int64_t e = 0; e < config.num_experts; ++e) {
        l.expert_gate.push_back(normal({fm, c}));
        l.expert_up.push_back(normal({fm, c}));
        l.expert_down.push_back(normal({c, fm}));
      }
      continue;
    }
    l.gate_proj = normal({f, c});
    l.up_proj = normal({f, c});
    l.down_proj = normal({c, f});
  }
  m.norm = ones(c);
  m.lm_head = config.tie_word_embeddings ? m.embed : normal({config.vocab_size, c});
  return m;
}

void LlamaModel::To(torch::Device target) {
  torch::NoGradGuard no_grad;
  auto move = [&](torch::Tensor& t) {
    if (t.defined()) t = t.to(target, torch::kFloat32).contiguous();
  };
  for (auto& [name, slot] : BaseWeightSlots()) move(*slot);
  for (auto& [name, slot] : LoraWeightSlots()) move(*slot);
  if (config.tie_word_embeddings) lm_head = embed;
  for (auto& l : layers) {  // the moved weights are no longer their blocks
    l.qkv_proj = torch::Tensor();
    l.gate_up_proj = torch::Tensor();
    l.expert_gate_up.clear();
  }
  device = target;
}

void LlamaModel::FreezeBaseAs(torch::ScalarType dtype) {
  torch::NoGradGuard no_grad;
  for (auto& [name, slot] : BaseWeightSlots()) {
    if (slot->defined()) *slot = slot->to(dtype).set_requires_grad(false);
  }
  if (config.tie_word_embeddings) lm_head = embed;
  if (config.HasQkvBias()) return;
  // The projections that read the same input as one matrix each (q, k, v;
  // gate, up), the per-name weights becoming row blocks of it: one GEMM
  // where there were three or two (Hidden, FusedProjections).
  for (auto& l : layers) {
    l.qkv_proj = torch::cat({l.q_proj, l.k_proj, l.v_proj}, 0);
    const int64_t q = l.q_proj.size(0), kv = l.k_proj.size(0);
    l.q_proj = l.qkv_proj.narrow(0, 0, q);
    l.k_proj = l.qkv_proj.narrow(0, q, kv);
    l.v_proj = l.qkv_proj.narrow(0, q + kv, kv);
    if (!l.gate_proj.defined()) {  // a mixture of experts' layer: each expert's gate and up
      l.expert_gate_up.clear();
      for (size_t e = 0; e < l.expert_gate.size(); ++e) {
        l.expert_gate_up.push_back(torch::cat({l.expert_gate[e], l.expert_up[e]}, 0));
        const int64_t fm = l.expert_gate[e].size(0);
        l.expert_gate[e] = l.expert_gate_up[e].narrow(0, 0, fm);
        l.expert_up[e] = l.expert_gate_up[e].narrow(0, fm, fm);
      }
      continue;
    }
    l.gate_up_proj = torch::cat({l.gate_proj, l.up_proj}, 0);
    const int64_t f = l.gate_proj.size(0);
    l.gate_proj = l.gate_up_proj.narrow(0, 0, f);
    l.up_proj = l.gate_up_proj.narrow(0, f, f);
  }
}

void LlamaModel::Unfuse() {
  torch::NoGradGuard no_grad;
  for (auto& l : layers) {
    for (auto [fused, parts] :
         {std::pair{&l.qkv_proj, std::vector<torch::Tensor*>{&l.q_proj, &l.k_proj, &l.v_proj}},
          std::pair{&l.gate_up_proj, std::vector<torch::Tensor*>{&l.gate_proj, &l.up_proj}}}) {
      if (fused->defined()) {
        for (torch::Tensor* p : parts)
          if (p->is_alias_of(*fused)) *p = p->clone(at::MemoryFormat::Contiguous);
      }
      *fused = torch::Tensor();  // freed here, one layer at a time
    }
    for (size_t e = 0; e < l.expert_gate_up.size(); ++e) {
      for (torch::Tensor* p : {&l.expert_gate[e], &l.expert_up[e]})
        if (p->is_alias_of(l.expert_gate_up[e])) *p = p->clone(at::MemoryFormat::Contiguous);
    }
    l.expert_gate_up.clear();
  }
}

void LlamaModel::SetTrainable(bool full) {
  for (auto& [name, slot] : BaseWeightSlots()) slot->set_requires_grad(full);
  if (config.tie_word_embeddings) lm_head = embed;
  for (auto& [name, slot] : LoraWeightSlots()) slot->set_requires_grad(!full);
}

std::vector<torch::Tensor> LlamaModel::TrainableParameters() const {
  std::vector<torch::Tensor> out;
  for (auto& [name, t] : BaseWeights())
    if (t.requires_grad()) out.push_back(t);
  for (auto& [name, t] : LoraWeights())
    if (t.requires_grad()) out.push_back(t);
  return out;
}

KVCache LlamaModel::NewCache(int64_t batch, int64_t capacity) const {
  KVCache cache;
  cache.capacity = capacity;
  auto opts = torch::TensorOptions().device(device).dtype(torch::kFloat32);
  if (device.is_cuda()) {
    // Keys and values as the attention computes them (bfloat16 under
    // autocast), in the (B, KV, capacity, D) layout the GPU's attention reads.
    if (cuda_bf16) opts = opts.dtype(torch::kBFloat16);
    for (size_t i = 0; i < layers.size(); ++i) {
      cache.k.push_back(torch::zeros({batch, config.num_key_value_heads, capacity, config.head_dim}, opts));
      cache.v.push_back(torch::zeros({batch, config.num_key_value_heads, capacity, config.head_dim}, opts));
    }
    return cache;
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    // Keys stored transposed ((B, KV, D, capacity) in memory, seen as
    // (B, KV, capacity, D)): a decoding step's scores then run along the
    // keys (decode_attention.h); the matrix products take either layout.
    cache.k.push_back(
        torch::zeros({batch, config.num_key_value_heads, config.head_dim, capacity}, opts).transpose(2, 3));
    cache.v.push_back(torch::zeros({batch, config.num_key_value_heads, capacity, config.head_dim}, opts));
  }
  return cache;
}

// ----------------------------------------------------------------------------
// forward

torch::Tensor LlamaModel::Forward(const torch::Tensor& ids, KVCache* cache, const ForwardOptions& opt) const {
  torch::Tensor x = Hidden(ids, cache, opt);  // (B, T, C)
  CudaAutocast autocast(device.is_cuda() && cuda_bf16);
  torch::Tensor logits = DecodeLinear(x, lm_head);  // (B, T, V)
  if (lora && head_lora) {                          // + scale x A^T B^T: two thin GEMMs, never the (V, C) sum
    torch::Tensor low = torch::linear(x, head_lora->a);  // (B, T, r)
    const int64_t v = logits.size(-1), r = low.size(-1);
    logits = torch::addmm(logits.reshape({-1, v}), low.reshape({-1, r}), head_lora->b.t(), 1.0,
                          lora->scale())
                 .view(logits.sizes());  // (B, T, V)
  }
  return logits.to(torch::kFloat32);
}

torch::Tensor LlamaModel::Hidden(const torch::Tensor& ids, KVCache* cache, const ForwardOptions& opt) const {
  const auto& c = config;
  const int64_t b = ids.size(0), t = ids.size(1);
  const int64_t d = c.head_dim;
  // A per-row cache: row i of ids continues cache row rows[i] from its own length.
  const bool ragged = cache && !cache->lengths.empty();
  std::vector<int64_t> rows;
  int64_t past = cache ? cache->length : 0;
  if (ragged) {
    const int64_t cache_rows = static_cast<int64_t>(cache->lengths.size());
    if (opt.rows.empty()) {
      for (int64_t i = 0; i < b; ++i) rows.push_back(i);
    } else {
      rows = opt.rows;
    }
    if (static_cast<int64_t>(rows.size()) != b) {
      throw Error(Code::kInternal, "a batched forward names " + std::to_string(rows.size()) +
                                       " cache rows for " + std::to_string(b) + " sequences");
    }
    if (!opt.valid.empty() && static_cast<int64_t>(opt.valid.size()) != b) {
      throw Error(Code::kInternal, "a batched forward gives " + std::to_string(opt.valid.size()) +
                                       " real lengths for " + std::to_string(b) + " sequences");
    }
    for (int64_t n : opt.valid) {
      if (n < 1 || n > t) {
        throw Error(Code::kInternal,
                    "a row's real length " + std::to_string(n) + " is not in 1.." + std::to_string(t));
      }
    }
    past = 0;
    for (int64_t row : rows) {
      if (row < 0 || row >= cache_rows) throw Error(Code::kInternal, "no cache row " + std::to_string(row));
      past = std::max(past, cache->lengths[static_cast<size_t>(row)]);
    }
  }
  const int64_t s = past + t;  // key positions the attention spans (the longest row's, when ragged)
  if (cache && s > cache->capacity) {
    throw Error(Code::kResourceExhausted, "sequence of " + std::to_string(s) +
                                              " tokens exceeds the KV cache of " +
                                              std::to_string(cache->capacity));
  }
  const bool packed = opt.positions.defined() || opt.attn_mask.defined();
  if (packed && (cache || !opt.positions.defined() || !opt.attn_mask.defined() ||
                 opt.positions.sizes() != torch::IntArrayRef({b, t}) ||
                 opt.attn_mask.sizes() != torch::IntArrayRef({b, t, t}))) {
    throw Error(Code::kInternal,
                "a packed forward needs positions (B, T) and attn_mask (B, T, T), and no cache");
  }
  const bool varlen = !opt.seq_lens.empty();
  // On the CPU in float32, packed sequences go to varlen_attention.h (each
  // over its own keys, nothing padded); elsewhere the (S, L) layout below.
  const bool varlen_kernel = varlen && VarlenAttentionApplies(embed);
  int64_t nseq = 0, lmax = 0;
  if (varlen) {
    int64_t sum = 0;
    for (int64_t n : opt.seq_lens) {
      if (n < 1) throw Error(Code::kInternal, "a packed sequence of " + std::to_string(n) + " tokens");
      sum += n;
      lmax = std::max(lmax, n);
    }
    nseq = static_cast<int64_t>(opt.seq_lens.size());
    if (cache || packed || b != 1 || sum != t) {
      throw Error(Code::kInternal, "sequences packed end to end need ids (1, " + std::to_string(sum) +
                                       ") and neither a cache nor an attention mask");
    }
  }
  const bool some_outputs = opt.outputs.defined();
  if (some_outputs &&
      (cache || opt.last_only || opt.outputs.dim() != 1 || opt.outputs.scalar_type() != torch::kInt64)) {
    throw Error(Code::kInternal,
                "ForwardOptions::outputs needs a forward without a cache or last_only, and (M) int64");
  }
  if (c.attention_window > 0) {
    // Within one window a sliding-window layer attends as a full one does.
    const int64_t span = varlen ? lmax : packed ? opt.positions.max().item<int64_t>() + 1 : s;
    if (span > c.attention_window) {
      throw Error(Code::kInvalidArgument,
                  "a sequence of " + std::to_string(span) +
                      " tokens is longer than the model's sliding attention window of " +
                      std::to_string(c.attention_window) +
                      " (config.json sliding_window); Burst runs such models on sequences within one window",
                  "sliding_window");
    }
  }
  if (opt.training && opt.generator == nullptr && lora && lora->dropout > 0) {
    throw Error(Code::kInternal, "training forward needs a generator for LoRA dropout");
  }
  const bool bf16 = device.is_cuda() && cuda_bf16;
  CudaAutocast autocast(bf16);

  // positions and rotary tables; the additive mask: query i (at past+i)
  // sees keys 0..past+i (of its own row, when ragged)
  const auto on_device = torch::TensorOptions().device(device);
  torch::Tensor cos, sin, mask, row_index, write_pos;
  torch::Tensor rot_pos;                    // the positions the tables rotate by (B or 1, T) int64
  torch::Tensor varlen_slots, varlen_back;  // varlen: the (S, L) layout's tokens; each token's slot
  std::vector<int64_t> starts;              // ragged: each row's cached length
  // A decoding step on the CPU (one new token a row): the fused attention
  // of decode_attention.h, each row over its own keys.
  const bool fused_decode = ragged && !packed && !cache->k.empty() && DecodeAttentionApplies(cache->k[0], t);
  if (fused_decode) {
    for (int64_t row : rows) starts.push_back(cache->lengths[static_cast<size_t>(row)]);
    rot_pos = torch::tensor(starts).view({b, 1});
    std::tie(cos, sin) = RowRotary(c, rot_pos, device);  // (B, 1, 1, D)
  } else if (ragged) {
    for (int64_t row : rows) starts.push_back(cache->lengths[static_cast<size_t>(row)]);
    torch::Tensor qpos = torch::tensor(starts).view({b, 1}).to(device) +
                         torch::arange(t, on_device.dtype(torch::kInt64)).view({1, t});  // (B, T)
    rot_pos = qpos;
    std::tie(cos, sin) = RowRotary(c, qpos, device);
    torch::Tensor keys = torch::arange(s, on_device.dtype(torch::kInt64)).view({1, 1, s});  // (1, 1, S)
    mask = torch::zeros({b, t, s}, on_device)
               .masked_fill(keys > qpos.unsqueeze(-1), -std::numeric_limits<float>::infinity());  // (B, T, S)
    row_index = torch::tensor(rows).to(device);                                                   // (B)
    write_pos = qpos;
  } else if (packed) {
    rot_pos = opt.positions.to(device);
    std::tie(cos, sin) = RowRotary(c, rot_pos, device);
    mask = opt.attn_mask.to(device);  // (B, T, T)
  } else if (varlen) {
    // Token n of the row is token i of sequence j: position i, and slot
    // j*L+i of the (S, L) layout attention runs in. The slots past a
    // sequence's end read token 0: as keys they lie after every real query
    // (masked), as queries their outputs are never read back.
    std::vector<int64_t> pos(static_cast<size_t>(t)), slots(static_cast<size_t>(nseq * lmax), 0),
        back(static_cast<size_t>(t));
    int64_t at = 0;
    for (int64_t j = 0; j < nseq; ++j) {
      for (int64_t i = 0; i < opt.seq_lens[static_cast<size_t>(j)]; ++i, ++at) {
        pos[static_cast<size_t>(at)] = i;
        slots[static_cast<size_t>(j * lmax + i)] = at;
        back[static_cast<size_t>(at)] = j * lmax + i;
      }
    }
    rot_pos = torch::tensor(pos).view({1, t}).to(device);
    std::tie(cos, sin) = RowRotary(c, rot_pos, device);  // (1, 1, N, D)
    if (!varlen_kernel) {                                // the kernel reads the packed row as it is
      varlen_slots = torch::tensor(slots).to(device);    // (S*L)
      varlen_back = torch::tensor(back).to(device);      // (N)
      if (lmax > 1) {
        mask =
            torch::full({lmax, lmax}, -std::numeric_limits<float>::infinity(), on_device).triu(1);  // (L, L)
      }
    }
  } else {
    rot_pos = torch::arange(past, s, on_device.dtype(torch::kInt64)).view({1, t});
    torch::Tensor pos = torch::arange(past, s, on_device).to(torch::kFloat32);  // (T)
    torch::Tensor freqs = torch::outer(pos, InvFreq(c, device));                // (T, D/2)
    torch::Tensor emb = torch::cat({freqs, freqs}, -1);                         // (T, D)
    const double f = RopeAttentionFactor(c);
    cos = f != 1.0 ? emb.cos() * f : emb.cos();
    sin = f != 1.0 ? emb.sin() * f : emb.sin();
    if (t > 1) {
      mask =
          torch::full({t, s}, -std::numeric_limits<float>::infinity(), on_device).triu(past + 1);  // (T, S)
    }
  }
  // Gemma's sliding layers rotate with their own base, unscaled.
  torch::Tensor cos_local = cos, sin_local = sin;
  if (c.gemma && !c.sliding_layers.empty()) {
    LlamaConfig local = c;
    local.rope_theta = c.local_rope_theta;
    local.rope_scaling = Json();
    std::tie(cos_local, sin_local) = RowRotary(local, rot_pos, device);
  }
  if (bf16 && !fused_decode) {  // rotate in bfloat16, as Hugging Face does under autocast
    cos = cos.to(torch::kBFloat16);
    sin = sin.to(torch::kBFloat16);
    cos_local = cos_local.to(torch::kBFloat16);
    sin_local = sin_local.to(torch::kBFloat16);
  }
  // On the GPU with libtorch 2.x, the plain cases go to scaled_dot_product_attention
  // (flash or memory-efficient attention): causal over the whole sequence, or
  // one new token a row over every cached key. Packed and per-row masks keep
  // the explicit attention below; so does the CPU, whose kernels Burst tunes.
  const bool sdpa = device.is_cuda() && !ragged && !packed && (past == 0 || t == 1);
  // Every row continues cache rows 0..B-1 of a cache with B rows: its keys
  // are read in place, not gathered.
  bool in_place = ragged && static_cast<int64_t>(cache->lengths.size()) == b;
  for (int64_t i = 0; in_place && i < b; ++i) in_place = rows[static_cast<size_t>(i)] == i;
  // Gemma scales by query_pre_attn_scalar, not the head's width.
  const double att_scale = 1.0 / std::sqrt(c.gemma ? c.query_pre_attn_scalar : static_cast<double>(d));

  torch::Tensor x = torch::embedding(embed, ids);                      // (B, T, C)
  if (c.gemma) x = x * std::sqrt(static_cast<double>(c.hidden_size));  // Gemma's embedding scale
  LayerInputs in;
  in.b = b, in.t = t, in.s = s, in.past = past;
  in.ragged = ragged, in.packed = packed, in.varlen = varlen, in.varlen_kernel = varlen_kernel;
  in.fused_decode = fused_decode, in.sdpa = sdpa, in.in_place = in_place, in.some_outputs = some_outputs;
  in.nseq = nseq, in.lmax = lmax, in.att_scale = att_scale;
  in.rows = rows, in.starts = starts;
  in.cos = cos, in.sin = sin, in.cos_local = cos_local, in.sin_local = sin_local;
  in.mask = mask, in.row_index = row_index, in.write_pos = write_pos;
  in.varlen_slots = varlen_slots, in.varlen_back = varlen_back;
  // Activation checkpointing: each layer keeps only its input, and its
  // backward computes it again (layer_recompute.h). The last layer too:
  // kept, its activations would sit beside the LM head's buffers at the
  // step's peak (0.41x the peak RSS without checkpointing, against 0.32x).
  const bool recompute = opt.checkpoint_layers && cache == nullptr && torch::GradMode::is_enabled();
  for (size_t li = 0; li < layers.size(); ++li)
    x = recompute ? CheckpointedLayer(*this, li, x, in, opt) : LayerForward(*this, li, x, in, cache, opt);
  if (ragged) {
    for (size_t i = 0; i < rows.size(); ++i) {
      cache->lengths[static_cast<size_t>(rows[i])] += opt.valid.empty() ? t : opt.valid[i];
    }
  } else if (cache) {
    cache->length = s;
  }
  if (opt.last_only && ragged && !opt.valid.empty()) {
    std::vector<int64_t> last;
    for (int64_t n : opt.valid) last.push_back(n - 1);
    torch::Tensor at = torch::tensor(last).to(device).view({b, 1, 1}).expand({b, 1, x.size(-1)});
    x = x.gather(1, at);  // (B, 1, C)
  } else if (opt.last_only) {
    x = x.narrow(1, t - 1, 1);  // (B, 1, C)
  }
  return Norm(x, norm, c);  // (B, T, C)
}

torch::Tensor WeightedNllSum(const torch::Tensor& logits, const torch::Tensor& targets,
                             const torch::Tensor& weights) {
  const int64_t v = logits.size(-1);
  torch::Tensor nll = torch::nn::functional::cross_entropy(
      logits.reshape({-1, v}), targets.reshape({-1}),
      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));  // (B*T)
  return (nll * weights.reshape({-1})).sum();
}

}  // namespace burst
