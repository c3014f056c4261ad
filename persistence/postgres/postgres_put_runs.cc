#include "persistence/postgres/postgres_put_runs.h"

#include <endian.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>
#include <variant>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace debugplane::persistence {
namespace {

constexpr char kPutRunAny[] = "dp_put_jobs";
constexpr char kPutRunNew[] = "dp_put_new_jobs";
constexpr char kPutRunIf[] = "dp_put_jobs_if";

// Array type OIDs (pg_type): text[], int8[], bytea[].
constexpr Oid kTextArrayOid = 1009;
constexpr Oid kInt8ArrayOid = 1016;
constexpr Oid kByteaArrayOid = 1001;

// `changed` changes the rows of `input` and returns (name, version) of
// each row it changed; the rest numbers those changes in input order under
// the change sequence counter (locked by the batch first), records them,
// and returns one row per input row, in order.
std::string RunStatement(const char* changed) {
  return absl::StrCat(
      "WITH input AS (SELECT * FROM unnest($1::text[], $2::int8[], $3::int8[], $4::text[], "
      "$5::bytea[], $6::int8[]) WITH ORDINALITY AS i(name, created, modified, status, record, "
      "expected, ord)), changed AS (",
      changed,
      "), numbered AS (SELECT c.name, c.version, i.created, i.modified, i.status, i.record, "
      "row_number() OVER (ORDER BY i.ord) AS rank, count(*) OVER () AS total "
      "FROM changed c JOIN input i ON i.name = c.name), "
      "next AS (UPDATE change_sequence SET last = last + (SELECT count(*) FROM changed) "
      "WHERE EXISTS (SELECT 1 FROM changed) RETURNING last), "
      "recorded AS (INSERT INTO job_changes (sequence, name, version, deleted, "
      "creation_time_us, last_modified_us, status, record) SELECT next.last - n.total + n.rank, "
      "n.name, n.version, false, n.created, n.modified, n.status, n.record FROM numbered n, next "
      "RETURNING sequence, name, version) "
      "SELECT r.sequence, r.version FROM input i LEFT JOIN recorded r ON r.name = i.name "
      "ORDER BY i.ord");
}

enum class PutKind { kAny, kNew, kIf };

PutKind KindOf(const PutJob& put) {
  if (!put.expected_version.has_value()) return PutKind::kAny;
  return *put.expected_version == kAbsent ? PutKind::kNew : PutKind::kIf;
}

// A one-dimensional array without NULLs in PostgreSQL's binary format.
class PgArrayBuilder {
 public:
  PgArrayBuilder(Oid element, size_t count) {
    for (uint32_t word : {1u, 0u, static_cast<uint32_t>(element), static_cast<uint32_t>(count),
                          1u}) {  // Dimensions, has-nulls, element type, length, lower bound.
      AppendWord(word);
    }
  }
  void Add(std::string_view element) {
    AppendWord(static_cast<uint32_t>(element.size()));
    bytes_.append(element);
  }
  void AddInt8(int64_t value) {
    AppendWord(8);
    const uint64_t big_endian = htobe64(static_cast<uint64_t>(value));
    bytes_.append(reinterpret_cast<const char*>(&big_endian), sizeof big_endian);
  }
  PgParam param() const { return {bytes_.data(), static_cast<int>(bytes_.size())}; }

 private:
  void AppendWord(uint32_t word) {
    const uint32_t big_endian = htobe32(word);
    bytes_.append(reinterpret_cast<const char*>(&big_endian), sizeof big_endian);
  }
  std::string bytes_;
};

}  // namespace

std::vector<PgStatement> PutRunStatements() {
  const std::vector<Oid> types = {kTextArrayOid, kInt8ArrayOid,  kInt8ArrayOid,
                                  kTextArrayOid, kByteaArrayOid, kInt8ArrayOid};
  return {
      {kPutRunAny,
       RunStatement("INSERT INTO training_jobs AS t (name, creation_time_us, last_modified_us, "
                    "status, record, version) SELECT name, created, modified, status, record, 1 "
                    "FROM input ON CONFLICT (name) DO UPDATE SET "
                    "creation_time_us = excluded.creation_time_us, "
                    "last_modified_us = excluded.last_modified_us, status = excluded.status, "
                    "record = excluded.record, version = t.version + 1 "
                    "RETURNING t.name, t.version"),
       types},
      {kPutRunNew,
       RunStatement("INSERT INTO training_jobs (name, creation_time_us, last_modified_us, status, "
                    "record, version) SELECT name, created, modified, status, record, 1 "
                    "FROM input ON CONFLICT (name) DO NOTHING RETURNING name, version"),
       types},
      {kPutRunIf,
       RunStatement("UPDATE training_jobs t SET creation_time_us = i.created, "
                    "last_modified_us = i.modified, status = i.status, record = i.record, "
                    "version = t.version + 1 FROM input i "
                    "WHERE t.name = i.name AND t.version = i.expected "
                    "RETURNING t.name, t.version"),
       types},
  };
}

PutRun PutRunAt(const WriteBatch& batch, size_t first) {
  const PutKind kind = KindOf(std::get<PutJob>(batch.ops()[first]));
  absl::flat_hash_set<std::string_view> names;
  size_t end = first;
  for (; end < batch.size(); ++end) {
    const auto* put = std::get_if<PutJob>(&batch.ops()[end]);
    if (put == nullptr || KindOf(*put) != kind || !names.insert(put->row.name).second) break;
  }
  return PutRun{.first = first, .count = end - first};
}

void QueuePutRun(PgPipeline& pipeline, const WriteBatch& batch, const PutRun& run) {
  PgArrayBuilder names(kTextOid, run.count);
  PgArrayBuilder created(kInt8Oid, run.count);
  PgArrayBuilder modified(kInt8Oid, run.count);
  PgArrayBuilder statuses(kTextOid, run.count);
  PgArrayBuilder records(kByteaOid, run.count);
  PgArrayBuilder expected(kInt8Oid, run.count);
  for (size_t i = run.first; i < run.first + run.count; ++i) {
    const PutJob& put = std::get<PutJob>(batch.ops()[i]);
    names.Add(put.row.name);
    created.AddInt8(put.row.creation_time_us);
    modified.AddInt8(put.row.last_modified_us);
    statuses.Add(put.row.status);
    records.Add(put.row.record);
    expected.AddInt8(put.expected_version.value_or(0));
  }
  const PgParam params[] = {names.param(),    created.param(), modified.param(),
                            statuses.param(), records.param(), expected.param()};
  const PutKind kind = KindOf(std::get<PutJob>(batch.ops()[run.first]));
  pipeline.SendPrepared(kind == PutKind::kAny   ? kPutRunAny
                        : kind == PutKind::kNew ? kPutRunNew
                                                : kPutRunIf,
                        params);
}

}  // namespace debugplane::persistence
