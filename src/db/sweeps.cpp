// Metadata, part three: sweeps (schema step 5 in metadata.cpp).
#include "db/metadata.h"
#include "db/rows.h"

namespace burst {
namespace {

const char* kSweepColumns =
    "id, org_id, created_at, idempotency_key, request_sha256, request, runs, cancelled_at";

SweepRecord ReadSweep(const Stmt& q) {
  SweepRecord s;
  s.id = q.Text(0);
  s.org_id = q.Text(1);
  s.created_at = q.Int(2);
  s.idempotency_key = q.IsNull(3) ? "" : q.Text(3);
  s.request_sha256 = q.Text(4);
  s.request = Json::parse(q.Text(5), nullptr, /*allow_exceptions=*/false);
  s.runs = Json::parse(q.Text(6), nullptr, /*allow_exceptions=*/false);
  if (!s.runs.is_array()) s.runs = Json::array();
  s.cancelled_at = q.Int(7);
  return s;
}

Status NotFoundSweep(const std::string& id) { return Status(Code::kNotFound, "no sweep " + id, "sweep_id"); }

}  // namespace

Result<SweepRecord> Metadata::CreateSweep(SweepRecord sweep, bool* created) {
  *created = false;
  sweep.created_at = NowSeconds();
  Conn db = Lease();
  if (!sweep.idempotency_key.empty()) {
    auto q = db->Prepare(std::string("SELECT ") + kSweepColumns +
                         " FROM sweeps WHERE org_id = ? AND idempotency_key = ?");
    if (q.ok()) q.value().Bind(1, sweep.org_id).Bind(2, sweep.idempotency_key);
    auto prev = OneRow(q, ReadSweep, Status(Code::kNotFound, ""));
    if (prev.ok()) {
      if (prev.value().request_sha256 == sweep.request_sha256) return prev;
      return Status(Code::kAlreadyExists,
                    "Idempotency-Key \"" + sweep.idempotency_key + "\" was used for sweep " +
                        prev.value().id + " with a different request body",
                    "idempotency_key");
    }
    if (prev.status().code() != Code::kNotFound) return prev.status();
  }
  auto ins = db->Prepare(
      "INSERT INTO sweeps (id, org_id, created_at, idempotency_key, request_sha256, request, runs) "
      "VALUES (?, ?, ?, ?, ?, ?, ?)");
  if (!ins.ok()) return ins.status();
  Stmt& s = ins.value();
  s.Bind(1, sweep.id).Bind(2, sweep.org_id).Bind(3, sweep.created_at);
  if (sweep.idempotency_key.empty())
    s.BindNull(4);
  else
    s.Bind(4, sweep.idempotency_key);
  s.Bind(5, sweep.request_sha256).Bind(6, sweep.request.dump()).Bind(7, sweep.runs.dump());
  if (Status r = s.Run(); !r.ok()) return r;
  *created = true;
  return sweep;
}

Result<SweepRecord> Metadata::GetSweep(const std::string& org_id, const std::string& id) {
  Conn db = Lease();
  auto q = db->Prepare(std::string("SELECT ") + kSweepColumns + " FROM sweeps WHERE org_id = ? AND id = ?");
  if (q.ok()) q.value().Bind(1, org_id).Bind(2, id);
  return OneRow(q, ReadSweep, NotFoundSweep(id));
}

Result<std::optional<SweepRecord>> Metadata::FindSweepByKey(const std::string& org_id,
                                                            const std::string& key) {
  if (key.empty()) return std::optional<SweepRecord>();
  Conn db = Lease();
  auto q = db->Prepare(std::string("SELECT ") + kSweepColumns +
                       " FROM sweeps WHERE org_id = ? AND idempotency_key = ?");
  if (q.ok()) q.value().Bind(1, org_id).Bind(2, key);
  auto row = OneRow(q, ReadSweep, Status(Code::kNotFound, ""));
  if (row.ok()) return std::optional<SweepRecord>(row.value());
  if (row.status().code() == Code::kNotFound) return std::optional<SweepRecord>();
  return row.status();
}

Result<std::vector<SweepRecord>> Metadata::ListSweeps(const std::string& org_id, const std::string& after,
                                                      int64_t limit) {
  Conn db = Lease();
  auto q = db->Prepare(std::string("SELECT ") + kSweepColumns +
                       " FROM sweeps WHERE org_id = ?1 AND (?2 = '' OR seq < (SELECT seq FROM sweeps "
                       "WHERE id = ?2 AND org_id = ?1)) ORDER BY seq DESC LIMIT ?3");
  if (q.ok()) q.value().Bind(1, org_id).Bind(2, after).Bind(3, limit);
  return AllRows(q, ReadSweep);
}

Result<bool> Metadata::CancelSweep(const std::string& org_id, const std::string& id, int64_t at) {
  Conn db = Lease();
  auto q = db->Prepare("UPDATE sweeps SET cancelled_at = ? WHERE org_id = ? AND id = ? AND cancelled_at = 0");
  if (!q.ok()) return q.status();
  if (Status s = q.value().Bind(1, at).Bind(2, org_id).Bind(3, id).Run(); !s.ok()) return s;
  if (db->Changes() > 0) return true;
  auto e = db->Prepare("SELECT 1 FROM sweeps WHERE org_id = ? AND id = ?");
  if (e.ok()) e.value().Bind(1, org_id).Bind(2, id);
  auto exists = OneRow(
      e, [](const Stmt&) { return true; }, NotFoundSweep(id));
  if (!exists.ok()) return exists.status();
  return false;
}

}  // namespace burst
