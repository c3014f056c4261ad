// Runs of a batch's puts written by one statement each: the rows of a run
// go as arrays (unnest) to one prepared statement that changes them all and
// records their changes, so the server plans and executes one statement
// instead of one per row (a per-statement cost that dominated the batch:
// bench/README.md, "Issue 27: PostgreSQL").

#ifndef DEBUGPLANE_PERSISTENCE_POSTGRES_POSTGRES_PUT_RUNS_H_
#define DEBUGPLANE_PERSISTENCE_POSTGRES_POSTGRES_PUT_RUNS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "persistence/postgres/postgres_connection.h"
#include "persistence/storage.h"

namespace debugplane::persistence {

// The statements of runs of puts without an expected version, with kAbsent
// and with a version: prepared on every connection. Parameters: the arrays
// of names, creation times, modification times, statuses, records and
// expected versions (0 where none), one element per put in batch order.
// One row back per put, in order: its change's sequence number and the
// row's version, or two NULLs if it changed nothing (the version it
// expected did not match). Sequence numbers follow the batch order.
std::vector<PgStatement> PutRunStatements();

// Consecutive puts of the batch, [first, first + count), of one kind
// (without / with kAbsent / with another expected version), with distinct
// names (a statement can change a row only once).
struct PutRun {
  size_t first = 0;
  size_t count = 0;
};

// The run starting at `first`. REQUIRES: ops()[first] is a PutJob.
PutRun PutRunAt(const WriteBatch& batch, size_t first);

// Queues `run`'s statement on `pipeline`.
void QueuePutRun(PgPipeline& pipeline, const WriteBatch& batch, const PutRun& run);

}  // namespace debugplane::persistence

#endif  // DEBUGPLANE_PERSISTENCE_POSTGRES_POSTGRES_PUT_RUNS_H_
