// Jinja's filters of numbers (jinja_internal.h): int and float with Python's
// parsing of strings, abs, round and sum with Python's arithmetic.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "train/jinja_internal.h"

namespace burst::jinja::internal {
namespace {

std::string StripAscii(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\n\v\f\r");
  return a == std::string::npos ? "" : s.substr(a, s.find_last_not_of(" \t\n\v\f\r") + 1 - a);
}

// Python's int(s, base) for a str: optional sign, base prefix and single
// underscores between digits, whitespace around; nullopt where Python raises.
std::optional<int64_t> ParseInt(const std::string& str, int64_t base, const std::string& what) {
  if (base != 0 && (base < 2 || base > 36)) return std::nullopt;
  const std::string s = StripAscii(str);
  if (s.empty()) return std::nullopt;
  size_t i = s[0] == '+' || s[0] == '-' ? 1 : 0;
  const bool neg = s[0] == '-';
  int64_t b = base;
  bool after_prefix = false;
  if (s.size() > i + 1 && s[i] == '0') {
    const char p = static_cast<char>(s[i + 1] | 0x20);
    const int64_t pb = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
    if (pb && (base == 0 || base == pb)) {
      b = pb;
      i += 2;
      after_prefix = true;
    }
  }
  if (b == 0) {  // decimal, without leading zeros unless all are zeros
    b = 10;
    if (s[i] == '0' && s.find_first_not_of("0_", i) != std::string::npos) return std::nullopt;
  }
  constexpr uint64_t kLimit = uint64_t{1} << 63;
  uint64_t value = 0;
  size_t n = 0;
  for (; i < s.size(); ++i) {
    if (s[i] == '_') {
      if ((n == 0 && !after_prefix) || i + 1 == s.size() || s[i + 1] == '_') return std::nullopt;
      after_prefix = false;
      continue;
    }
    const char c = static_cast<char>(s[i] | 0x20);
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'z' ? c - 'a' + 10 : 99;
    if (d >= b) return std::nullopt;
    if (value > (kLimit - d) / b) Fail(what + ": " + str + " is out of range");
    value = value * b + d;
    ++n;
  }
  if (n == 0) return std::nullopt;
  if (!neg && value == kLimit) Fail(what + ": " + str + " is out of range");
  return neg ? static_cast<int64_t>(0 - value) : static_cast<int64_t>(value);
}

// Python's float(s) for a str: decimal with optional exponent and single
// underscores between digits, or inf, infinity and nan; whitespace around.
std::optional<double> ParseFloat(const std::string& str) {
  const std::string s = StripAscii(str);
  if (s.empty()) return std::nullopt;
  size_t i = s[0] == '+' || s[0] == '-' ? 1 : 0;
  std::string word = s.substr(i);
  for (char& c : word) c = static_cast<char>(c | 0x20);
  if (word == "inf" || word == "infinity" || word == "nan") return std::strtod(s.c_str(), nullptr);
  std::string clean = s.substr(0, i);
  const auto digits = [&] {
    size_t n = 0;
    for (; i < s.size(); ++i) {
      const bool digit = s[i] >= '0' && s[i] <= '9';
      if (!digit && !(s[i] == '_' && n && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '9')) break;
      if (digit) {
        clean += s[i];
        ++n;
      }
    }
    return n;
  };
  size_t n = digits();
  if (i < s.size() && s[i] == '.') {
    clean += s[i++];
    n += digits();
  }
  if (n == 0) return std::nullopt;
  if (i < s.size() && (s[i] | 0x20) == 'e') {
    clean += s[i++];
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) clean += s[i++];
    if (digits() == 0) return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  return std::strtod(clean.c_str(), nullptr);
}

Value TruncToInt(double d, const std::string& what) {
  if (!(d > -9223372036854775809.0 && d < 9223372036854775808.0)) {
    Fail(what + ": " + FloatRepr(d) + " is out of range");
  }
  return Value::Int(static_cast<int64_t>(d));
}

// Python's sum(): numbers, or lists with a list to start from.
Value Add(const Value& x, const Value& y, const std::string& what) {
  if (IsInt(x) && IsInt(y)) {
    int64_t out;
    if (__builtin_add_overflow(x.i(), y.i(), &out)) Fail(what + ": out of range");
    return Value::Int(out);
  }
  if (x.is_number() && y.is_number()) return Value::Float(x.f() + y.f());
  if (x.is_list() && y.is_list()) {
    List l = x.list();
    l.insert(l.end(), y.list().begin(), y.list().end());
    return Value::MakeList(std::move(l));
  }
  Fail(what + ": cannot add " + x.TypeName() + " and " + y.TypeName());
}

}  // namespace

Value IntFilter(const Value& v, const Args& a, const std::string& what) {
  a.Check(what, 2, {"default", "base"});
  Value fallback = a.Has(0, "default") ? a.Get(0, "default") : Value::Int(0);
  const int64_t base = IntArg(a.Get(1, "base"), what, 10);
  switch (v.kind()) {
    case Kind::kUndefined:
      Fail(what + ": the value is undefined");
    case Kind::kBool:
    case Kind::kInt:
      return Value::Int(v.i());
    case Kind::kFloat:
      if (std::isnan(v.f())) return fallback;
      return TruncToInt(v.f(), what);
    case Kind::kString: {
      if (const auto i = ParseInt(v.str(), base, what)) return Value::Int(*i);
      const auto d = ParseFloat(v.str());
      if (!d || !std::isfinite(*d)) return fallback;
      return TruncToInt(*d, what);
    }
    default:
      return fallback;
  }
}

Value FloatFilter(const Value& v, const Args& a, const std::string& what) {
  a.Check(what, 1, {"default"});
  Value fallback = a.Has(0, "default") ? a.Get(0, "default") : Value::Float(0);
  if (v.is_undefined()) Fail(what + ": the value is undefined");
  if (v.is_number()) return Value::Float(v.f());
  if (!v.is_string()) return fallback;
  const auto d = ParseFloat(v.str());
  return d ? Value::Float(*d) : fallback;
}

Value Abs(const Value& v, const Args& a, const std::string& what) {
  a.Check(what, 0, {});
  if (v.kind() == Kind::kFloat) return Value::Float(std::fabs(v.f()));
  if (!IsInt(v)) Fail(what + ": expected a number, got " + v.TypeName());
  if (v.i() == INT64_MIN) Fail(what + ": out of range");
  return Value::Int(std::llabs(v.i()));
}

Value Round(const Value& v, const Args& a, const std::string& what) {
  a.Check(what, 2, {"precision", "method"});
  const int64_t precision = IntArg(a.Get(0, "precision"), what + " precision", 0);
  const Value& m = a.Get(1, "method");
  const std::string method = m.is_undefined() ? "common" : StrArg(m, what);
  if (method != "common" && method != "ceil" && method != "floor") {
    Fail(what + ": method must be common, ceil or floor");
  }
  if (!v.is_number()) Fail(what + ": expected a number, got " + v.TypeName());
  if (method == "common" && IsInt(v)) {  // an int stays an int, rounded half to even
    if (precision >= 0) return Value::Int(v.i());
    if (precision < -18) return Value::Int(0);
    int64_t p = 1;
    for (int64_t k = 0; k < -precision; ++k) p *= 10;
    int64_t q = v.i() / p;
    const int64_t r = v.i() % p, twice = 2 * (r < 0 ? -r : r);  // r has v's sign
    if (twice > p || (twice == p && q % 2 != 0)) q += r < 0 ? -1 : 1;
    int64_t out;
    if (__builtin_mul_overflow(q, p, &out)) Fail(what + ": out of range");
    return Value::Int(out);
  }
  const double x = v.f();
  if (method == "common") {
    if (!std::isfinite(x) || precision > 330) return Value::Float(x);
    if (precision < -308) return Value::Float(std::copysign(0.0, x));
    if (precision < 0) {
      const double p = std::pow(10.0, static_cast<double>(-precision));
      return Value::Float(std::nearbyint(x / p) * p);
    }
    // printf rounds the exact binary value half to even, as Python's round does.
    std::vector<char> buf(700);
    std::snprintf(buf.data(), buf.size(), "%.*f", static_cast<int>(precision), x);
    return Value::Float(std::strtod(buf.data(), nullptr));
  }
  if (!std::isfinite(x)) Fail(what + ": cannot round " + FloatRepr(x));
  // Python's math.ceil and floor give an int, so a zero is never -0.0.
  const double p = std::pow(10.0, static_cast<double>(precision));
  return Value::Float(((method == "ceil" ? std::ceil(x * p) : std::floor(x * p)) + 0.0) / p);
}

Value Sum(const Value& v, const Args& a, const std::string& what) {
  a.Check(what, 2, {"attribute", "start"});
  Value total = a.Has(1, "start") ? a.Get(1, "start") : Value::Int(0);
  if (total.is_string()) Fail(what + ": cannot sum strings (use join)");
  for (const Value& item : Items(v, what)) total = Add(total, GetPath(item, a.Get(0, "attribute")), what);
  return total;
}

}  // namespace burst::jinja::internal
