// Recipes (files, and the engine's check of a job body): Recipe::Parse on
// parsed JSON. A recipe that parses is written out (ToJson, as a run stores
// recipe.json) and must parse again to the same recipe.
#include <string>

#include "core/json.h"
#include "fuzz_util.h"
#include "train/recipe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace burst;
  Recipe r;
  try {
    r = Recipe::Parse(ParseJson(fuzz::Text(data, size), "recipe.json"), "/runs/fuzz", "recipe.json");
  } catch (const Error&) {
    return 0;
  }
  const std::string written = r.ToJson().dump();
  Recipe again;
  try {
    again = Recipe::Parse(ParseJson(written, "stored"), "/elsewhere", "stored");
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n%s\n", written.c_str(), e.what());
    fuzz::Expect(false, "a stored recipe does not parse again");
  }
  fuzz::Expect(again.ToJson().dump() == written, "a stored recipe parses to another recipe");
  r.TrainingRelevant();
  return 0;
}
