// Status and Result<T>: how errors cross module boundaries in Burst.
//
// Every error is a stable code plus a human message that names the field or
// file:line at fault (docs/design.md, invariant 7). Code decides retry and HTTP
// status; callers never parse the message.
//
// Inside model/ and train/, libtorch throws; those modules throw burst::Error
// too, and one try/catch at the boundary (the CLI, later the worker) turns any
// exception into a Status with ToStatus().
//
// Thread-safety: values; no shared state.
#pragma once

#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace burst {

enum class Code {
  kOk = 0,
  kInvalidArgument,     // bad input: fix the request; retrying does not help
  kNotFound,            // a named file, model or object does not exist
  kAlreadyExists,       // refusing to overwrite (e.g. a run dir without --overwrite)
  kFailedPrecondition,  // state does not allow it (e.g. resume with another recipe)
  kDataLoss,            // corrupt or truncated file or checkpoint
  kResourceExhausted,   // over a limit (sequence length, memory)
  kCancelled,           // interrupted by a signal or a user
  kUnavailable,         // transient: retry with backoff
  kUnimplemented,       // a feature this build does not have
  kUnauthenticated,     // no valid credentials (API key or worker token): fix them, then retry
  kInternal,            // a bug; keep kInternal last (CodeFromName walks kOk..kInternal)
};

// Stable lowercase name of a code ("invalid_argument"), used in JSON errors.
const char* CodeName(Code code);
// The inverse of CodeName, for errors read back from the API.
std::optional<Code> CodeFromName(std::string_view name);

// [[nodiscard]]: a Status that reports failure cannot be dropped by accident;
// a deliberate drop says why with IgnoreError("...").
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message, std::string param = "")
      : code_(code), message_(std::move(message)), param_(std::move(param)) {}
  Status(Code code, std::string message, std::string param, std::string reason)
      : code_(code), message_(std::move(message)), param_(std::move(param)), reason_(std::move(reason)) {}

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // The field or file the error is about ("lora.rank", "data.jsonl:12"); may be empty.
  const std::string& param() const { return param_; }
  // A finer reason under the code that clients act on, sent as the JSON
  // error's code in its place: "capacity" (429: retry later), "org_cap" (429:
  // the organisation's limit, param names it), "lease_lost" (409: the worker
  // must drop the task). Empty for most errors.
  const std::string& reason() const { return reason_; }
  std::string ToString() const;
  // Marks a deliberate drop of this Status; `why` says why failing quietly is
  // right at this call site (it is the documentation, not a log line).
  void IgnoreError(const char* why) const { (void)why; }

 private:
  Code code_ = Code::kOk;
  std::string message_;
  std::string param_;
  std::string reason_;
};

// Thrown inside the engine; carries a Status.
class Error : public std::exception {
 public:
  explicit Error(Status status) : status_(std::move(status)), what_(status_.ToString()) {}
  Error(Code code, std::string message, std::string param = "")
      : Error(Status(code, std::move(message), std::move(param))) {}
  const Status& status() const { return status_; }
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  Status status_;
  std::string what_;
};

// A request field that is wrong: kInvalidArgument, "param: message", param.
[[noreturn]] inline void BadField(const std::string& param, const std::string& message) {
  throw Error(Code::kInvalidArgument, param + ": " + message, param);
}

// Converts the exception currently being handled into a Status. Call only
// inside a catch block.
Status CurrentExceptionToStatus();

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : value_(std::move(status)) {}  // NOLINT
  bool ok() const { return std::holds_alternative<T>(value_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(value_);
  }
  T& value() & { return std::get<T>(value_); }
  T&& value() && { return std::get<T>(std::move(value_)); }
  const T& value() const& { return std::get<T>(value_); }
  // Throws burst::Error when not ok.
  T& ValueOrThrow() & {
    if (!ok()) throw Error(status());
    return value();
  }
  T ValueOrThrow() && {
    if (!ok()) throw Error(status());
    return std::move(*this).value();
  }

 private:
  std::variant<T, Status> value_;
};

// Runs fn(), turning any exception into a Status.
template <typename Fn>
Status Try(Fn&& fn) {
  try {
    fn();
    return Status();
  } catch (...) {
    return CurrentExceptionToStatus();
  }
}

}  // namespace burst
