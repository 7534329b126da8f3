// One decoder layer of the Llama-shaped families (llama.h): attention (with
// its cache, packed rows, sequences end to end or a decoding step's fused
// kernel) and the MLP (SwiGLU, Gemma's GELU, or a mixture of experts).
//
// Notation: B batch, T new positions, S key positions (cache + new),
// C hidden size, H query heads, KV key/value heads, R = H / KV,
// D head dim, F MLP width.
#include "model/llama_layer.h"

#include <cmath>
#include <limits>

#include "model/cuda_ops.h"
#include "model/decode_attention.h"
#include "model/moe.h"
#include "model/rope.h"
#include "model/small_linear.h"
#include "model/varlen_attention.h"

namespace burst {

namespace {

// HF LlamaRMSNorm: normalise in float32, scale by the weight.
torch::Tensor RmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  torch::Tensor xf = x.to(torch::kFloat32);                  // (B, T, C)
  torch::Tensor var = xf.pow(2).mean(-1, /*keepdim=*/true);  // (B, T, 1)
  return weight * (xf * torch::rsqrt(var + eps)).to(x.scalar_type());
}

// A projection with its LoRA branch: x W^T + b + dropout(x) A^T B^T * scale.
torch::Tensor Project(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias,
                      const LlamaLayer& layer, const char* target, const std::optional<LoraSpec>& spec,
                      const ForwardOptions& opt) {
  // A decoding step's few rows: small_linear.h (no packing of w, each row alone).
  torch::Tensor y = DecodeLinear(x, w, bias);  // (B, T, out)
  if (!spec) return y;
  auto it = layer.lora.find(target);
  if (it == layer.lora.end()) return y;
  torch::Tensor xin = x;  // (B, T, in)
  if (opt.training && spec->dropout > 0.0) {
    torch::Tensor keep = torch::empty_like(x).bernoulli_(1.0 - spec->dropout, *opt.generator);
    xin = x * keep / (1.0 - spec->dropout);
  }
  torch::Tensor low = torch::linear(xin, it->second.a);  // (B, T, r)
  // y + scale * low B^T in one GEMM with accumulation (no separate scale/add passes).
  const int64_t out = y.size(-1), r = low.size(-1);
  return torch::addmm(y.reshape({-1, out}), low.reshape({-1, r}), it->second.b.t(), 1.0,
                      spec->scale())
      .view(y.sizes());  // (B, T, out)
}

// Whether `parts` are still the row blocks of `fused` (FreezeBaseAs): a loader
// or MergeLora that replaced one leaves the fused matrix stale, and then
// the projections run one by one.
bool StillFused(const torch::Tensor& fused, std::initializer_list<const torch::Tensor*> parts) {
  if (!fused.defined()) return false;
  int64_t row = 0;
  for (const torch::Tensor* p : parts) {
    if (!p->is_alias_of(fused) || p->storage_offset() != fused.storage_offset() + row * fused.stride(0))
      return false;
    row += p->size(0);
  }
  return row == fused.size(0);
}

// Two or three projections of the same input through their fused matrix
// (FreezeBaseAs), each with its LoRA branch: the adapters' A matrices
// concatenated read the input once, and a block-diagonal B adds all the
// branches in the GEMM's accumulation. {} when they cannot run fused: some
// of them adapted and some not, LoRA dropout while training (each
// projection draws its own mask), or a base weight that trains.
std::vector<torch::Tensor> FusedProjections(const torch::Tensor& x, const torch::Tensor& fused,
                                            std::initializer_list<const torch::Tensor*> parts,
                                            std::initializer_list<const char*> targets,
                                            const LlamaLayer& layer, const std::optional<LoraSpec>& spec,
                                            const ForwardOptions& opt) {
  if (!StillFused(fused, parts)) return {};
  // A part that trains (a full fine-tune made from a fused model) must get its
  // gradient through its own product, not through the frozen fused matrix.
  for (const torch::Tensor* p : parts)
    if (p->requires_grad()) return {};
  std::vector<torch::Tensor> as, bs;
  if (spec) {
    for (const char* t : targets) {
      auto it = layer.lora.find(t);
      if (it == layer.lora.end()) continue;
      as.push_back(it->second.a);
      bs.push_back(it->second.b);
    }
    if (!as.empty() && (as.size() != targets.size() || (opt.training && spec->dropout > 0.0))) return {};
  }
  torch::Tensor y = torch::linear(x, fused);  // (B, T, sum of outs)
  if (!as.empty()) {
    torch::Tensor low = torch::linear(x, torch::cat(as, 0));  // (B, T, n*r)
    const int64_t out = y.size(-1), r = low.size(-1);
    y = torch::addmm(y.reshape({-1, out}), low.reshape({-1, r}), torch::block_diag(bs).t(), 1.0,
                     spec->scale())
            .view(y.sizes());
  }
  std::vector<int64_t> sizes;
  for (const torch::Tensor* p : parts) sizes.push_back(p->size(0));
  return y.split_with_sizes(sizes, -1);
}

// Qwen 3's and Gemma's q and k norms: over each head's D values (..., heads,
// D); x itself when the model has none.
torch::Tensor HeadNorm(const torch::Tensor& x, const torch::Tensor& weight, const LlamaConfig& c) {
  return c.qk_norm ? Norm(x, weight, c) : x;
}

}  // namespace

// The model's RMSNorm: Gemma's scales by (1 + w), the others' by w.
torch::Tensor Norm(const torch::Tensor& x, const torch::Tensor& weight, const LlamaConfig& c) {
  return RmsNorm(x, c.gemma ? weight + 1.0 : weight, c.rms_norm_eps);
}

torch::Tensor LayerForward(const LlamaModel& m, size_t li, torch::Tensor x, const LayerInputs& lc,
                           KVCache* cache, const ForwardOptions& opt) {
  const LlamaConfig& c = m.config;
  const std::optional<LoraSpec>& lora = m.lora;
  const int64_t h = c.num_attention_heads, kv = c.num_key_value_heads, d = c.head_dim;
  const int64_t r = h / kv;
  const int64_t b = lc.b, t = lc.t, s = lc.s, past = lc.past;
  const bool ragged = lc.ragged, packed = lc.packed, varlen = lc.varlen, varlen_kernel = lc.varlen_kernel;
  const bool fused_decode = lc.fused_decode, sdpa = lc.sdpa, in_place = lc.in_place;
  const bool some_outputs = lc.some_outputs;
  const int64_t nseq = lc.nseq, lmax = lc.lmax;
  const double att_scale = lc.att_scale;
  const std::vector<int64_t>& rows = lc.rows;
  const std::vector<int64_t>& starts = lc.starts;
  const torch::Tensor &cos = lc.cos, &sin = lc.sin, &cos_local = lc.cos_local, &sin_local = lc.sin_local;
  const torch::Tensor &mask = lc.mask, &row_index = lc.row_index, &write_pos = lc.write_pos;
  const torch::Tensor &varlen_slots = lc.varlen_slots, &varlen_back = lc.varlen_back;
  const LlamaLayer& l = m.layers[li];
  const bool local_rope = c.gemma && li < c.sliding_layers.size() && c.sliding_layers[li];
  const torch::Tensor& lcos = local_rope ? cos_local : cos;
  const torch::Tensor& lsin = local_rope ? sin_local : sin;
  // ---- attention block
  torch::Tensor xn = Norm(x, l.input_norm, c);  // (B, T, C)
  torch::Tensor y;                              // (B, T, H*D)
  if (fused_decode) {
    DecodeAttentionInput in;
    in.q = HeadNorm(Project(xn, l.q_proj, l.q_bias, l, "q_proj", lora, opt).view({b, h, d}), l.q_norm, c)
               .view({b, h * d});
    in.k = HeadNorm(Project(xn, l.k_proj, l.k_bias, l, "k_proj", lora, opt).view({b, kv, d}), l.k_norm, c)
               .view({b, kv * d});
    in.v = Project(xn, l.v_proj, l.v_bias, l, "v_proj", lora, opt).view({b, kv * d});
    in.cos = lcos;
    in.sin = lsin;
    in.cache_k = &cache->k[li];
    in.cache_v = &cache->v[li];
    in.rows = &rows;
    in.starts = &starts;
    in.heads = h;
    in.kv_heads = kv;
    in.head_dim = d;
    in.scale = att_scale;
    y = DecodeAttention(in).view({b, 1, h * d});
  } else {
    std::vector<torch::Tensor> qkv = FusedProjections(xn, l.qkv_proj, {&l.q_proj, &l.k_proj, &l.v_proj},
                                                      {"q_proj", "k_proj", "v_proj"}, l, lora, opt);
    if (qkv.empty()) {
      qkv = {Project(xn, l.q_proj, l.q_bias, l, "q_proj", lora, opt),
             Project(xn, l.k_proj, l.k_bias, l, "k_proj", lora, opt),
             Project(xn, l.v_proj, l.v_bias, l, "v_proj", lora, opt)};
    }
    torch::Tensor q = HeadNorm(qkv[0].view({b, t, h, d}), l.q_norm, c).transpose(1, 2);   // (B, H, T, D)
    torch::Tensor k = HeadNorm(qkv[1].view({b, t, kv, d}), l.k_norm, c).transpose(1, 2);  // (B, KV, T, D)
    torch::Tensor v = qkv[2].view({b, t, kv, d}).transpose(1, 2);                         // (B, KV, T, D)
    q = q * lcos + RotateHalf(q) * lsin;                                                  // (B, H, T, D)
    k = k * lcos + RotateHalf(k) * lsin;                                                  // (B, KV, T, D)
    if (ragged) {
      // row i's T new keys go to cache row rows[i], positions lengths[row]..
      using torch::indexing::Slice;
      const auto dtype = cache->k[li].scalar_type();
      const std::vector<at::indexing::TensorIndex> at_rows = {row_index.view({b, 1}), Slice(), write_pos,
                                                              Slice()};
      cache->k[li].index_put_(at_rows, k.transpose(1, 2).to(dtype));
      cache->v[li].index_put_(at_rows, v.transpose(1, 2).to(dtype));
      k = cache->k[li].narrow(2, 0, s);  // (rows, KV, S, D)
      v = cache->v[li].narrow(2, 0, s);
      if (!in_place) {
        k = k.index_select(0, row_index);  // (B, KV, S, D)
        v = v.index_select(0, row_index);
      }
    } else if (cache) {
      cache->k[li].narrow(2, past, t).copy_(k);
      cache->v[li].narrow(2, past, t).copy_(v);
      k = cache->k[li].narrow(2, 0, s);  // (B, KV, S, D)
      v = cache->v[li].narrow(2, 0, s);  // (B, KV, S, D)
    }
    if (varlen_kernel) {
      y = VarlenCausalAttention(q.squeeze(0), k.squeeze(0), v.squeeze(0), opt.seq_lens,
                                att_scale)  // (H, N, D)
              .transpose(0, 1)
              .reshape({b, t, h * d});  // (1, N, H*D)
    } else {
      // Attention's batch, queries and keys: (B, T, S), or per sequence (S, L, L).
      int64_t ab = b, aq = t, ak = s;
      if (varlen) {
        auto to_seqs = [&](const torch::Tensor& x, int64_t heads) {  // (1, heads, N, D)
          return x.squeeze(0)
              .transpose(0, 1)
              .index_select(0, varlen_slots)  // (S*L, heads, D)
              .view({nseq, lmax, heads, d})
              .transpose(1, 2);  // (S, heads, L, D)
        };
        q = to_seqs(q, h);
        k = to_seqs(k, kv);
        v = to_seqs(v, kv);
        ab = nseq;
        aq = ak = lmax;
      }
      if (sdpa) {
        y = Sdpa(q, k, v, /*causal=*/aq > 1, att_scale).transpose(1, 2);  // (B, T, H, D)
      } else {
        // grouped-query attention without copying K/V: query heads h = g*R + j
        // share key head g, so fold the R query heads of a group into rows.
        torch::Tensor qg = q.reshape({ab, kv, r * aq, d});                       // (B, KV, R*T, D)
        torch::Tensor att = torch::matmul(qg, k.transpose(-2, -1)) * att_scale;  // (B, KV, R*T, S)
        if (ragged || packed) {
          att = (att.view({b, kv, r, t, s}) + mask.view({b, 1, 1, t, s})).view({b, kv, r * t, s});
        } else if (mask.defined()) {
          att = (att.view({ab, kv, r, aq, ak}) + mask).view({ab, kv, r * aq, ak});
        }
        att = torch::softmax(att.to(torch::kFloat32), -1).to(q.scalar_type());
        y = torch::matmul(att, v)  // (B, KV, R*T, D)
                .view({ab, h, aq, d})
                .transpose(1, 2);  // (B, T, H, D)
      }
      y = varlen ? y.reshape({nseq * lmax, h * d}).index_select(0, varlen_back).view({b, t, h * d})
                 : y.reshape({b, t, h * d});  // (B, T, H*D)
    }
  }
  if (some_outputs && li + 1 == m.layers.size()) {
    // Past the last attention no position reads another: only the rows
    // asked for go on (dropout masks in Project are drawn for these rows).
    const torch::Tensor at = opt.outputs.to(m.device);
    x = x.reshape({1, b * t, x.size(-1)}).index_select(1, at);  // (1, M, C)
    y = y.reshape({1, b * t, y.size(-1)}).index_select(1, at);  // (1, M, H*D)
  }
  torch::Tensor attn = Project(y, l.o_proj, l.o_bias, l, "o_proj", lora, opt);  // (B, T, C)
  x = x + (c.gemma ? Norm(attn, l.post_norm, c) : attn);  // Gemma norms the attention's output
  // ---- MLP block (SwiGLU, or a mixture of SwiGLU experts: moe.h)
  xn = Norm(x, c.gemma ? l.pre_ff_norm : l.post_norm, c);  // (B, T, C)
  if (l.router.defined()) {
    x = x + SparseMoe(xn, l, c.num_experts_per_tok, c.norm_topk_prob, opt.expert_choices,
                      lora ? lora->scale() : 0.0);
    return x;
  }
  std::vector<torch::Tensor> gu = FusedProjections(xn, l.gate_up_proj, {&l.gate_proj, &l.up_proj},
                                                   {"gate_proj", "up_proj"}, l, lora, opt);
  if (gu.empty()) {
    gu = {Project(xn, l.gate_proj, {}, l, "gate_proj", lora, opt),
          Project(xn, l.up_proj, {}, l, "up_proj", lora, opt)};
  }
  const torch::Tensor& gate = gu[0];  // (B, T, F)
  const torch::Tensor& up = gu[1];    // (B, T, F)
  const torch::Tensor act = c.gemma ? torch::gelu(gate, "tanh") : torch::silu(gate);
  const torch::Tensor mlp = Project(act * up, l.down_proj, {}, l, "down_proj", lora, opt);  // (B, T, C)
  x = x + (c.gemma ? Norm(mlp, l.post_ff_norm, c) : mlp);
  return x;
}

}  // namespace burst
