// One test suite, two backends. The Db and Metadata tests (db/README.md
// names them) are TEST_Ps whose parameter names the backend; each
// test binary links one backend and instantiates them with it: db_test with
// "sqlite" (test_backend_sqlite.cpp), db_pg_test with "postgresql", against
// a real server that the binary starts (postgres_test.cpp).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "db/db.h"
#include "db/metadata.h"

namespace burst {

class TestBackend {
 public:
  virtual ~TestBackend() = default;
  // The `database` URL of a new, empty database, for one test.
  virtual std::string NewDatabase() = 0;
  // SQL that makes every insert into `table` fail ("disk gone"), and SQL
  // that undoes it.
  virtual std::string FailInserts(const std::string& table) = 0;
  virtual std::string StopFailingInserts(const std::string& table) = 0;
};

// The backend this binary links (defined next to its instantiation).
TestBackend& CurrentBackend();

class BackendTest : public testing::TestWithParam<std::string> {
 protected:
  std::string NewDatabase() { return CurrentBackend().NewDatabase(); }
};
class DbTest : public BackendTest {};
class MetadataTest : public BackendTest {};

template <typename T>
T OrDie(Result<T> r) {
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) throw Error(r.status());
  return std::move(r).value();
}

inline std::unique_ptr<Db> OpenDb(const std::string& url) { return OrDie(Db::Open(url)); }
inline std::unique_ptr<Metadata> OpenMetadata(const std::string& url) { return OrDie(Metadata::Open(url)); }

// Instantiates the shared suites with the backend `name`.
#define BURST_DB_TEST_BACKEND(name)                                                               \
  INSTANTIATE_TEST_SUITE_P(name, DbTest, testing::Values(std::string(#name)),                     \
                           [](const testing::TestParamInfo<std::string>& i) { return i.param; }); \
  INSTANTIATE_TEST_SUITE_P(name, MetadataTest, testing::Values(std::string(#name)),               \
                           [](const testing::TestParamInfo<std::string>& i) { return i.param; })

}  // namespace burst
