#include "core/json.h"

#include "core/utf8.h"

namespace burst {

std::optional<size_t> JsonDepthExceededAt(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::nullopt;
}

Json ParseJson(std::string_view text, const std::string& where) {
  if (auto at = JsonDepthExceededAt(text)) {
    throw Error(Code::kInvalidArgument,
                where + ": JSON nested deeper than the limit of " + std::to_string(kMaxJsonDepth) +
                    " levels (at byte " + std::to_string(*at) + ")",
                where);
  }
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    // nlohmann's message quotes the bytes it last read, which may be invalid
    // UTF-8: keep the message valid so it can be sent back as JSON.
    throw Error(Code::kInvalidArgument,
                where + ": invalid JSON at byte " + std::to_string(e.byte) + ": " + ToValidUtf8(e.what()),
                where);
  }
}

Result<Json> TryParseJson(std::string_view text, const std::string& where) {
  Json out;
  Status s = Try([&] { out = ParseJson(text, where); });
  if (!s.ok()) return s;
  return out;
}

std::string DumpJson(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

std::string JsonPreview(const Json& j, size_t max_chars) {
  std::string s = DumpJson(j);
  if (s.size() <= max_chars) return s;
  size_t cut = max_chars;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
  return s.substr(0, cut) + "...";
}

FieldReader::FieldReader(const Json& obj, std::string prefix)
    : obj_(obj), prefix_(std::move(prefix)) {
  if (!obj_.is_object()) {
    throw Error(Code::kInvalidArgument,
                (prefix_.empty() ? std::string("value") : prefix_) + " must be a JSON object",
                prefix_);
  }
}

std::string FieldReader::Path(const std::string& key) const {
  return prefix_.empty() ? key : prefix_ + "." + key;
}

bool FieldReader::Has(const std::string& key) const {
  auto it = obj_.find(key);
  return it != obj_.end() && !it->is_null();
}

const Json* FieldReader::Get(const std::string& key) {
  seen_.insert(key);
  auto it = obj_.find(key);
  if (it == obj_.end() || it->is_null()) return nullptr;
  return &*it;
}

double FieldReader::Number(const std::string& key, double def) {
  const Json* v = Get(key);
  if (!v) return def;
  if (!v->is_number()) {
    throw Error(Code::kInvalidArgument, Path(key) + " must be a number, got " + JsonPreview(*v),
                Path(key));
  }
  return v->get<double>();
}

long long FieldReader::Int(const std::string& key, long long def) {
  const Json* v = Get(key);
  if (!v) return def;
  if (!v->is_number_integer() &&
      !(v->is_number_float() && v->get<double>() == static_cast<long long>(v->get<double>()))) {
    throw Error(Code::kInvalidArgument, Path(key) + " must be an integer, got " + JsonPreview(*v),
                Path(key));
  }
  return v->is_number_integer() ? v->get<long long>() : static_cast<long long>(v->get<double>());
}

bool FieldReader::Bool(const std::string& key, bool def) {
  const Json* v = Get(key);
  if (!v) return def;
  if (!v->is_boolean()) {
    throw Error(Code::kInvalidArgument, Path(key) + " must be true or false, got " + JsonPreview(*v),
                Path(key));
  }
  return v->get<bool>();
}

std::string FieldReader::String(const std::string& key, const std::string& def) {
  const Json* v = Get(key);
  if (!v) return def;
  if (!v->is_string()) {
    throw Error(Code::kInvalidArgument, Path(key) + " must be a string, got " + JsonPreview(*v),
                Path(key));
  }
  return v->get<std::string>();
}

Json FieldReader::Raw(const std::string& key) {
  const Json* v = Get(key);
  return v ? *v : Json();
}

void FieldReader::RejectUnknown() const {
  for (auto it = obj_.begin(); it != obj_.end(); ++it) {
    if (!seen_.count(it.key())) {
      throw Error(Code::kInvalidArgument, "unknown field " + Path(it.key()), Path(it.key()));
    }
  }
}

}  // namespace burst
