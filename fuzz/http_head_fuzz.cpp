// HTTP/1.1 request heads and chunked bodies as `burst serve` reads them off
// a socket: ParseRequestHead on the bytes, and on a prefix of them as a
// partial read would deliver (the head ends at the first blank line, so a
// prefix that decides must decide the same); then the body after the head
// through ChunkedDecoder, whole and in two pieces, which must agree.
#include <string>

#include "api/http/request_parser.h"
#include "fuzz_util.h"

namespace {

struct Head {
  burst::http::HeadResult result;
  burst::http::Request req;
  size_t consumed = 0;
  burst::http::ParseError err;
};

Head Parse(std::string_view buf) {
  Head h;
  h.result = burst::http::ParseRequestHead(buf, burst::http::HeadLimits{}, &h.req, &h.consumed, &h.err);
  return h;
}

struct Decoded {
  std::string body;
  size_t taken = 0;
  bool done = false, failed = false;
  int status = 0;
};

Decoded Decode(std::string_view in, size_t split) {
  burst::http::ChunkedDecoder d(1 << 16);
  Decoded out;
  out.taken = d.Feed(in.substr(0, split), &out.body);
  if (out.taken == split && !d.done() && !d.failed()) out.taken += d.Feed(in.substr(split), &out.body);
  out.done = d.done();
  out.failed = d.failed();
  if (out.failed) out.status = d.error().status;
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using burst::fuzz::Expect;
  using burst::http::HeadResult;
  const std::string_view buf = burst::fuzz::Text(data, size);
  const Head full = Parse(buf);
  if (full.result == HeadResult::kDone) {
    Expect(full.consumed > 0 && full.consumed <= size, "consumed outside the buffer");
    Expect(full.req.target.size() > 0 && full.req.target[0] == '/', "accepted a target without /");
    Expect(!(full.req.chunked && full.req.content_length >= 0), "both framings accepted");
  }
  const Head part = Parse(buf.substr(0, size / 2));
  if (part.result != HeadResult::kIncomplete) {
    Expect(part.result == full.result, "a prefix decided otherwise than the whole head");
    if (part.result == HeadResult::kDone) {
      Expect(part.consumed == full.consumed, "a prefix found another end of the head");
      Expect(part.req.target == full.req.target && part.req.headers == full.req.headers,
             "a prefix parsed another head");
    } else {
      Expect(part.err.status == full.err.status, "a prefix refused with another status");
    }
  }
  if (full.result == HeadResult::kError) {
    Expect(full.err.status >= 400 && full.err.status < 600, "an error status that is not an error");
  }
  std::string decoded;
  burst::http::DecodePercent(buf, size % 2 == 0, &decoded);

  // The chunked body: whatever follows the head, else the whole input.
  const std::string_view body = full.result == HeadResult::kDone ? buf.substr(full.consumed) : buf;
  const Decoded whole = Decode(body, body.size());
  const Decoded split = Decode(body, body.size() / 3);
  Expect(whole.taken <= body.size(), "the decoder took more than it was given");
  Expect(whole.body.size() <= (1u << 16), "a body over the limit was accepted");
  Expect(whole.done == split.done && whole.failed == split.failed && whole.status == split.status,
         "the decoder's outcome depends on how the bytes arrive");
  Expect(whole.body == split.body && whole.taken == split.taken,
         "the decoded body depends on how the bytes arrive");
  return 0;
}
