// Row helpers shared by the Metadata implementation files (not a public API).
#pragma once

#include <chrono>
#include <vector>

#include "core/status.h"
#include "db/sqlite.h"

namespace burst {

inline int64_t NowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Every row of a prepared (and bound) query, each turned into a T by read.
template <typename Read>
auto AllRows(Result<Stmt>& q, Read read) -> Result<std::vector<decltype(read(q.value()))>> {
  if (!q.ok()) return q.status();
  std::vector<decltype(read(q.value()))> out;
  for (;;) {
    auto row = q.value().Step();
    if (!row.ok()) return row.status();
    if (!row.value()) return out;
    out.push_back(read(q.value()));
  }
}

// The first row of a query, or `missing` when there is none.
template <typename Read>
auto OneRow(Result<Stmt>& q, Read read, Status missing) -> Result<decltype(read(q.value()))> {
  if (!q.ok()) return q.status();
  auto row = q.value().Step();
  if (!row.ok()) return row.status();
  if (!row.value()) return missing;
  return read(q.value());
}

}  // namespace burst
