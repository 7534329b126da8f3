// Request bodies and every JSON file Burst reads: ParseJson (nesting capped),
// then the value walked with FieldReader's getters as request handlers and
// the recipe parser read it, and DumpJson/JsonPreview as error messages use
// them.
#include <string>

#include "core/json.h"
#include "fuzz_util.h"

namespace burst {
namespace {

// Asks every getter about every field, as a handler reading a body of
// unknown shape would, and descends into nested objects and arrays.
void Walk(const Json& j, const std::string& prefix) {
  if (j.is_array()) {
    for (const Json& e : j) Walk(e, prefix + "[]");
    return;
  }
  if (!j.is_object()) return;
  FieldReader f(j, prefix);
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    // Each getter refuses the wrong type with an Error naming the field.
    try {
      f.Number(key, 0);
    } catch (const Error&) {
    }
    try {
      f.Int(key, 0);
    } catch (const Error&) {
    }
    try {
      f.Bool(key, false);
    } catch (const Error&) {
    }
    try {
      f.String(key, "");
    } catch (const Error&) {
    }
    fuzz::Expect(f.Has(key) == !it->is_null(), "Has() disagrees with the value");
    Walk(f.Raw(key), f.Path(key));
  }
  f.RejectUnknown();  // every field was asked about: must not throw
}

}  // namespace
}  // namespace burst

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace burst;
  Json j;
  try {
    j = ParseJson(fuzz::Text(data, size), "body");
  } catch (const Error&) {
    return 0;
  }
  Walk(j, "");
  const std::string dumped = DumpJson(j);
  // What Burst writes back (stored recipes, echoed values) it must read again.
  try {
    ParseJson(dumped, "dumped");
  } catch (const Error&) {
    fuzz::Expect(false, "DumpJson wrote JSON that ParseJson refuses");
  }
  const std::string preview = JsonPreview(j, 40);
  fuzz::Expect(preview.size() <= 43, "JsonPreview longer than asked");
  return 0;
}
