#include "core/status.h"

#include <new>
#include <stdexcept>

namespace burst {

const char* CodeName(Code code) {
  switch (code) {
    case Code::kOk:
      return "ok";
    case Code::kInvalidArgument:
      return "invalid_argument";
    case Code::kNotFound:
      return "not_found";
    case Code::kAlreadyExists:
      return "already_exists";
    case Code::kFailedPrecondition:
      return "failed_precondition";
    case Code::kDataLoss:
      return "data_loss";
    case Code::kResourceExhausted:
      return "resource_exhausted";
    case Code::kCancelled:
      return "cancelled";
    case Code::kUnavailable:
      return "unavailable";
    case Code::kUnimplemented:
      return "unimplemented";
    case Code::kUnauthenticated:
      return "unauthenticated";
    case Code::kInternal:
      return "internal";
  }
  return "unknown";
}

std::optional<Code> CodeFromName(std::string_view name) {
  for (int c = static_cast<int>(Code::kOk); c <= static_cast<int>(Code::kInternal); ++c) {
    if (name == CodeName(static_cast<Code>(c))) return static_cast<Code>(c);
  }
  return std::nullopt;
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  std::string out = message_;
  if (!param_.empty() && out.find(param_) == std::string::npos) out = param_ + ": " + out;
  return out + " [" + CodeName(code_) + "]";
}

Status CurrentExceptionToStatus() {
  try {
    throw;
  } catch (const Error& e) {
    return e.status();
  } catch (const std::bad_alloc&) {
    return Status(Code::kResourceExhausted, "out of memory");
  } catch (const std::exception& e) {
    // libtorch's c10::Error derives from std::exception; its what() carries a
    // long backtrace after the first line, which users do not need.
    std::string msg = e.what();
    if (auto nl = msg.find("\nException raised from"); nl != std::string::npos) msg.resize(nl);
    return Status(Code::kInternal, msg);
  } catch (...) {
    return Status(Code::kInternal, "unknown exception");
  }
}

}  // namespace burst
