#include "api/result_files.h"

#include <map>
#include <sstream>

#include "core/json.h"

namespace burst {
namespace {

const char kPrefix[] = "file-";
const char kSuffix[] = "-metrics";

std::string Cell(const Json& v) {
  if (!v.is_number()) return "";
  std::ostringstream out;
  out.precision(10);
  out << v.get<double>();
  return out.str();
}

}  // namespace

std::string ResultFileId(const std::string& job_id) {
  return kPrefix + job_id.substr(job_id.find('-') + 1) + kSuffix;
}

std::optional<std::string> ResultFileJob(const std::string& file_id) {
  const size_t p = sizeof kPrefix - 1, s = sizeof kSuffix - 1;
  if (file_id.size() <= p + s || file_id.compare(0, p, kPrefix) != 0 ||
      file_id.compare(file_id.size() - s, s, kSuffix) != 0) {
    return std::nullopt;
  }
  const std::string middle = file_id.substr(p, file_id.size() - p - s);
  for (char c : middle) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) return std::nullopt;
  }
  return "ftjob-" + middle;
}

std::string MetricsCsv(const std::string& metrics_jsonl) {
  struct Row {
    Json train_loss, train_accuracy, valid_loss, valid_accuracy;
  };
  std::map<int64_t, Row> rows;
  std::istringstream in(metrics_jsonl);
  for (std::string line; std::getline(in, line);) {
    Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) continue;
    const int64_t step = j["step"].get<int64_t>();
    const std::string type = j.value("type", "");
    if (type == "train") {
      rows[step].train_loss = j.value("train_loss", Json());
      rows[step].train_accuracy = j.value("train_accuracy", Json());
    } else if (type == "eval") {
      rows[step].valid_loss = j.value("eval_loss", Json());
      rows[step].valid_accuracy = j.value("eval_token_acc", Json());
    }
  }
  std::string csv = "step,train_loss,train_accuracy,valid_loss,valid_mean_token_accuracy\n";
  for (const auto& [step, r] : rows) {
    csv += std::to_string(step) + "," + Cell(r.train_loss) + "," + Cell(r.train_accuracy) + "," +
           Cell(r.valid_loss) + "," + Cell(r.valid_accuracy) + "\n";
  }
  return csv;
}

}  // namespace burst
