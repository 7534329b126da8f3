// multipart/form-data bodies as `POST /v1/files` receives them: the first
// line of the input is the Content-Type value, the rest the body.
// ParseMultipart's parts must view the body itself, in order, and be
// found again by name.
#include <optional>
#include <string>
#include <vector>

#include "api/http/multipart.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using burst::fuzz::Expect;
  const std::string_view input = burst::fuzz::Text(data, size);
  const size_t nl = input.find('\n');
  if (nl == std::string_view::npos) return 0;
  const std::optional<std::string> boundary = burst::http::MultipartBoundary(input.substr(0, nl));
  if (!boundary) return 0;
  // A copy of its own, so ASan sees any read past the body's end.
  const std::string body(input.substr(nl + 1));
  auto result = burst::http::ParseMultipart(body, *boundary, 8);
  if (!result.ok()) {
    Expect(result.status().code() == burst::Code::kInvalidArgument, "refused with another code");
    return 0;
  }
  const std::vector<burst::http::Part>& parts = result.value();
  Expect(parts.size() <= 8, "more parts than allowed");
  const char* last_end = body.data();
  for (const burst::http::Part& p : parts) {
    Expect(p.content.data() >= last_end && p.content.data() + p.content.size() <= body.data() + body.size(),
           "a part's content is not inside the body, in order");
    last_end = p.content.data() + p.content.size();
    const burst::http::Part* found = burst::http::FindPart(parts, p.name);
    Expect(found != nullptr && found->name == p.name, "FindPart misses a part");
  }
  return 0;
}
