#include "api/models.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <optional>

#include "api/respond.h"
#include "core/fs.h"
#include "model/config.h"

namespace burst {
namespace fs = std::filesystem;
namespace {

template <typename T>
std::string List(const std::vector<T>& v) {
  Json j = v;
  return j.dump();
}

template <typename T>
bool Has(const std::vector<T>& v, const T& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// c[key] when it is an integer, else `def` (config.json fields may be null).
int64_t IntOr(const Json& c, const char* key, int64_t def) {
  auto it = c.find(key);
  return it != c.end() && it->is_number_integer() ? it->get<int64_t>() : def;
}

// When the model's config.json was last written (unix seconds), 0 if unknown.
int64_t CreatedAt(const fs::path& dir) {
  struct stat st {};
  if (::stat((dir / "config.json").c_str(), &st) != 0) return 0;
  return static_cast<int64_t>(st.st_mtime);
}

ModelInfo Entry(const std::string& name, const fs::path& dir, const fs::path& sidecar) {
  ModelInfo m;
  m.id = name;
  m.path = fs::weakly_canonical(dir).string();
  m.created = CreatedAt(dir);
  const fs::path config_path = dir / "config.json";
  Json c = ParseJson(ReadFile(config_path), config_path.string());
  if (!c.is_object())
    throw Error(Code::kInvalidArgument, config_path.string() + ": not a JSON object", config_path.string());
  const Json arch = c.value("architectures", Json());
  if (arch.is_array() && !arch.empty() && arch[0].is_string()) {
    m.architecture = arch[0].get<std::string>();
  } else {
    const Json type = c.value("model_type", Json());
    m.architecture = type.is_string() ? type.get<std::string>() : "unknown";
  }
  m.max_seq_len = IntOr(c, "max_position_embeddings", 2048);
  // A family or field Burst cannot run breaks the entry, named.
  const LlamaConfig config = LlamaConfig::FromJson(c, config_path.string());
  m.parameters = config.NumParameters();
  m.experts = config.num_experts > 0;
  std::error_code ec;
  if (!fs::is_regular_file(sidecar, ec)) return m;
  Json s = ParseJson(ReadFile(sidecar), sidecar.string());
  try {
    FieldReader f(s, "");
    const int64_t cap = f.Int("max_seq_len", m.max_seq_len);
    if (cap < 1 || cap > m.max_seq_len) {
      BadField("max_seq_len", "must be between 1 and the model's max_position_embeddings (" +
                                  std::to_string(m.max_seq_len) + ")");
    }
    m.max_seq_len = cap;
    auto strings = [&](const char* key, std::vector<std::string>& out,
                       const std::vector<std::string>& allowed) {
      Json v = f.Raw(key);
      if (v.is_null()) return;
      if (!v.is_array() || v.empty()) BadField(key, "must be a non-empty list of " + List(allowed));
      out.clear();
      for (const Json& x : v) {
        if (!x.is_string() || !Has(allowed, x.get<std::string>()))
          BadField(key, "must be a list of " + List(allowed));
        out.push_back(x.get<std::string>());
      }
    };
    strings("methods", m.methods, {"supervised", "dpo"});
    strings("losses", m.losses, {"cross_entropy", "dpo"});
    strings("training_types", m.training_types, {"lora", "full"});
    Json ranks = f.Raw("lora_ranks");
    if (!ranks.is_null()) {
      if (!ranks.is_array() || ranks.empty())
        BadField("lora_ranks", "must be a non-empty list of positive integers");
      m.lora_ranks.clear();
      for (const Json& x : ranks) {
        if (!x.is_number_integer() || x.get<int64_t>() < 1)
          BadField("lora_ranks", "must be a list of positive integers");
        m.lora_ranks.push_back(x.get<int64_t>());
      }
    }
    m.serverless = f.Bool("serverless", true);
    for (auto [key, out] : {std::pair{"serverless_max_lora_rank", &m.serverless_max_lora_rank},
                            std::pair{"serverless_max_seq_len", &m.serverless_max_seq_len}}) {
      *out = f.Int(key, 0);
      if (*out < 0) BadField(key, "must be a positive integer (0 or absent: no limit)");
    }
    m.accelerator = f.String("accelerator", "");
    if (!m.accelerator.empty() && m.accelerator != "cpu" && m.accelerator != "cuda")
      BadField("accelerator", "must be cpu or cuda");
    const GpuRequest gpu = ParseGpuRequest(f.Raw("gpu"), "gpu");
    if (gpu.Asks() && m.accelerator == "cpu")
      BadField("gpu", "a model whose work runs on a GPU has accelerator cuda (or none)");
    if (gpu.Asks() || m.accelerator == "cuda") {
      m.accelerator = "cuda";
      m.gpu = GpuRequestJson(gpu.Asks() ? gpu : GpuRequest{{GpuOption{"any", 1}}});
    } else {
      m.accelerator = "cpu";
    }
    m.description = f.String("description", "");
    f.RejectUnknown();
  } catch (const Error& e) {
    throw Error(Code::kInvalidArgument, sidecar.string() + ": " + e.status().message(), sidecar.string());
  }
  return m;
}

// The entry of folder root/name. A broken one comes back with its error (it
// is listed, and refuses work); the other models are not affected.
ModelInfo ListedEntry(const std::string& name, const fs::path& root) {
  try {
    return Entry(name, root / name, root / (name + ".model.json"));
  } catch (const Error& e) {
    ModelInfo broken;
    broken.id = name;
    broken.path = fs::weakly_canonical(root / name).string();
    broken.created = CreatedAt(root / name);
    broken.error = e.status().message();
    return broken;
  }
}

bool IsModel(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / "config.json", ec);
}

// The root that lists `name` (the first root holding it wins), or null.
const fs::path* RootOf(const std::string& name, const std::vector<fs::path>& roots) {
  for (const auto& root : roots)
    if (IsModel(root / name)) return &root;
  return nullptr;
}

bool NamePart(const std::string& s) {
  if (s.empty() || s.size() > 96 || s[0] == '.') return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

}  // namespace

bool IsModelName(const std::string& name) {
  const size_t slash = name.find('/');
  if (slash == std::string::npos) return NamePart(name);
  return NamePart(name.substr(0, slash)) && NamePart(name.substr(slash + 1));
}

std::vector<std::pair<std::string, fs::path>> ModelFolders(const fs::path& root) {
  std::vector<std::pair<std::string, fs::path>> out;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    if (!NamePart(name) || !e.is_directory(ec)) continue;
    if (IsModel(e.path())) {
      out.emplace_back(name, e.path());
      continue;
    }
    std::error_code inner;
    for (const auto& m : fs::directory_iterator(e.path(), inner)) {  // ORG/NAME
      const std::string sub = m.path().filename().string();
      if (NamePart(sub) && IsModel(m.path())) out.emplace_back(name + "/" + sub, m.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

Json ModelInfo::ToJson() const {
  // No server path: callers name models by id, and an error names the
  // model roots as the API's errors do ("models:NAME/config.json").
  if (!error.empty()) {
    return {{"id", id},
            {"object", "model"},
            {"created", created},
            {"owned_by", "burst"},
            {"error", RedactPaths(error)}};
  }
  return {
      {"id", id},
      {"object", "model"},
      {"created", created},
      {"owned_by", "burst"},
      {"architecture", architecture},
      {"parameters", parameters},
      {"max_seq_len", max_seq_len},
      {"methods", methods},
      {"losses", losses},
      {"training_types", training_types},
      {"lora_ranks", lora_ranks},
      {"serverless", serverless},
      {"serverless_max_lora_rank", serverless_max_lora_rank > 0 ? Json(serverless_max_lora_rank) : Json()},
      {"serverless_max_seq_len", serverless_max_seq_len > 0 ? Json(serverless_max_seq_len) : Json()},
      {"accelerator", accelerator},
      {"gpu", gpu},
      {"description", description}};
}

std::vector<ModelInfo> LoadCatalog(const std::vector<fs::path>& roots) {
  std::vector<ModelInfo> out;
  for (const auto& root : roots) {
    std::error_code ec;
    if (!fs::is_directory(root, ec)) continue;
    for (const auto& folder : ModelFolders(root)) {
      const std::string& name = folder.first;
      if (std::any_of(out.begin(), out.end(), [&](const ModelInfo& m) { return m.id == name; })) continue;
      out.push_back(ListedEntry(name, root));
    }
  }
  return out;
}

// Reads only the entry asked for (this runs on every sampling call): by
// name, else the listed folder that is `dir`.
ModelInfo CatalogEntryFor(const fs::path& dir, const std::vector<fs::path>& roots, const std::string& name) {
  std::optional<ModelInfo> found;
  if (IsModelName(name)) {
    if (const fs::path* root = RootOf(name, roots)) found = ListedEntry(name, *root);
  }
  const std::string canon = fs::weakly_canonical(dir).string();
  for (size_t i = 0; !found && i < roots.size(); ++i) {
    for (const auto& [n, path] : ModelFolders(roots[i])) {
      if (fs::weakly_canonical(path).string() == canon && RootOf(n, roots) == &roots[i]) {
        found = ListedEntry(n, roots[i]);
        break;
      }
    }
  }
  if (!found) return Entry(dir.filename().string(), dir, fs::path());
  if (!found->error.empty()) {
    throw Error(Code::kInvalidArgument, "model: " + found->id + "'s catalog entry is broken: " + found->error,
                "model");
  }
  return *found;
}

void CheckTrainingAgainstCatalog(const ModelInfo& m, const std::string& method_type,
                                 const std::string& training_type, const std::string& loss, int64_t lora_rank,
                                 int64_t max_seq_len) {
  const std::string of = " for model " + m.id;
  if (!Has(m.methods, method_type))
    BadField("method.type", "\"" + method_type + "\" is not allowed" + of + "; allowed: " + List(m.methods));
  if (!Has(m.training_types, training_type)) {
    BadField("recipe.method",
             "\"" + training_type + "\" is not allowed" + of + "; allowed: " + List(m.training_types));
  }
  if (!Has(m.losses, loss))
    BadField("recipe.loss", "\"" + loss + "\" is not allowed" + of + "; allowed: " + List(m.losses));
  if (training_type == "lora" && !Has(m.lora_ranks, lora_rank)) {
    BadField("recipe.lora.rank",
             std::to_string(lora_rank) + " is not allowed" + of + "; allowed: " + List(m.lora_ranks));
  }
  if (max_seq_len > m.max_seq_len) {
    BadField("recipe.max_seq_len", std::to_string(max_seq_len) + " is over the limit" + of +
                                       "; allowed: 1 to " + std::to_string(m.max_seq_len));
  }
}

void CheckDeviceAgainstCatalog(const ModelInfo& m, bool asks_gpu) {
  if (m.accelerator == "cuda" && !asks_gpu) {
    BadField("gpu", "model " + m.id + " runs on a GPU (its catalog entry asks for " + m.gpu.dump() +
                        "); ask for one with \"gpu\"");
  }
}

Result<std::vector<DeviceClaim>> CallDevicesFor(const fs::path& dir, const std::string& name,
                                                const std::vector<fs::path>& roots, const SlotPool& pool) {
  try {
    const ModelInfo m = CatalogEntryFor(dir, roots, name);
    if (m.gpu.is_null()) return std::vector<DeviceClaim>{};
    try {
      return ResolveGpuRequest(ParseGpuRequest(m.gpu, "gpu"), pool, 1, "gpu");
    } catch (const Error& e) {
      return Status(Code::kInvalidArgument,
                    "model " + m.id + " runs on a GPU (its catalog entry asks for " + m.gpu.dump() +
                        "), which this server cannot give: " + e.status().message(),
                    "model");
    }
  } catch (const Error& e) {
    return e.status();
  }
}

std::optional<BillingScope> AskedScope(const std::string& asked) {
  if (asked.empty()) return std::nullopt;
  auto scope = FromString<BillingScope>(asked);
  if (!scope.ok()) BadField("scope", "must be \"serverless\" or \"dedicated\" (got \"" + asked + "\")");
  return scope.value();
}

ScopeChoice ChooseScope(std::optional<BillingScope> asked, const ModelInfo& m,
                        const std::string& training_type, int64_t lora_rank, int64_t max_seq_len,
                        const std::string& param) {
  std::string why_not;
  if (!m.serverless)
    why_not = "model " + m.id + " is not eligible for serverless scope (its catalog entry)";
  else if (training_type == "full")
    why_not = "full fine-tunes run in dedicated scope only (serverless is LoRA)";
  else if (m.serverless_max_lora_rank > 0 && lora_rank > m.serverless_max_lora_rank)
    why_not = "LoRA rank " + std::to_string(lora_rank) + " is over model " + m.id + "'s serverless limit (" +
              std::to_string(m.serverless_max_lora_rank) + ")";
  else if (m.serverless_max_seq_len > 0 && max_seq_len > m.serverless_max_seq_len)
    why_not = "max_seq_len " + std::to_string(max_seq_len) + " is over model " + m.id +
              "'s serverless limit (" + std::to_string(m.serverless_max_seq_len) + ")";
  if (asked == BillingScope::kServerless && !why_not.empty()) {
    throw Error(Code::kInvalidArgument, param + ": serverless is not available: " + why_not, param);
  }
  if (asked) return {*asked, "asked for"};
  if (why_not.empty())
    return {BillingScope::kServerless, "picked: the configuration is eligible for serverless scope"};
  return {BillingScope::kDedicated, "picked: " + why_not};
}

}  // namespace burst
