#include "core/checkpoint_names.h"

namespace burst {
namespace {

bool IsId(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) return false;
  return true;
}

// A step: a positive decimal, no sign, no leading zero, nothing after it; -1 otherwise.
int64_t StepOf(std::string_view digits) {
  if (digits.empty() || digits.size() > 18 || digits[0] == '0') return -1;
  int64_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

}  // namespace

bool ValidSuffix(std::string_view suffix) {
  if (suffix.empty() || suffix.size() > 64) return false;
  for (char c : suffix) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string SuffixOf(const Json& spec) {
  const Json s = spec.is_object() ? spec.value("suffix", Json()) : Json();
  return s.is_string() ? s.get<std::string>() : std::string();
}

bool SuffixMatches(const CheckpointName& name, const Json& spec) {
  return name.suffix.empty() || name.suffix == SuffixOf(spec);
}

std::string CheckpointModelName(const std::string& job_id, int64_t step, const std::string& suffix) {
  return job_id + (ValidSuffix(suffix) ? ":" + suffix : "") + ":step-" + std::to_string(step);
}

std::string CheckpointId(const std::string& job_id, int64_t step) {
  return "ftckpt-" + job_id.substr(job_id.find('-') + 1) + "-" + std::to_string(step);
}

std::optional<CheckpointName> ParseCheckpointName(std::string_view name) {
  CheckpointName out;
  std::string_view id, digits;
  if (name.substr(0, 6) == "ftjob-") {
    // ID, then an optional SUFFIX, then step-N, separated by ':'.
    const size_t first = name.find(':');
    const size_t last = name.rfind(':');
    if (first == std::string_view::npos) return std::nullopt;
    id = name.substr(6, first - 6);
    if (last != first) {
      const std::string_view suffix = name.substr(first + 1, last - first - 1);
      if (!ValidSuffix(suffix)) return std::nullopt;
      out.suffix = std::string(suffix);
    }
    const std::string_view step = name.substr(last + 1);
    if (step.substr(0, 5) != "step-") return std::nullopt;
    digits = step.substr(5);
  } else if (name.substr(0, 7) == "ftckpt-") {
    const size_t dash = name.rfind('-');
    if (dash < 7) return std::nullopt;
    id = name.substr(7, dash - 7);
    digits = name.substr(dash + 1);
  } else {
    return std::nullopt;
  }
  const int64_t step = StepOf(digits);
  if (!IsId(id) || step <= 0) return std::nullopt;
  out.job_id = "ftjob-" + std::string(id);
  out.step = step;
  return out;
}

}  // namespace burst
