#include "core/json.h"

#include <climits>
#include <cmath>

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
  } catch (const Json::exception& e) {
    // Not a parse_error: a number too large for a double ("1e400") is
    // out_of_range, which would otherwise escape as a library exception.
    throw Error(Code::kInvalidArgument, where + ": invalid JSON: " + ToValidUtf8(e.what()), where);
  }
}

Result<Json> TryParseJson(std::string_view text, const std::string& where) {
  Json out;
  Status s = Try([&] { out = ParseJson(text, where); });
  if (!s.ok()) return s;
  return out;
}

Json StatusJson(const Status& s) {
  return {{"code", s.reason().empty() ? std::string(CodeName(s.code())) : s.reason()},
          {"message", ToValidUtf8(s.message())},
          {"param", s.param().empty() ? Json() : Json(ToValidUtf8(s.param()))}};
}

Status StatusFromJson(const Json& error, int http_status) {
  const auto text = [&](const char* key) {
    return error.is_object() && error.contains(key) && error[key].is_string() ? error[key].get<std::string>()
                                                                              : "";
  };
  const std::string name = text("code");
  std::string message = text("message");
  if (message.empty()) message = http_status ? "HTTP " + std::to_string(http_status) : "unknown error";
  const std::string param = text("param");
  // The reasons under a code, as ErrorJson sends them.
  if (name == "capacity" || name == "org_cap") return Status(Code::kResourceExhausted, message, param, name);
  if (name == "lease_lost") return Status(Code::kFailedPrecondition, message, param, name);
  if (std::optional<Code> c = CodeFromName(name); c && *c != Code::kOk) return Status(*c, message, param);
  Code code = Code::kInternal;
  if (http_status == 401)
    code = Code::kUnauthenticated;
  else if (http_status == 404)
    code = Code::kNotFound;
  else if (http_status == 409)
    code = Code::kFailedPrecondition;
  else if (http_status == 429)
    code = Code::kResourceExhausted;
  else if (http_status >= 500)
    code = Code::kUnavailable;
  else if (http_status >= 400)
    code = Code::kInvalidArgument;
  return Status(code, message, param);
}

std::string DumpJson(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

std::string JsonPreview(const Json& j, size_t max_chars) {
  std::string s = DumpJson(j);
  if (s.size() <= max_chars) return s;
  size_t cut = max_chars;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
  return s.substr(0, cut) + "...";
}

FieldReader::FieldReader(const Json& obj, std::string prefix) : obj_(obj), prefix_(std::move(prefix)) {
  if (!obj_.is_object()) {
    throw Error(Code::kInvalidArgument,
                (prefix_.empty() ? std::string("value") : prefix_) + " must be a JSON object", prefix_);
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
    throw Error(Code::kInvalidArgument, Path(key) + " must be a number, got " + JsonPreview(*v), Path(key));
  }
  return v->get<double>();
}

long long FieldReader::Int(const std::string& key, long long def) {
  const Json* v = Get(key);
  if (!v) return def;
  // 2^63: converting a double at or beyond it to long long is undefined (the
  // json fuzzer found 2.5e21), and an unsigned above it would wrap negative.
  constexpr double kLimit = 9223372036854775808.0;
  if (v->is_number_unsigned() && v->get<unsigned long long>() <= LLONG_MAX) return v->get<long long>();
  if (v->is_number_integer() && !v->is_number_unsigned()) return v->get<long long>();
  const bool integral =
      v->is_number_unsigned() || (v->is_number_float() && v->get<double>() == std::trunc(v->get<double>()));
  if (v->is_number_float() && integral && v->get<double>() >= -kLimit && v->get<double>() < kLimit) {
    return static_cast<long long>(v->get<double>());
  }
  if (integral) {
    throw Error(Code::kInvalidArgument,
                Path(key) + " must be an integer within 64 bits, got " + JsonPreview(*v), Path(key));
  }
  throw Error(Code::kInvalidArgument, Path(key) + " must be an integer, got " + JsonPreview(*v), Path(key));
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
    throw Error(Code::kInvalidArgument, Path(key) + " must be a string, got " + JsonPreview(*v), Path(key));
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
