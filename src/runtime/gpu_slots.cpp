#include "runtime/gpu_slots.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <set>
#include <sstream>

#include "core/subprocess.h"

namespace burst {

namespace {

std::string StripBlanks(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

std::vector<std::string> SplitAt(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string part;
  std::istringstream in(s);
  while (std::getline(in, part, sep)) out.push_back(part);
  return out;
}

bool IsIndex(const std::string& s) {
  return !s.empty() && s.size() <= 6 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::string GpuTypeFromName(const std::string& name) {
  // The name's words, lowercase, split at anything but letters and digits.
  std::vector<std::string> words;
  std::string w;
  for (const char raw : name + " ") {
    const auto c = static_cast<unsigned char>(raw);
    if (std::isalnum(c) != 0) {
      w += static_cast<char>(std::tolower(c));
    } else if (!w.empty()) {
      words.push_back(w);
      w.clear();
    }
  }
  static const std::set<std::string> kVendor = {"nvidia", "tesla", "geforce", "quadro"};
  words.erase(
      std::remove_if(words.begin(), words.end(), [](const std::string& x) { return kVendor.count(x); }),
      words.end());
  const auto has = [&](const char* x) { return std::find(words.begin(), words.end(), x) != words.end(); };
  // The families a request names by model alone (memory and form factor
  // left out), and the A100, which Modal names by its memory.
  static const std::set<std::string> kFamilies = {"h100", "h200", "h800", "h20", "b100", "b200", "gb200",
                                                  "a10g", "a10",  "a30",  "a40", "l40s", "l40",  "l4",
                                                  "t4",   "v100", "p100", "a16", "a2",   "gh200"};
  for (const std::string& x : words) {
    if (x == "a100") return has("80gb") ? "a100-80gb" : "a100-40gb";
    if (kFamilies.count(x)) return x;
  }
  std::string type;
  for (const std::string& x : words) {
    if (type.size() + x.size() + 1 > 32) break;
    type += (type.empty() ? "" : "-") + x;
  }
  return type.empty() ? "gpu" : type;
}

Result<std::vector<GpuSlot>> ParseGpuListing(const std::string& text) {
  std::vector<GpuSlot> out;
  int line_no = 0;
  for (const std::string& raw : SplitAt(text, '\n')) {
    ++line_no;
    const std::string line = StripBlanks(raw);
    if (line.empty()) continue;
    const size_t a = line.find(',');
    const size_t b = a == std::string::npos ? a : line.find(',', a + 1);
    const std::string index = StripBlanks(line.substr(0, a));
    if (b == std::string::npos || !IsIndex(index) || StripBlanks(line.substr(b + 1)).empty()) {
      return Status(Code::kInvalidArgument, "nvidia-smi line " + std::to_string(line_no) + ": \"" +
                                                line.substr(0, 120) + "\" is not \"INDEX, UUID, NAME\"");
    }
    GpuSlot g;
    g.index = std::stoll(index);
    g.uuid = StripBlanks(line.substr(a + 1, b - a - 1));
    g.name = StripBlanks(line.substr(b + 1));
    g.type = GpuTypeFromName(g.name);
    out.push_back(std::move(g));
  }
  return out;
}

Result<std::vector<GpuSlot>> DetectGpus() {
  auto r = RunCommand({"nvidia-smi", "--query-gpu=index,uuid,name", "--format=csv,noheader"}, 30'000);
  // No nvidia-smi (or no driver): a machine without GPUs.
  if (!r.ok() || r.value().exit_code != 0) return std::vector<GpuSlot>{};
  auto all = ParseGpuListing(r.value().out);
  if (!all.ok()) return all.status();
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (visible == nullptr) return all;
  std::vector<GpuSlot> kept;
  for (const std::string& raw : SplitAt(visible, ',')) {
    const std::string v = StripBlanks(raw);
    for (const GpuSlot& g : all.value()) {
      const bool match = IsIndex(v) ? g.index == std::stoll(v) : (!v.empty() && g.uuid.rfind(v, 0) == 0);
      if (match) kept.push_back(g);
    }
  }
  return kept;
}

Result<std::vector<GpuSlot>> ChooseGpus(const std::string& flag, const std::vector<GpuSlot>& seen) {
  if (flag == "all") return seen;
  if (flag == "none" || flag.empty()) return std::vector<GpuSlot>{};
  std::vector<GpuSlot> out;
  std::set<int64_t> taken;
  for (const std::string& raw : SplitAt(flag + ",", ',')) {
    const std::string v = StripBlanks(raw);
    auto it = std::find_if(seen.begin(), seen.end(),
                           [&](const GpuSlot& g) { return IsIndex(v) && g.index == std::stoll(v); });
    if (it == seen.end()) {
      return Status(Code::kInvalidArgument,
                    "--gpus: \"" + v.substr(0, 32) + "\" is not a GPU of this machine (it has " +
                        DescribeGpus(seen) + "); give all, none, or indices such as 0,1",
                    "gpus");
    }
    if (!taken.insert(it->index).second) {
      return Status(Code::kInvalidArgument, "--gpus: GPU " + v + " is named twice", "gpus");
    }
    out.push_back(*it);
  }
  return out;
}

std::map<std::string, int64_t> CountByType(const std::vector<GpuSlot>& gpus) {
  std::map<std::string, int64_t> n;
  for (const GpuSlot& g : gpus) ++n[g.type];
  return n;
}

std::string DescribeGpuCounts(const std::map<std::string, int64_t>& counts) {
  std::string s;
  for (const auto& [type, n] : counts) s += (s.empty() ? "" : ", ") + std::to_string(n) + " x " + type;
  return s;
}

std::string DescribeGpus(const std::vector<GpuSlot>& gpus) {
  const std::string s = DescribeGpuCounts(CountByType(gpus));
  return s.empty() ? "no GPUs" : s;
}

std::optional<double> DevicePricePerSecond(const DeviceClaim& claim, double per_slot_second,
                                           const std::map<std::string, double>& per_gpu_second) {
  if (!claim.gpu()) return per_slot_second;
  auto it = per_gpu_second.find(claim.type);
  if (it == per_gpu_second.end()) return std::nullopt;
  return it->second * static_cast<double>(claim.count);
}

}  // namespace burst
