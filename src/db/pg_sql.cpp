#include "db/pg_sql.h"

#include <algorithm>
#include <cctype>

namespace burst {
namespace {

bool IsWordStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsWordChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

bool EqualsNoCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::toupper(static_cast<unsigned char>(x)) == std::toupper(static_cast<unsigned char>(y));
         });
}

// The words at `pos` (after whitespace), matched without case against
// `words`; the position after the last one, or npos.
size_t MatchWords(std::string_view sql, size_t pos, std::initializer_list<std::string_view> words) {
  for (std::string_view w : words) {
    while (pos < sql.size() && std::isspace(static_cast<unsigned char>(sql[pos]))) ++pos;
    size_t end = pos;
    while (end < sql.size() && IsWordChar(sql[end])) ++end;
    if (!EqualsNoCase(sql.substr(pos, end - pos), w)) return std::string_view::npos;
    pos = end;
  }
  return pos;
}

// The end of a quoted run starting at `pos` (sql[pos] == quote), a doubled
// quote being part of it.
size_t QuotedEnd(std::string_view sql, size_t pos, char quote) {
  for (size_t i = pos + 1; i < sql.size(); ++i) {
    if (sql[i] != quote) continue;
    if (i + 1 < sql.size() && sql[i + 1] == quote) {
      ++i;
      continue;
    }
    return i + 1;
  }
  return sql.size();
}

}  // namespace

std::string TranslateForPostgres(std::string_view sql, int* params) {
  std::string out;
  out.reserve(sql.size() + 16);
  int highest = 0;
  size_t i = 0;
  while (i < sql.size()) {
    const char c = sql[i];
    size_t end = i + 1;
    if (c == '\'' || c == '"') {
      end = QuotedEnd(sql, i, c);
    } else if (c == '-' && i + 1 < sql.size() && sql[i + 1] == '-') {
      end = std::min(sql.find('\n', i), sql.size());
    } else if (c == '/' && i + 1 < sql.size() && sql[i + 1] == '*') {
      const size_t close = sql.find("*/", i + 2);
      end = close == std::string_view::npos ? sql.size() : close + 2;
    } else if (c == '$' && (i == 0 || !IsWordChar(sql[i - 1]))) {
      // $tag$ ... $tag$ (tag empty or a word); `$1` is a parameter, copied.
      size_t t = i + 1;
      if (t < sql.size() && IsWordStart(sql[t])) {
        while (t < sql.size() && IsWordChar(sql[t])) ++t;
      }
      if (t < sql.size() && sql[t] == '$') {
        const std::string_view tag = sql.substr(i, t - i + 1);
        const size_t close = sql.find(tag, t + 1);
        end = close == std::string_view::npos ? sql.size() : close + tag.size();
      }
    } else if (c == '?') {
      size_t d = i + 1;
      int n = 0;  // ?N; capped (PostgreSQL refuses numbers beyond 65535 itself)
      for (; d < sql.size() && std::isdigit(static_cast<unsigned char>(sql[d])); ++d) {
        n = std::min(n * 10 + (sql[d] - '0'), 1000000);
      }
      if (d == i + 1) n = highest + 1;
      highest = std::max(highest, n);
      out += '$' + std::to_string(n);
      i = d;
      continue;
    } else if (IsWordStart(c) && (i == 0 || !IsWordChar(sql[i - 1]))) {
      while (end < sql.size() && IsWordChar(sql[end])) ++end;
      const std::string_view word = sql.substr(i, end - i);
      if (EqualsNoCase(word, "INTEGER")) {
        if (size_t after = MatchWords(sql, end, {"PRIMARY", "KEY", "AUTOINCREMENT"});
            after != std::string_view::npos) {
          out += "BIGSERIAL PRIMARY KEY";
          i = after;
        } else {
          out += "BIGINT";
          i = end;
        }
        continue;
      }
      if (EqualsNoCase(word, "REAL")) {
        out += "DOUBLE PRECISION";
        i = end;
        continue;
      }
    }
    out.append(sql.substr(i, end - i));
    i = end;
  }
  *params = highest;
  return out;
}

Code CodeForSqlState(std::string_view s) {
  if (s == "23505") return Code::kAlreadyExists;
  if (s.substr(0, 2) == "23") return Code::kFailedPrecondition;
  if (s == "40001" || s == "40P01" || s == "55P03" || s == "57P01" || s == "57P02" || s == "57P03") {
    return Code::kUnavailable;
  }
  if (s.substr(0, 2) == "08" || s.substr(0, 2) == "53") return Code::kUnavailable;
  if (s == "22021" || s == "22P05") return Code::kInvalidArgument;
  return Code::kInternal;
}

std::string Scrub(std::string text, const std::string& secret) {
  if (secret.empty()) return text;
  for (size_t pos = text.find(secret); pos != std::string::npos; pos = text.find(secret, pos + 3)) {
    text.replace(pos, secret.size(), "***");
  }
  return text;
}

}  // namespace burst
