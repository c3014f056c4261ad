// Durability under kill -9: a child process writes batches and acknowledges
// each one the moment Write returns OK; the parent kills it at a random
// moment, reopens the database and checks that it holds exactly the
// acknowledged batches, plus possibly the one in flight, whole.
//
// SIGKILL leaves the kernel's page cache intact, so this proves atomicity and
// that OK means committed, not that fsync reached the platter (power loss).

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "persistence/sqlite/sqlite_storage.h"
#include "tests/persistence/persistence_test_util.h"

namespace debugplane::persistence {
namespace {

using ::debugplane::persistence::testing::AsTuple;
using ::debugplane::persistence::testing::AsTuples;
using ::debugplane::persistence::testing::MakeRow;
using ::debugplane::persistence::testing::ReadAll;
using ::debugplane::persistence::testing::RowTuple;
using ::debugplane::persistence::testing::ScopedTempDir;
using ::testing::AnyOf;
using ::testing::Eq;

constexpr int kRounds = 8;
constexpr uint32_t kMaxBatches = 100'000;  // A bound in case the parent never kills.

// Batch `b` of round `round`. Deterministic, so that the parent can rebuild
// what the child wrote. It inserts rows, deletes one inserted two batches
// earlier, and replaces a row shared by every batch of every round.
WriteBatch CrashBatch(int round, uint32_t b) {
  WriteBatch batch;
  for (uint32_t j = 0; j < 1 + b % 4; ++j) {
    JobRow row = MakeRow(absl::StrCat("r", round, "-b", b, "-", j), b);
    row.record.append(600 + 97 * j, static_cast<char>('a' + (b + j) % 26));
    batch.Put(std::move(row));
  }
  if (b >= 2) batch.Delete(absl::StrCat("r", round, "-b", b - 2, "-0"));
  batch.Put(MakeRow("progress", int64_t{round} * kMaxBatches + b));
  return batch;
}

using Model = std::map<std::string, JobRow>;

void Apply(const WriteBatch& batch, Model& model) {
  for (const WriteOp& op : batch.ops()) {
    if (const auto* put = std::get_if<PutJob>(&op)) {
      model[put->row.name] = put->row;
    } else {
      model.erase(std::get<DeleteJob>(op).name);
    }
  }
}

std::vector<RowTuple> AsTuples(const Model& model) {
  std::vector<RowTuple> tuples;
  for (const auto& [name, row] : model) tuples.push_back(AsTuple(row));
  return tuples;
}

// The child: writes batches until killed, acknowledging each committed one.
[[noreturn]] void RunWriter(const std::string& path, int round, int ack_fd) {
  auto storage = SqliteStorage::Open(path);
  if (!storage.ok()) {
    std::fprintf(stderr, "writer: %s\n", storage.status().ToString().c_str());
    _exit(2);
  }
  for (uint32_t b = 0; b < kMaxBatches; ++b) {
    if (absl::Status written = (*storage)->Write(CrashBatch(round, b)); !written.ok()) {
      std::fprintf(stderr, "writer: batch %u: %s\n", b, written.ToString().c_str());
      _exit(3);
    }
    // 4 bytes: below PIPE_BUF, so the write is atomic.
    if (write(ack_fd, &b, sizeof b) != sizeof b) _exit(4);
  }
  _exit(0);
}

// Reads one acknowledgement; false at end of file (the child is gone).
bool ReadAck(int fd, uint32_t& ack) {
  size_t got = 0;
  auto* bytes = reinterpret_cast<char*>(&ack);
  while (got < sizeof ack) {
    const ssize_t n = read(fd, bytes + got, sizeof ack - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  return true;
}

// A forked child writer; killed and reaped at the latest by the destructor,
// so that a failed assertion does not leave it running.
class Writer {
 public:
  Writer(const std::string& path, int round) {
    int fds[2];
    if (pipe(fds) != 0) {
      ADD_FAILURE() << "pipe: " << errno;
      return;
    }
    std::fflush(nullptr);  // Or the child would flush the parent's buffers too.
    pid_ = fork();
    if (pid_ == 0) {
      close(fds[0]);
      RunWriter(path, round, fds[1]);
    }
    close(fds[1]);
    ack_fd_ = fds[0];
    if (pid_ < 0) ADD_FAILURE() << "fork: " << errno;
  }
  ~Writer() {
    Kill();
    Wait();
    if (ack_fd_ >= 0) close(ack_fd_);
  }
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  bool ReadAck(uint32_t& ack) { return ack_fd_ >= 0 && persistence::ReadAck(ack_fd_, ack); }
  void Kill() {
    if (pid_ > 0) kill(pid_, SIGKILL);
  }
  // Reaps the child; returns its wait status.
  int Wait() {
    int status = 0;
    if (pid_ > 0) {
      while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      pid_ = -1;
      wait_status_ = status;
    }
    return wait_status_;
  }

 private:
  pid_t pid_ = -1;
  int ack_fd_ = -1;
  int wait_status_ = 0;
};

TEST(SqliteCrashTest, EveryAcknowledgedBatchSurvivesSigkill) {
  ScopedTempDir dir;
  const std::string path = (dir.path() / "jobs.db").string();
  const unsigned seed = std::random_device()();
  SCOPED_TRACE(absl::StrCat("random seed ", seed));
  std::mt19937 rng(seed);

  Model model;  // What the database holds after the previous rounds.
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    // Round 0 is killed before any acknowledgement, most likely while it
    // creates and migrates the database; the later ones mid-stream.
    const uint32_t kill_after =
        round == 0 ? 0 : std::uniform_int_distribution<uint32_t>(1, 40)(rng);
    const int delay_us = std::uniform_int_distribution<int>(0, 3000)(rng);

    uint32_t acked = 0;  // Batches 0 .. acked-1 were acknowledged.
    {
      Writer writer(path, round);
      uint32_t ack = 0;
      while (acked < kill_after && writer.ReadAck(ack)) {
        ASSERT_EQ(ack, acked);
        ++acked;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
      writer.Kill();
      // Acknowledgements already in the pipe count: the child sent them
      // after Write returned OK.
      while (writer.ReadAck(ack)) {
        ASSERT_EQ(ack, acked);
        ++acked;
      }
      const int status = writer.Wait();
      ASSERT_TRUE((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) ||
                  (WIFEXITED(status) && WEXITSTATUS(status) == 0))
          << "the writer failed on its own: wait status " << status;
    }

    Model with_acked = model;
    for (uint32_t b = 0; b < acked; ++b) Apply(CrashBatch(round, b), with_acked);
    Model with_in_flight = with_acked;
    Apply(CrashBatch(round, acked), with_in_flight);

    auto storage = SqliteStorage::Open(path);
    ASSERT_TRUE(storage.ok()) << storage.status();
    EXPECT_EQ((*storage)->schema_version(), kSqliteSchemaVersion);
    auto rows = ReadAll(**storage);
    ASSERT_TRUE(rows.ok()) << rows.status();
    const std::vector<RowTuple> stored = AsTuples(*rows);
    // Every acknowledged batch, and the one in flight either whole or not at
    // all (it may have committed just before the kill).
    ASSERT_THAT(stored, AnyOf(Eq(AsTuples(with_acked)), Eq(AsTuples(with_in_flight))))
        << acked << " batch(es) acknowledged";
    model = stored == AsTuples(with_acked) ? std::move(with_acked) : std::move(with_in_flight);
  }
}

}  // namespace
}  // namespace debugplane::persistence
