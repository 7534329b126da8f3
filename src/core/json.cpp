#include "core/json.h"

namespace burst {

Json ParseJson(const std::string& text, const std::string& where) {
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    throw Error(Code::kInvalidArgument,
                where + ": invalid JSON at byte " + std::to_string(e.byte) + ": " + e.what(),
                where);
  }
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
    throw Error(Code::kInvalidArgument, Path(key) + " must be a number, got " + v->dump(),
                Path(key));
  }
  return v->get<double>();
}

long long FieldReader::Int(const std::string& key, long long def) {
  const Json* v = Get(key);
  if (!v) return def;
  if (!v->is_number_integer() &&
      !(v->is_number_float() && v->get<double>() == static_cast<long long>(v->get<double>()))) {
    throw Error(Code::kInvalidArgument, Path(key) + " must be an integer, got " + v->dump(),
                Path(key));
  }
  return v->is_number_integer() ? v->get<long long>() : static_cast<long long>(v->get<double>());
}

bool FieldReader::Bool(const std::string& key, bool def) {
  const Json* v = Get(key);
  if (!v) return def;
  if (!v->is_boolean()) {
    throw Error(Code::kInvalidArgument, Path(key) + " must be true or false, got " + v->dump(),
                Path(key));
  }
  return v->get<bool>();
}

std::string FieldReader::String(const std::string& key, const std::string& def) {
  const Json* v = Get(key);
  if (!v) return def;
  if (!v->is_string()) {
    throw Error(Code::kInvalidArgument, Path(key) + " must be a string, got " + v->dump(),
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
