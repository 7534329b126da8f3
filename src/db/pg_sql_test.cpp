// The PostgreSQL backend's SQL rewriting and error codes, and the
// `database` URL's parsing and redaction: no server needed.
#include "db/pg_sql.h"

#include <gtest/gtest.h>

#include "db/db.h"

namespace burst {
namespace {

std::string Pg(const std::string& sql, int* params = nullptr) {
  int n = 0;
  std::string out = TranslateForPostgres(sql, &n);
  if (params) *params = n;
  return out;
}

TEST(PgSql, PlaceholdersBecomeNumbered) {
  int n = 0;
  EXPECT_EQ(Pg("SELECT a FROM t WHERE b = ? AND c = ?", &n), "SELECT a FROM t WHERE b = $1 AND c = $2");
  EXPECT_EQ(n, 2);
  EXPECT_EQ(Pg("WHERE org_id = ?1 AND (?2 = '' OR seq < ?2) LIMIT ?3", &n),
            "WHERE org_id = $1 AND ($2 = '' OR seq < $2) LIMIT $3");
  EXPECT_EQ(n, 3);
  EXPECT_EQ(Pg("VALUES (?2, ?, ?)", &n), "VALUES ($2, $3, $4)");  // SQLite's rule
  EXPECT_EQ(n, 4);
  EXPECT_EQ(Pg("SELECT 1", &n), "SELECT 1");
  EXPECT_EQ(n, 0);
}

TEST(PgSql, LiteralsIdentifiersCommentsAndDollarQuotesAreLeftAlone) {
  int n = 0;
  EXPECT_EQ(Pg("SELECT 'it''s ? INTEGER', \"odd ? REAL\", ? -- what ? INTEGER\n, ?", &n),
            "SELECT 'it''s ? INTEGER', \"odd ? REAL\", $1 -- what ? INTEGER\n, $2");
  EXPECT_EQ(n, 2);
  EXPECT_EQ(Pg("SELECT /* ? REAL */ ?"), "SELECT /* ? REAL */ $1");
  EXPECT_EQ(Pg("CREATE FUNCTION f() RETURNS trigger AS $$BEGIN RAISE EXCEPTION '?'; END$$ LANGUAGE plpgsql; "
               "SELECT ?"),
            "CREATE FUNCTION f() RETURNS trigger AS $$BEGIN RAISE EXCEPTION '?'; END$$ LANGUAGE plpgsql; "
            "SELECT $1");
  EXPECT_EQ(Pg("SELECT $tag$ ? $tag$, $1"), "SELECT $tag$ ? $tag$, $1");
  EXPECT_EQ(Pg("SELECT 'unterminated ?"), "SELECT 'unterminated ?");
}

TEST(PgSql, SqliteTypesBecomePostgresTypes) {
  EXPECT_EQ(Pg("CREATE TABLE t (seq INTEGER PRIMARY KEY AUTOINCREMENT, n integer NOT NULL, r REAL, s TEXT)"),
            "CREATE TABLE t (seq BIGSERIAL PRIMARY KEY, n BIGINT NOT NULL, r DOUBLE PRECISION, s TEXT)");
  EXPECT_EQ(Pg("CREATE TABLE m (version INTEGER PRIMARY KEY, at TEXT)"),
            "CREATE TABLE m (version BIGINT PRIMARY KEY, at TEXT)");
  EXPECT_EQ(Pg("CREATE TABLE t (seq INTEGER\n  PRIMARY  KEY   AUTOINCREMENT)"),
            "CREATE TABLE t (seq BIGSERIAL PRIMARY KEY)");
  // Words that only contain the type names are not types.
  EXPECT_EQ(Pg("SELECT integers, real_cost, surreal FROM t"), "SELECT integers, real_cost, surreal FROM t");
}

TEST(PgSql, SqlStatesMapToCodes) {
  EXPECT_EQ(CodeForSqlState("23505"), Code::kAlreadyExists);
  EXPECT_EQ(CodeForSqlState("23502"), Code::kFailedPrecondition);  // not null
  EXPECT_EQ(CodeForSqlState("23503"), Code::kFailedPrecondition);  // foreign key
  for (const char* s : {"40001", "40P01", "08006", "08001", "57P01", "57P03", "55P03", "53300"}) {
    EXPECT_EQ(CodeForSqlState(s), Code::kUnavailable) << s;
  }
  EXPECT_EQ(CodeForSqlState("22021"), Code::kInvalidArgument);
  EXPECT_EQ(CodeForSqlState("42601"), Code::kInternal);  // syntax
  EXPECT_EQ(CodeForSqlState("42P01"), Code::kInternal);  // no such table
  EXPECT_EQ(CodeForSqlState(""), Code::kInternal);
}

TEST(DatabaseUrl, PasswordsAreRedacted) {
  EXPECT_EQ(RedactDatabaseUrl("postgresql://burst:s3cret@db.example:5432/meta"),
            "postgresql://burst:***@db.example:5432/meta");
  EXPECT_EQ(RedactDatabaseUrl("postgres://u:p%40ss@h/db?sslmode=require&password=two&x=1"),
            "postgres://u:***@h/db?sslmode=require&password=***&x=1");
  EXPECT_EQ(RedactDatabaseUrl("postgresql://u:we/ird@pa@ss@h/db"), "postgresql://u:***@h/db");
  EXPECT_EQ(RedactDatabaseUrl("postgresql://u@h/db"), "postgresql://u@h/db");
  EXPECT_EQ(RedactDatabaseUrl("postgresql:///db?host=/tmp/x"), "postgresql:///db?host=/tmp/x");
  EXPECT_EQ(RedactDatabaseUrl("/var/lib/burst/meta.db"), "/var/lib/burst/meta.db");
  std::vector<std::string> hidden;
  RedactDatabaseUrl("postgresql://u:one@h/db?password=two", &hidden);
  EXPECT_EQ(hidden, (std::vector<std::string>{"one", "two"}));
  EXPECT_EQ(Scrub("failed for one and one", "one"), "failed for *** and ***");
  EXPECT_EQ(Scrub("as it was", ""), "as it was");
}

TEST(DatabaseUrl, BadUrlsNameTheDatabaseSetting) {
  for (const std::string url : {"", "mysql://u:hunter2@h/db", "sqlite://relative/meta.db", "sqlite://",
                                "postgresql://u:hunter2@h/db?nonsense=1", "postgresql://u:hunter2@[::1/db"}) {
    auto db = Db::Open(url);
    ASSERT_FALSE(db.ok()) << url;
    EXPECT_EQ(db.status().code(), Code::kInvalidArgument) << db.status().ToString();
    EXPECT_EQ(db.status().param(), "database") << url;
    EXPECT_EQ(db.status().message().rfind("database: ", 0), 0u) << db.status().message();
    EXPECT_EQ(db.status().message().find("hunter2"), std::string::npos) << db.status().message();
  }
  EXPECT_NE(Db::Open("mysql://h/db").status().message().find("unknown scheme \"mysql\""), std::string::npos);
}

}  // namespace
}  // namespace burst
