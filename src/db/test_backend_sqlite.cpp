// db_test's backend: each test's database is a new file in a folder of its
// own, removed when the binary ends.
#include <vector>

#include "core/fs.h"
#include "db/test_backend.h"

namespace burst {
namespace {

class SqliteBackend final : public TestBackend, public testing::Environment {
 public:
  std::string NewDatabase() override {
    dirs_.push_back(MakeTempDir("burst-db-test"));
    return (dirs_.back() / "meta.db").string();
  }
  std::string FailInserts(const std::string& table) override {
    return "CREATE TRIGGER fail_" + table + " BEFORE INSERT ON " + table +
           " BEGIN SELECT RAISE(ABORT, 'disk gone'); END;";
  }
  std::string StopFailingInserts(const std::string& table) override { return "DROP TRIGGER fail_" + table; }
  void TearDown() override {
    std::error_code ec;
    for (const auto& d : dirs_) fs::remove_all(d, ec);
  }

 private:
  std::vector<fs::path> dirs_;
};

SqliteBackend* const g_backend =
    static_cast<SqliteBackend*>(testing::AddGlobalTestEnvironment(new SqliteBackend));

}  // namespace

TestBackend& CurrentBackend() { return *g_backend; }

BURST_DB_TEST_BACKEND(sqlite);

}  // namespace burst
