// What the PostgreSQL backend does to the SQL both backends share (db/db.h),
// and how it reads PostgreSQL's errors. Pure functions, tested without a
// server (db/pg_sql_test.cpp).
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace burst {

// Rewrites shared SQL into PostgreSQL's:
// - placeholders: `?N` becomes `$N`, a bare `?` becomes `$K` with K one more
//   than the largest number before it (SQLite's rule); `*params` gets the
//   largest number (0: none);
// - DDL types: `INTEGER PRIMARY KEY AUTOINCREMENT` becomes `BIGSERIAL
//   PRIMARY KEY`, the word INTEGER BIGINT (SQLite's integers are 64-bit),
//   REAL `DOUBLE PRECISION`. A plain `INTEGER PRIMARY KEY` is a BIGINT key
//   the writer fills: write AUTOINCREMENT when the database should.
// String literals ('...'), quoted identifiers ("..."), comments and
// dollar-quoted bodies ($tag$...$tag$) are copied unchanged. So `?` is
// always a parameter (PostgreSQL's jsonb `?` operators are not available).
std::string TranslateForPostgres(std::string_view sql, int* params);

// The Code for a SQLSTATE: 23505 (unique) kAlreadyExists, other 23xxx
// (constraints) kFailedPrecondition; 40001/40P01 (serialization, deadlock),
// 08xxx (connection), 53xxx (resources), 55P03 (lock timeout),
// 57P01-57P03 (shutdown, not accepting connections) kUnavailable; 22021
// and 22P05 (a character the database cannot hold) kInvalidArgument;
// anything else kInternal.
Code CodeForSqlState(std::string_view sqlstate);

// `text` with every occurrence of `secret` replaced by "***" (secret ""
// changes nothing).
std::string Scrub(std::string text, const std::string& secret);

}  // namespace burst
