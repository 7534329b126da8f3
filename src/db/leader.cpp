// Metadata, part five: the leader lease (schema step 9 in metadata.cpp).
#include "db/metadata.h"
#include "db/rows.h"

namespace burst {

Result<LeaderLease> Metadata::TryLead(const std::string& holder, const std::string& url, int64_t now_ms,
                                      int64_t ttl_ms) {
  Conn db = Lease();
  LeaderLease out;
  Status st = db->Transaction([&]() -> Status {
    out = LeaderLease{};
    auto q = db->Prepare("SELECT holder, url, expires_ms, term FROM leader WHERE id = 1");
    if (!q.ok()) return q.status();
    auto row = q.value().Step();
    if (!row.ok()) return row.status();
    if (!row.value()) {
      auto ins = db->Prepare("INSERT INTO leader (id, holder, url, expires_ms, term) VALUES (1, ?, ?, ?, 1)");
      if (!ins.ok()) return ins.status();
      out = LeaderLease{true, holder, url, now_ms + ttl_ms, 1};
      return ins.value().Bind(1, holder).Bind(2, url).Bind(3, out.expires_ms).Run();
    }
    out = LeaderLease{false, q.value().Text(0), q.value().Text(1), q.value().Int(2), q.value().Int(3)};
    q.value().Reset();
    if (out.holder != holder && out.expires_ms > now_ms) return Status();  // someone else leads
    if (out.holder != holder) ++out.term;
    out.held = true;
    out.holder = holder;
    out.url = url;
    out.expires_ms = now_ms + ttl_ms;
    auto up = db->Prepare("UPDATE leader SET holder = ?, url = ?, expires_ms = ?, term = ? WHERE id = 1");
    if (!up.ok()) return up.status();
    return up.value().Bind(1, holder).Bind(2, url).Bind(3, out.expires_ms).Bind(4, out.term).Run();
  });
  if (!st.ok()) return st;
  return out;
}

Status Metadata::Resign(const std::string& holder) {
  Conn db = Lease();
  auto q = db->Prepare("UPDATE leader SET expires_ms = 0 WHERE id = 1 AND holder = ?");
  if (!q.ok()) return q.status();
  return q.value().Bind(1, holder).Run();
}

}  // namespace burst
