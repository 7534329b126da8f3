// Row helpers shared by the Metadata implementation files (not a public API).
#pragma once

#include <algorithm>
#include <chrono>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/states.h"
#include "core/status.h"
#include "db/db.h"

namespace burst {

inline int64_t NowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A row reader returns the row (T) or, when a row can be unreadable (a
// stored name this binary does not know), Result<T>.
template <typename T>
struct RowOf {
  using type = T;
  static constexpr bool kFallible = false;
};
template <typename T>
struct RowOf<Result<T>> {
  using type = T;
  static constexpr bool kFallible = true;
};
template <typename Read>
using ReadOf = RowOf<std::invoke_result_t<Read&, Stmt&>>;

// Every row of a prepared (and bound) query, each turned into a T by read;
// the first unreadable row's error, if any.
template <typename Read>
auto AllRows(Result<Stmt>& q, Read read) -> Result<std::vector<typename ReadOf<Read>::type>> {
  if (!q.ok()) return q.status();
  std::vector<typename ReadOf<Read>::type> out;
  for (;;) {
    auto row = q.value().Step();
    if (!row.ok()) return row.status();
    if (!row.value()) return out;
    auto r = read(q.value());
    if constexpr (ReadOf<Read>::kFallible) {
      if (!r.ok()) return r.status();
      out.push_back(std::move(r).value());
    } else {
      out.push_back(std::move(r));
    }
  }
}

// Inserts n rows with one statement per kRowsPerInsert of them (a round
// trip each on PostgreSQL, instead of one per row): `head` is "INSERT INTO
// t (a, b, c) VALUES ", `cols` the number of columns, and bind(stmt, p, i)
// binds row i's values as parameters p, p + 1, ... The rows go in in order
// (their AUTOINCREMENT keys too).
inline constexpr size_t kRowsPerInsert = 32;
template <typename BindRow>
Status InsertRows(Db& db, const std::string& head, int cols, size_t n, BindRow bind) {
  for (size_t start = 0; start < n; start += kRowsPerInsert) {
    const size_t rows = std::min(kRowsPerInsert, n - start);
    std::string sql = head;
    for (size_t r = 0; r < rows; ++r) {
      sql += r ? ", (" : "(";
      for (int c = 0; c < cols; ++c) sql += c ? ", ?" : "?";
      sql += ')';
    }
    auto q = db.Prepare(sql);
    if (!q.ok()) return q.status();
    for (size_t r = 0; r < rows; ++r) bind(q.value(), static_cast<int>(r) * cols + 1, start + r);
    if (Status s = q.value().Run(); !s.ok()) return s;
  }
  return Status();
}

// The first row of a query, or `missing` when there is none.
template <typename Read>
auto OneRow(Result<Stmt>& q, Read read, Status missing) -> Result<typename ReadOf<Read>::type> {
  if (!q.ok()) return q.status();
  auto row = q.value().Step();
  if (!row.ok()) return row.status();
  if (!row.value()) return missing;
  return read(q.value());
}

// A stored name read back into *out. A name this binary does not know
// (a newer binary's, or a damaged row) is kDataLoss naming the row and the
// field: the caller must not guess what the row meant.
template <StateEnum E>
Status ReadState(std::string_view stored, const std::string& row, const std::string& field, E* out) {
  auto v = FromString<E>(stored);
  if (!v.ok())
    return Status(Code::kDataLoss, row + " in the database: " + field + ": " + v.status().message(), field);
  *out = v.value();
  return Status();
}

// The name a value is stored under (SQL parameters are std::string).
template <StateEnum E>
std::string Stored(E value) {
  return std::string(ToString(value));
}

}  // namespace burst
