// Notation: D head dim, B batch, T positions.
#include "model/rope.h"

#include <cmath>
#include <map>
#include <mutex>
#include <string>

namespace burst {
namespace {

// The context a scaled rope was trained for, where transformers finds it:
// the config's own original_max_position_embeddings (Phi 3 style), the
// scaling's, else max_position_embeddings.
double OriginalMaxPositions(const LlamaConfig& c) {
  if (c.raw.contains("original_max_position_embeddings") &&
      c.raw["original_max_position_embeddings"].is_number())
    return c.raw["original_max_position_embeddings"].get<double>();
  const double own = static_cast<double>(c.max_position_embeddings);
  return c.rope_scaling.is_object() ? c.rope_scaling.value("original_max_position_embeddings", own) : own;
}

// Rotary inverse frequencies, with HF's rope_scaling variants.
torch::Tensor ComputeInvFreq(const LlamaConfig& c, torch::Device device) {
  const int64_t d = c.head_dim;
  torch::Tensor inv =
      1.0 / torch::pow(c.rope_theta, torch::arange(0, d, 2, torch::kInt64).to(torch::kFloat32) /
                                         static_cast<double>(d));  // (D/2)
  if (c.rope_scaling.is_object()) {
    const Json& rs = c.rope_scaling;
    std::string type = rs.value("rope_type", rs.value("type", std::string("default")));
    double factor = rs.value("factor", 1.0);
    if (type == "linear") {
      inv = inv / factor;
    } else if (type == "llama3") {
      double low = rs.value("low_freq_factor", 1.0), high = rs.value("high_freq_factor", 4.0);
      double old_len = OriginalMaxPositions(c);
      double low_wavelen = old_len / low, high_wavelen = old_len / high;
      torch::Tensor wavelen = 2 * M_PI / inv;
      torch::Tensor scaled = torch::where(wavelen > low_wavelen, inv / factor, inv);
      torch::Tensor smooth = (old_len / wavelen - low) / (high - low);
      torch::Tensor smoothed = (1 - smooth) * scaled / factor + smooth * scaled;
      torch::Tensor medium = (wavelen >= high_wavelen).logical_and(wavelen <= low_wavelen);
      inv = torch::where(medium, smoothed, scaled);
    } else if (type == "yarn") {
      // YaRN (Qwen's long context): interpolated frequencies below a band of
      // dimensions, the original ones above it, a linear ramp between.
      const double base = c.rope_theta, old_len = OriginalMaxPositions(c);
      auto dim_of = [&](double rotations) {
        return static_cast<double>(d) * std::log(old_len / (rotations * 2 * M_PI)) / (2 * std::log(base));
      };
      double low = dim_of(rs.value("beta_fast", 32.0)), high = dim_of(rs.value("beta_slow", 1.0));
      if (rs.value("truncate", true)) {
        low = std::floor(low);
        high = std::ceil(high);
      }
      low = std::max(low, 0.0);
      high = std::min(high, static_cast<double>(d - 1));
      if (low == high) high += 0.001;
      const torch::Tensor pos_freqs = torch::pow(
          base, torch::arange(0, d, 2, torch::kInt64).to(torch::kFloat32) / static_cast<double>(d));
      const torch::Tensor ramp =
          ((torch::arange(d / 2, torch::kFloat32) - low) / (high - low)).clamp(0, 1);  // (D/2)
      const torch::Tensor extrapolation = 1 - ramp;
      inv = 1.0 / (factor * pos_freqs) * (1 - extrapolation) + 1.0 / pos_freqs * extrapolation;
    }
  }
  return inv.to(device);
}

}  // namespace

double RopeAttentionFactor(const LlamaConfig& c) {
  const Json& rs = c.rope_scaling;
  if (!rs.is_object() || rs.value("rope_type", rs.value("type", std::string())) != "yarn") return 1.0;
  if (rs.contains("attention_factor") && rs["attention_factor"].is_number())
    return rs["attention_factor"].get<double>();
  const double factor = rs.value("factor", 1.0);
  auto mscale = [&](double m) { return factor <= 1 ? 1.0 : 0.1 * m * std::log(factor) + 1.0; };
  const double m = rs.value("mscale", 0.0), all = rs.value("mscale_all_dim", 0.0);
  return m != 0 && all != 0 ? mscale(m) / mscale(all) : mscale(1.0);
}

torch::Tensor InvFreq(const LlamaConfig& c, torch::Device device) {
  static std::mutex mu;
  static std::map<std::string, torch::Tensor> cache;
  const std::string key = std::to_string(c.head_dim) + "|" + Json(c.rope_theta).dump() + "|" +
                          c.rope_scaling.dump() + "|" + Json(OriginalMaxPositions(c)).dump() + "|" +
                          device.str();
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, ComputeInvFreq(c, device)).first;
  return it->second;
}

std::pair<torch::Tensor, torch::Tensor> RowRotary(const LlamaConfig& c, const torch::Tensor& qpos,
                                                  torch::Device device) {
  torch::Tensor freqs = qpos.to(torch::kFloat32).unsqueeze(-1) * InvFreq(c, device);  // (B, T, D/2)
  torch::Tensor emb = torch::cat({freqs, freqs}, -1).unsqueeze(1);                    // (B, 1, T, D)
  const double f = RopeAttentionFactor(c);
  if (f != 1.0) return {emb.cos() * f, emb.sin() * f};
  return {emb.cos(), emb.sin()};
}

torch::Tensor RotateHalf(const torch::Tensor& x) {
  auto halves = x.chunk(2, -1);
  return torch::cat({-halves[1], halves[0]}, -1);
}

}  // namespace burst
