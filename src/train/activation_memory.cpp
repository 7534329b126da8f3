#include "train/activation_memory.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace burst {

namespace {

int64_t ReadInt(const std::string& path) {
  std::ifstream f(path);
  std::string word;
  if (!(f >> word) || word == "max") return -1;
  try {
    return std::stoll(word);
  } catch (const std::exception&) {
    return -1;
  }
}

std::string Gib(int64_t bytes) {
  std::ostringstream s;
  s.precision(2);
  s << std::fixed << static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0) << " GiB";
  return s.str();
}

}  // namespace

int64_t EstimateActivationBytes(const LlamaConfig& c, int64_t tokens, int64_t longest, bool packed) {
  const int64_t qkv = (c.num_attention_heads + 2 * c.num_key_value_heads) * c.head_dim;
  const int64_t att = c.num_attention_heads * c.head_dim;
  int64_t mlp = 4 * c.intermediate_size;  // gate, up, their product, the activation
  if (c.num_experts > 0)                  // per picked expert, at its width, and the routing
    mlp = c.num_experts_per_tok * (5 * c.moe_intermediate_size + 2 * c.hidden_size) + 2 * c.num_experts;
  // Norms, residuals and the projections' inputs: about 8 hidden-wide rows.
  int64_t per_token = 8 * c.hidden_size + 2 * qkv + 2 * att + mlp;
  // Padded: scores, mask added and softmax, (H, T) each per query.
  if (!packed) per_token += 3 * c.num_attention_heads * longest;
  return 4 * per_token * tokens * c.num_hidden_layers;
}

int64_t AvailableMemoryBytes() {
  int64_t available = -1;
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (meminfo >> key >> kb >> unit) {
    if (key == "MemAvailable:") {
      available = kb * 1024;
      break;
    }
  }
  // cgroup v2: this process's group, its limit less its usage.
  std::ifstream self("/proc/self/cgroup");
  std::string line;
  while (std::getline(self, line)) {
    if (line.rfind("0::", 0) != 0) continue;
    const std::string dir = "/sys/fs/cgroup" + line.substr(3);
    const int64_t max = ReadInt(dir + "/memory.max"), used = ReadInt(dir + "/memory.current");
    if (max > 0 && used >= 0) available = available < 0 ? max - used : std::min(available, max - used);
  }
  return available;
}

CheckpointingChoice ChooseCheckpointing(std::optional<bool> asked, const LlamaConfig& c, int64_t batch,
                                        int64_t longest, bool packed, int64_t available) {
  CheckpointingChoice out;
  const int64_t need = EstimateActivationBytes(c, batch * longest, longest, packed);
  if (asked) {
    out.on = *asked;
    out.why = std::string("activation checkpointing ") + (out.on ? "on" : "off") + " (recipe; about " +
              Gib(need) + " of activations a micro-batch without it)";
    return out;
  }
  if (available < 0) {
    out.why = "activation checkpointing off (free memory unknown; about " + Gib(need) +
              " of activations a micro-batch)";
    return out;
  }
  out.on = need > available / 5 * 4;
  out.why = std::string("activation checkpointing ") + (out.on ? "on" : "off") + ": about " + Gib(need) +
            " of activations a micro-batch, " + Gib(available) + " free";
  return out;
}

}  // namespace burst
