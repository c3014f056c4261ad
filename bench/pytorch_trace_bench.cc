// PyTorch profiler trace ingest: a synthetic Kineto trace of at least
// --mb MB (written by this bench with tests/rules_engine/pytorch_trace_writer.h:
// steps with data loading, forward, backward, optimizer, GPU kernels and
// padding operators, ~150 bytes an event), plain and gzip'd, read by
// PyTorchTraceReader (stream, parse, map onto framework events) against the
// floor of reading the same bytes through the same store in the same 4 MiB
// chunks (and gunzipping them, for the .gz), each in a child process of its
// own so that its peak RSS (wait4's ru_maxrss) is its own.
//
//   pytorch_trace_bench [--mb 220] [--dir /tmp] [--runs 3]
//
// Files come from the page cache (a warm-up read first); the median of
// --runs is reported.

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "objectstore/local_object_store.h"
#include "rules_engine/profiler/pytorch_trace_reader.h"
#include "tests/rules_engine/pytorch_trace_writer.h"

namespace fs = std::filesystem;
using namespace debugplane::rules_engine;

namespace {

struct Measured {
  double seconds = 0;
  double cpu_seconds = 0;  // The child's user + system time.
  double peak_mib = 0;
  int64_t events = 0;
};

// Runs `work` (returning a count) in a child; its wall time and peak RSS.
template <typename Work>
Measured InChild(Work work) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) std::abort();
  const absl::Time start = absl::Now();
  const pid_t pid = fork();
  if (pid == 0) {
    close(pipe_fds[0]);
    const int64_t n = work();
    if (write(pipe_fds[1], &n, sizeof(n)) != sizeof(n)) _exit(2);
    _exit(0);
  }
  close(pipe_fds[1]);
  Measured m;
  if (read(pipe_fds[0], &m.events, sizeof(m.events)) != sizeof(m.events)) std::abort();
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  m.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  m.peak_mib = static_cast<double>(usage.ru_maxrss) / 1024.0;
  m.cpu_seconds = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                  static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  close(pipe_fds[0]);
  return m;
}

// The floor: the object's bytes in kTraceChunkBytes chunks (gunzipped for
// .gz), nothing done with them.
int64_t ReadOnly(const debugplane::objectstore::StoreLocation& root, const std::string& key,
                 bool gz) {
  std::string chunk, out(kTraceChunkBytes, '\0');
  uint64_t offset = 0;
  int64_t bytes = 0;
  z_stream z{};
  if (gz) inflateInit2(&z, 16 + MAX_WBITS);
  while (true) {
    if (!root.store->ReadRangeInto(key, offset, kTraceChunkBytes, &chunk).ok() || chunk.empty()) {
      break;
    }
    offset += chunk.size();
    if (!gz) {
      bytes += static_cast<int64_t>(chunk.size());
      continue;
    }
    z.next_in = reinterpret_cast<Bytef*>(chunk.data());
    z.avail_in = static_cast<uInt>(chunk.size());
    while (z.avail_in > 0) {
      z.next_out = reinterpret_cast<Bytef*>(out.data());
      z.avail_out = static_cast<uInt>(out.size());
      const int rc = inflate(&z, Z_NO_FLUSH);
      bytes += static_cast<int64_t>(out.size() - z.avail_out);
      if (rc != Z_OK) break;
    }
  }
  if (gz) inflateEnd(&z);
  return bytes;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("PyTorch trace ingest bench");
  int mb = 220;
  int runs = 3;
  std::string dir = "/tmp";
  app.add_option("--mb", mb, "trace size to write, MB");
  app.add_option("--dir", dir, "where to write it");
  app.add_option("--runs", runs, "runs of each measurement");
  CLI11_PARSE(app, argc, argv);

  const fs::path root = fs::path(dir) / absl::StrCat("pytorch_trace_bench_", getpid());
  fs::create_directories(root / "plain");
  fs::create_directories(root / "gz");
  const std::string name = "host_1.1795819707000000000.pt.trace.json";
  testing::SyntheticTraceOptions options;
  options.padding_ops = 40;
  std::vector<testing::SyntheticStep> steps;
  {
    std::ofstream plain(root / "plain" / name, std::ios::binary);
    gzFile gz = gzopen((root / "gz" / (name + ".gz")).c_str(), "wb6");
    // Steps in batches until the size is reached (the writer closes the
    // JSON, so each batch is a whole trace; only the last is kept).
    int64_t n = 1000;
    while (true) {
      steps = testing::StepsOf(0, std::vector<int64_t>(n, 2000));
      int64_t size = 0;
      testing::WriteSyntheticTrace(
          options, steps, [&](const std::string& s) { size += static_cast<int64_t>(s.size()); });
      if (size >= int64_t{mb} << 20) break;
      n = n * ((int64_t{mb} << 20) / std::max<int64_t>(size, 1) + 1);
    }
    testing::WriteSyntheticTrace(options, steps, [&](const std::string& s) {
      plain << s;
      gzwrite(gz, s.data(), static_cast<unsigned>(s.size()));
    });
    gzclose(gz);
  }
  const double plain_mb = static_cast<double>(fs::file_size(root / "plain" / name)) / 1e6;
  const double gz_mb = static_cast<double>(fs::file_size(root / "gz" / (name + ".gz"))) / 1e6;
  std::printf("trace: %.1f MB (%zu steps), gzip'd %.1f MB\n", plain_mb, steps.size(), gz_mb);

  for (const bool gz : {false, true}) {
    const auto location =
        debugplane::objectstore::OpenLocalPath((root / (gz ? "gz" : "plain")).string()).value();
    const std::string key = location.Key(gz ? name + ".gz" : name);
    ReadOnly(location, key, gz);  // Warm the page cache.
    std::vector<double> read_s, ingest_s, read_mib, ingest_mib, read_cpu, ingest_cpu;
    int64_t events = 0;
    for (int r = 0; r < runs; ++r) {
      Measured floor = InChild([&] { return ReadOnly(location, key, gz); });
      Measured ingest = InChild([&] {
        PyTorchTraceReader reader({location});
        return static_cast<int64_t>(reader.ReadNew().size());
      });
      read_s.push_back(floor.seconds);
      read_cpu.push_back(floor.cpu_seconds);
      ingest_cpu.push_back(ingest.cpu_seconds);
      read_mib.push_back(floor.peak_mib);
      ingest_s.push_back(ingest.seconds);
      ingest_mib.push_back(ingest.peak_mib);
      events = ingest.events;
    }
    std::printf(
        "%-5s read%s: %7.1f MB/s wall, %7.1f MB/s CPU, peak RSS %6.1f MiB | PyTorchTraceReader: "
        "%6.1f MB/s wall, %6.1f MB/s CPU, peak RSS %6.1f MiB, %lld framework events\n",
        gz ? "gzip" : "plain", gz ? "+gunzip" : "", plain_mb / Median(read_s),
        plain_mb / Median(read_cpu), Median(read_mib), plain_mb / Median(ingest_s),
        plain_mb / Median(ingest_cpu), Median(ingest_mib), static_cast<long long>(events));
  }
  fs::remove_all(root);
  return 0;
}
