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
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "core/status.h"

namespace burst {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

// Every JSON value Burst reads from outside (request bodies, JSONL lines,
// recipes, model and tokenizer files) nests at most this deep: a deeper
// value is refused before it is built, because copying one recurses once per
// level and a 60,000-level value overflows the stack.
constexpr int kMaxJsonDepth = 64;

// The byte offset at which `text` opens its (max_depth + 1)-th nested array
// or object, or nullopt when it never does. Strings are skipped, so brackets
// inside them do not count. Linear, no allocation.
std::optional<size_t> JsonDepthExceededAt(std::string_view text, int max_depth = kMaxJsonDepth);

// Parses text; errors (kInvalidArgument) name `where` (a file path or
// "body") and the byte offset, and refuse values nested deeper than
// kMaxJsonDepth naming the limit.
Json ParseJson(std::string_view text, const std::string& where);
// The same, as a Result instead of a throw.
Result<Json> TryParseJson(std::string_view text, const std::string& where);

// A Status as the body of a JSON error: {"code", "message", "param"}, where
// code is the reason when there is one ("capacity", "org_cap",
// "lease_lost"), else the code's name; param null when empty; text made
// valid UTF-8. The API wraps it as {"error": ...}; a worker reports a failed
// task or sampling call with it.
Json StatusJson(const Status& s);
// The inverse, for errors read back (a worker's report, an API answer): a
// reason comes back with its code; an unknown or missing code is kInternal
// (kOk never: an error object always means an error). `http_status`, when
// known, decides the code of an object without a usable one.
Status StatusFromJson(const Json& error, int http_status = 0);

// j as compact JSON that never throws: invalid UTF-8 in strings becomes
// U+FFFD (Json::dump throws on it by default).
std::string DumpJson(const Json& j);
// At most `max_chars` of DumpJson(j), with "..." when cut: for echoing a
// client's value in an error message without echoing megabytes.
std::string JsonPreview(const Json& j, size_t max_chars = 80);

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
  // Marks the field as known without reading it (a caller that takes a
  // large value out of the object itself, not as a copy).
  void Allow(const std::string& key) { seen_.insert(key); }
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
