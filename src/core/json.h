// JSON for Burst: nlohmann::json plus strict field readers.
//
// FieldReader reads an object field by field and, at the end, rejects any
// field it was not asked about, naming it with its dotted path ("lora.rnak").
// Wrong types are errors naming the field too. Errors throw burst::Error with
// code kInvalidArgument and param set to the dotted path.
//
// Thread-safety: a FieldReader is used by one thread.
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "core/status.h"

namespace burst {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

// Parses text; errors name `where` (a file path) and the byte offset.
Json ParseJson(const std::string& text, const std::string& where);

class FieldReader {
 public:
  // `prefix` is the dotted path of `obj` itself ("" at the top, "lora" below).
  FieldReader(const Json& obj, std::string prefix);

  bool Has(const std::string& key) const;
  // Each getter returns `def` when the field is absent (or null for Optional*).
  double Number(const std::string& key, double def);
  long long Int(const std::string& key, long long def);
  bool Bool(const std::string& key, bool def);
  std::string String(const std::string& key, const std::string& def);
  // Returns the raw value (marks it as known); null when absent.
  Json Raw(const std::string& key);
  std::string Path(const std::string& key) const;
  // Throws naming the first field that no getter asked for.
  void RejectUnknown() const;

 private:
  const Json* Get(const std::string& key);
  const Json& obj_;
  std::string prefix_;
  std::set<std::string> seen_;
};

}  // namespace burst
