// Metadata, part four: deployments (schema step 6 in metadata.cpp).
#include "db/metadata.h"
#include "db/rows.h"

namespace burst {
namespace {

const char* kDeploymentColumns =
    "id, org_id, name, created_at, deleted_at, request_sha256, request, target, requests, cold_starts, "
    "last_request_ms";

DeploymentRecord ReadDeployment(const Stmt& q) {
  DeploymentRecord d;
  d.id = q.Text(0);
  d.org_id = q.Text(1);
  d.name = q.Text(2);
  d.created_at = q.Int(3);
  d.deleted_at = q.Int(4);
  d.request_sha256 = q.Text(5);
  d.request = Json::parse(q.Text(6), nullptr, /*allow_exceptions=*/false);
  d.target = Json::parse(q.Text(7), nullptr, /*allow_exceptions=*/false);
  d.requests = q.Int(8);
  d.cold_starts = q.Int(9);
  d.last_request_ms = q.Int(10);
  return d;
}

}  // namespace

Result<DeploymentRecord> Metadata::CreateDeployment(DeploymentRecord d, bool* created) {
  *created = false;
  d.created_at = NowSeconds();
  Conn db = Lease();
  DeploymentRecord out;
  Status st = db->Transaction([&]() -> Status {
    auto q = db->Prepare(std::string("SELECT ") + kDeploymentColumns +
                         " FROM deployments WHERE org_id = ? AND name = ? AND deleted_at = 0");
    if (q.ok()) q.value().Bind(1, d.org_id).Bind(2, d.name);
    auto prev = OneRow(q, ReadDeployment, Status(Code::kNotFound, ""));
    if (prev.ok()) {
      if (prev.value().request_sha256 != d.request_sha256) {
        return Status(Code::kAlreadyExists,
                      "deployment \"" + d.name + "\" (" + prev.value().id +
                          ") exists with a different body; delete it first or pick another name",
                      "name");
      }
      out = prev.value();
      return Status();
    }
    if (prev.status().code() != Code::kNotFound) return prev.status();
    auto ins = db->Prepare(
        "INSERT INTO deployments (id, org_id, name, created_at, request_sha256, request, target) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)");
    if (!ins.ok()) return ins.status();
    Status r = ins.value()
                   .Bind(1, d.id)
                   .Bind(2, d.org_id)
                   .Bind(3, d.name)
                   .Bind(4, d.created_at)
                   .Bind(5, d.request_sha256)
                   .Bind(6, d.request.dump())
                   .Bind(7, d.target.dump())
                   .Run();
    if (!r.ok()) return r;
    *created = true;
    out = d;
    return Status();
  });
  if (!st.ok()) return st;
  return out;
}

Result<DeploymentRecord> Metadata::GetDeployment(const std::string& org_id, const std::string& id_or_name) {
  Conn db = Lease();
  // A live name first, then an id (deleted ones stay readable by id).
  auto q = db->Prepare(std::string("SELECT ") + kDeploymentColumns +
                       " FROM deployments WHERE org_id = ?1 AND ((name = ?2 AND deleted_at = 0) OR id = ?2)"
                       " ORDER BY (id = ?2) LIMIT 1");
  if (q.ok()) q.value().Bind(1, org_id).Bind(2, id_or_name);
  return OneRow(q, ReadDeployment, Status(Code::kNotFound, "no deployment " + id_or_name, "deployment"));
}

Result<std::vector<DeploymentRecord>> Metadata::ListDeployments(const std::string& org_id,
                                                                bool include_deleted) {
  Conn db = Lease();
  auto q = db->Prepare(
      std::string("SELECT ") + kDeploymentColumns +
      " FROM deployments WHERE (?1 = '' OR org_id = ?1) AND (?2 <> 0 OR deleted_at = 0) ORDER BY seq DESC");
  if (q.ok()) q.value().Bind(1, org_id).Bind(2, int64_t{include_deleted});
  return AllRows(q, ReadDeployment);
}

Status Metadata::MarkDeploymentDeleted(const std::string& id, int64_t deleted_at) {
  Conn db = Lease();
  auto q = db->Prepare("UPDATE deployments SET deleted_at = ? WHERE id = ? AND deleted_at = 0");
  if (!q.ok()) return q.status();
  return q.value().Bind(1, deleted_at).Bind(2, id).Run();
}

Status Metadata::CountDeploymentRequest(const std::string& id, int64_t at_ms, bool cold) {
  Conn db = Lease();
  auto q = db->Prepare(
      "UPDATE deployments SET requests = requests + 1, cold_starts = cold_starts + ?, last_request_ms = ? "
      "WHERE id = ?");
  if (!q.ok()) return q.status();
  return q.value().Bind(1, int64_t{cold}).Bind(2, at_ms).Bind(3, id).Run();
}

}  // namespace burst
