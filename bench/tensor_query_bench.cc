// GetTensorValues over a long trial of a large tensor (issue 27): time and
// memory of the real query path against decoding the same records alone.
//
// Writes a real smdebug trial (tests/rules_engine/trial_writer.h: index and
// TFRecord event files with real CRCs) of --steps steps, each saving one
// float32 tensor of --elements elements ("gradient/fc1.weight") and a
// scalar loss; every 10th step is EVAL, the others TRAIN. Then, each phase
// in a process of its own so that each has its own peak RSS (VmHWM):
//   - read + CRC: every step's event file read into one reused buffer and
//     its records' CRCs checked;
//   - the ceiling, read + CRC + decode: the same, and the tensor's record
//     decoded (DecodeEventTensor, as the trial reader decodes it) into one
//     reused Tensor; nothing else;
//   - GetTensorValues through the real debugplane-server (gRPC, streamed),
//     with the default MaxPoints and with MaxPoints=10000: a job whose
//     DebugHookConfig points at the trial, read by a client that asks again
//     from LastStepRead + 1 while the server says the read was truncated
//     (its per-query bound of time and steps), as a client must. The
//     server's CPU time and peak RSS are read from /proc/<pid> (its VmHWM
//     reset before each query through /proc/<pid>/clear_refs).
//
//   tensor_query_bench [--steps 1000] [--elements 1000000] [--dir DIR] [--keep]
//                      [--server PATH]
//
// --dir: where the trial is written (default: a fresh directory under
// /tmp, removed at the end unless --keep). A trial already there from an
// earlier run with the same --steps and --elements is reused. --server: the
// debugplane-server to query (default: the one next to this binary), e.g.
// a build of main for a before/after in one sitting.

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/bench_processes.h"
#include "debugplane/v1/tensor_query.grpc.pb.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "rules_engine/smdebug/tensor_decode.h"
#include "rules_engine/smdebug/tfrecord.h"
#include "tests/rules_engine/trial_writer.h"

namespace fs = std::filesystem;
using namespace debugplane;
using namespace debugplane::rules_engine;

namespace {

constexpr char kTensor[] = "gradient/fc1.weight";
constexpr char kJob[] = "tensor-query-bench";

Mode ModeOf(int64_t step) { return step % 10 == 9 ? Mode::kEval : Mode::kTrain; }

// Writes the trial (or keeps the one a previous run wrote with the same
// size). Returns the bytes of event files.
void WriteTrial(const fs::path& dir, int64_t steps, int64_t elements) {
  const fs::path done = dir / "bench_trial_done";
  const std::string want = absl::StrCat(steps, " ", elements);
  {
    std::ifstream in(done);
    std::string have;
    if (std::getline(in, have) && have == want) return;
  }
  fs::remove_all(dir);
  testing::TrialWriter writer(dir.string());
  std::vector<double> base(static_cast<size_t>(elements));
  for (int64_t i = 0; i < elements; ++i) base[i] = std::sin(0.001 * static_cast<double>(i));
  testing::TensorSpec tensor{kTensor, {elements}, base};
  int64_t mode_steps[5] = {};
  for (int64_t step = 0; step < steps; ++step) {
    const double scale = 1.0 / (1.0 + 0.001 * static_cast<double>(step));
    for (int64_t i = 0; i < elements; ++i) tensor.values[i] = base[i] * scale;
    const Mode mode = ModeOf(step);
    writer.AddStep(step, mode, mode_steps[static_cast<int>(mode)]++,
                   {tensor, {"CrossEntropyLoss_output_0", {}, {2.3 * scale}}});
  }
  writer.EndTraining();
  std::ofstream(done) << want << "\n";
}

std::string ProcStatusField(const std::string& status_path, const std::string& field) {
  std::ifstream in(status_path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return line.substr(field.size() + 1);
  }
  return "";
}

// VmHWM or VmRSS of a process, in MB.
double MemoryMb(const std::string& pid, const std::string& field) {
  int64_t kb = 0;
  const std::string line = ProcStatusField(absl::StrCat("/proc/", pid, "/status"), field);
  absl::string_view value = absl::StripAsciiWhitespace(line);
  absl::ConsumeSuffix(&value, " kB");
  if (!absl::SimpleAtoi(value, &kb)) return -1;
  return static_cast<double>(kb) / 1024.0;
}

// User + system CPU seconds of process `pid` so far.
double ProcessCpuSeconds(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::vector<std::string> fields = absl::StrSplit(stat.substr(close + 2), ' ');
  // Fields 14 and 15 of stat(5); fields[0] is field 3.
  double utime = 0, stime = 0;
  if (fields.size() < 13 || !absl::SimpleAtod(fields[11], &utime) ||
      !absl::SimpleAtod(fields[12], &stime)) {
    return -1;
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double SelfCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// The largest event file the bench writes: one step of at most --elements
// 2^28 float32 (1 GiB) and a scalar; anything larger in the trial directory
// is not the bench's (a sparse file must not size the buffer).
constexpr off_t kMaxEventFileBytes = off_t{1} << 31;

// Reads `path` whole into `buffer` (reused).
bool ReadInto(const std::string& path, std::string& buffer) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_size > kMaxEventFileBytes) {
    close(fd);
    return false;
  }
  buffer.resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < buffer.size()) {
    const ssize_t n = read(fd, buffer.data() + done, buffer.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  close(fd);
  return done == buffer.size();
}

// The child phase "crc" or "decode": prints "wall cpu peak_mb bytes checksum".
int RunDecodePhase(const fs::path& dir, const std::string& phase, int64_t steps) {
  testing::TrialWriter names(dir.string());
  std::string buffer;
  Tensor tensor;
  ValueMetadata metadata;
  uint64_t bytes = 0;
  double checksum = 0;
  const absl::Time start = absl::Now();
  for (int64_t step = 0; step < steps; ++step) {
    const std::string file = names.EventFile(step);
    if (!ReadInto(file, buffer)) {
      std::fprintf(stderr, "cannot read %s\n", file.c_str());
      return 1;
    }
    bytes += buffer.size();
    absl::StatusOr<TfRecords> records = ParseTfRecords(buffer, file);
    if (!records.ok() || records->records.empty()) {
      std::fprintf(stderr, "%s: %s\n", file.c_str(), records.status().ToString().c_str());
      return 1;
    }
    if (phase != "decode") continue;
    absl::Status decoded = DecodeEventTensor(
        records->records.front().payload, kTensor, [&file] { return file; }, &tensor, &metadata);
    if (!decoded.ok()) {
      std::fprintf(stderr, "%s\n", decoded.ToString().c_str());
      return 1;
    }
    checksum += tensor.values.empty() ? 0 : tensor.values.back();
  }
  const double wall = absl::ToDoubleSeconds(absl::Now() - start);
  std::printf("%.3f %.3f %.1f %llu %.6g\n", wall, SelfCpuSeconds(), MemoryMb("self", "VmHWM"),
              static_cast<unsigned long long>(bytes), checksum);
  return 0;
}

struct PhaseResult {
  double wall = 0, cpu = 0, peak_mb = 0;
  uint64_t bytes = 0;
};

// Runs this binary with --phase `phase` and parses its line.
std::optional<PhaseResult> RunChildPhase(const fs::path& root, const std::string& phase,
                                         int64_t steps, const fs::path& log) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return std::nullopt;
  const pid_t pid = bench::Spawn({bench::NextToSelf("tensor_query_bench"), "--phase", phase,
                                  "--dir", root.string(), "--steps", absl::StrCat(steps)},
                                 log, out[1]);
  close(out[1]);
  std::string line;
  char c;
  while (read(out[0], &c, 1) == 1) line.push_back(c);
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  PhaseResult r;
  unsigned long long bytes = 0;
  double checksum = 0;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
      std::sscanf(line.c_str(), "%lf %lf %lf %llu %lf", &r.wall, &r.cpu, &r.peak_mb, &bytes,
                  &checksum) != 5) {
    std::fprintf(stderr, "phase %s failed (%s); see %s\n", phase.c_str(),
                 bench::DescribeStatus(status).c_str(), log.c_str());
    return std::nullopt;
  }
  r.bytes = bytes;
  return r;
}

struct QueryResult {
  double wall = 0, server_cpu = 0, client_cpu = 0, server_peak_mb = 0, server_before_mb = 0;
  int64_t points = 0, steps_in_points = 0, requests = 0, messages = 0;
  bool ok = false;
};

// GetTensorValues of the whole trial, asked again from LastStepRead + 1
// while truncated.
QueryResult Query(v1::TensorQueryService::Stub& stub, pid_t server, std::optional<int> max_points) {
  QueryResult r;
  const std::string pid = absl::StrCat(server);
  std::ofstream(absl::StrCat("/proc/", pid, "/clear_refs")) << "5";  // Resets VmHWM.
  r.server_before_mb = MemoryMb(pid, "VmRSS");
  const double server_cpu = ProcessCpuSeconds(server);
  const double client_cpu = SelfCpuSeconds();
  const absl::Time start = absl::Now();
  int64_t next = 0;
  while (true) {
    v1::GetTensorValuesRequest request;
    request.set_training_job_name(kJob);
    request.set_tensor_name(kTensor);
    request.set_start_step(next);
    if (max_points) request.set_max_points(*max_points);
    auto context = bench::ContextWithin(absl::Minutes(10));
    auto reader = stub.GetTensorValues(context.get(), request);
    ++r.requests;
    v1::TensorValuesResponse batch;
    bool truncated = false;
    while (reader->Read(&batch)) {
      ++r.messages;
      r.points += batch.points_size();
      for (const v1::TensorPoint& p : batch.points()) r.steps_in_points += p.step_count();
      if (batch.truncated()) {
        truncated = true;
        next = batch.last_step_read() + 1;
      }
    }
    grpc::Status status = reader->Finish();
    if (!status.ok()) {
      std::fprintf(stderr, "GetTensorValues: %s\n", status.error_message().c_str());
      return r;
    }
    if (!truncated) break;
  }
  r.wall = absl::ToDoubleSeconds(absl::Now() - start);
  r.server_cpu = ProcessCpuSeconds(server) - server_cpu;
  r.client_cpu = SelfCpuSeconds() - client_cpu;
  r.server_peak_mb = MemoryMb(pid, "VmHWM");
  r.ok = true;
  return r;
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return absl::StrCat(a, " ", b, " ", c);
}

bool CreateJob(const std::string& address, const fs::path& trial) {
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  auto jobs = v1::TrainingJobService::NewStub(channel);
  v1::CreateTrainingJobRequest request;
  request.set_training_job_name(kJob);
  request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Bench");
  request.mutable_output_data_config()->set_s3_output_path("s3://bucket/out");
  request.mutable_debug_hook_config()->set_s3_output_path(trial.string());
  v1::CreateTrainingJobResponse response;
  grpc::Status status =
      jobs->CreateTrainingJob(bench::ContextWithin(absl::Seconds(30)).get(), request, &response);
  if (!status.ok()) std::fprintf(stderr, "CreateTrainingJob: %s\n", status.error_message().c_str());
  return status.ok();
}

void PrintPhase(const char* name, const PhaseResult& r) {
  std::printf("%-36s %8.2f s wall %8.2f s CPU %9.1f MB/s %9.1f MB peak RSS\n", name, r.wall,
              r.cpu, r.bytes / 1e6 / r.wall, r.peak_mb);
}

void PrintQuery(const std::string& name, const QueryResult& q, const PhaseResult& ceiling) {
  std::printf("%-36s %8.2f s wall %8.2f s CPU %9.1f MB/s %9.1f MB peak RSS (server; %.1f MB "
              "before)\n",
              name.c_str(), q.wall, q.server_cpu, ceiling.bytes / 1e6 / q.wall, q.server_peak_mb,
              q.server_before_mb);
  std::printf("%-36s %lld points (%lld steps), %lld messages, %lld requests, client CPU %.2f s\n",
              "", static_cast<long long>(q.points), static_cast<long long>(q.steps_in_points),
              static_cast<long long>(q.messages), static_cast<long long>(q.requests),
              q.client_cpu);
  std::printf("%-36s wall %.2fx, CPU %.2fx, peak RSS over the server's before %.1f MB "
              "(ceiling's peak %.1f MB)\n",
              "  against the ceiling", q.wall / ceiling.wall, q.server_cpu / ceiling.cpu,
              q.server_peak_mb - q.server_before_mb, ceiling.peak_mb);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("GetTensorValues over a long trial against decoding its records alone");
  int64_t steps = 1000, elements = 1000000;
  std::string dir, phase, server_binary = bench::NextToSelf("debugplane-server");
  bool keep = false;
  app.add_option("--steps", steps, "Steps of the trial")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24))
      ->capture_default_str();
  app.add_option("--elements", elements, "float32 elements of the tensor")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 28))
      ->capture_default_str();
  app.add_option("--dir", dir, "Where to write the trial (reused if the same size)");
  app.add_flag("--keep", keep, "Keep the trial written under /tmp");
  app.add_option("--server", server_binary, "The debugplane-server binary to query")
      ->capture_default_str();
  app.add_option("--phase", phase, "internal: crc or decode (a child phase)");
  CLI11_PARSE(app, argc, argv);
  const bool own_dir = dir.empty();
  if (own_dir) dir = absl::StrCat("/tmp/tensor_query_bench_", getpid());
  const fs::path root(dir);
  const fs::path trial = root / "trial";
  if (!phase.empty()) return RunDecodePhase(trial, phase, steps);

  fs::create_directories(root);
  const absl::Time write_start = absl::Now();
  WriteTrial(trial, steps, elements);
  std::printf("tensor_query_bench: %lld steps x %lld float32 elements, trial %s (written in %.1f s)\n",
              static_cast<long long>(steps), static_cast<long long>(elements), trial.c_str(),
              absl::ToDoubleSeconds(absl::Now() - write_start));
  std::printf("load average before: %s\n", LoadAverage().c_str());
  const fs::path log = root / "bench.log";
  // Once to bring the files into the page cache, as the runs that follow find them.
  if (!RunChildPhase(root, "crc", steps, log)) return 1;
  std::optional<PhaseResult> crc = RunChildPhase(root, "crc", steps, log);
  std::optional<PhaseResult> decode = RunChildPhase(root, "decode", steps, log);
  if (!crc || !decode) return 1;
  std::printf("event files: %.1f MB\n", decode->bytes / 1e6);
  PrintPhase("read + CRC", *crc);
  PrintPhase("read + CRC + decode (ceiling)", *decode);

  // A fresh server database each run (the job is created anew).
  fs::remove_all(root / "server");
  fs::create_directories(root / "server");
  bench::ServerChild server;
  absl::Status started =
      server.Start(server_binary,
                   {"--data-dir", (root / "server").string(), "--data-root", root.string(),
                    "--log-level", "warn"},
                   root / "server.log", absl::Seconds(60));
  if (!started.ok() || !CreateJob(server.address(), trial)) {
    std::fprintf(stderr, "%s\n", started.ToString().c_str());
    return 1;
  }
  // For `perf record -p` of the queries.
  std::printf("server pid %d\n", static_cast<int>(server.pid()));
  std::fflush(stdout);
  auto channel = grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials());
  auto stub = v1::TensorQueryService::NewStub(channel);
  int failures = 0;
  for (const std::optional<int> max_points : {std::optional<int>(), std::optional<int>(10000)}) {
    const QueryResult q = Query(*stub, server.pid(), max_points);
    if (!q.ok) {
      ++failures;
      continue;
    }
    PrintQuery(max_points ? absl::StrCat("GetTensorValues MaxPoints=", *max_points)
                          : std::string("GetTensorValues MaxPoints default"),
               q, *decode);
    if (q.steps_in_points != steps) {
      std::fprintf(stderr, "the points stand for %lld steps, not %lld\n",
                   static_cast<long long>(q.steps_in_points), static_cast<long long>(steps));
      ++failures;
    }
  }
  std::printf("load average after: %s\n", LoadAverage().c_str());
  server.Stop(absl::Seconds(15));
  if (own_dir && !keep) fs::remove_all(root);
  return failures == 0 ? 0 : 1;
}
