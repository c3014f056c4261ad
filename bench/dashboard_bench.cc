// The dashboard's data routes on a big job: one node with --cpus cores and
// --gpus GPUs sampled every 100 ms for --hours (smdebug's system metrics
// files, one per minute, generated in a temporary directory), read by the
// InsightsStore of a real job manager. Measures:
//   - ingest: from the store's start to the whole job read (metrics/s);
//   - the server's time to answer the Overview's and the Nodes' queries
//     through the JobResource handlers (pool hop, refresh check, reduction
//     and JSON): GET overview; GET system?width=1000 (the whole range,
//     every series); GET system?metric=cpu&node=algo-1&width=1000 (the
//     heatmap of every core) - and the bytes each reply sends;
//   - the ceiling in the same run: serializing the same number of already
//     reduced points (the same series x buckets of min/max/mean and the
//     bucket times, as doubles in memory) with the same JSON library.
//
//   dashboard_bench [--hours 24] [--cpus 96] [--gpus 8] [--rounds 20] [--dir DIR]
//
// The generated files take about 0.5 GB per hour with the defaults; they
// are removed at the end unless --dir is given (then they are kept and
// reused by the next run with the same shape).

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/bench_stats.h"
#include "core/manager/training_job_manager.h"
#include "nlohmann/json.hpp"
#include "persistence/sqlite/sqlite_storage.h"
#include "rules_engine/insights/insights_store.h"
#include "rules_engine/query_handler/tensor_query_handler.h"
#include "service/dashboard/insights_routes.h"
#include "service/dashboard/json_numbers.h"

namespace fs = std::filesystem;
using namespace debugplane;

namespace {

constexpr double kStart = 1795300000.0;  // 2026-11-21 22:26:40 UTC.

// "12.34" for 0 <= v < 100000, without printf's cost.
void AppendValue(std::string& out, double v) {
  const int64_t hundredths = static_cast<int64_t>(v * 100 + 0.5);
  absl::StrAppend(&out, hundredths / 100, ".");
  const int64_t frac = hundredths % 100;
  out.push_back(static_cast<char>('0' + frac / 10));
  out.push_back(static_cast<char>('0' + frac % 10));
}

void AppendLine(std::string& out, const char* type, const std::string& name, const char* dim,
                double value, const std::string& timestamp) {
  absl::StrAppend(&out, "{\"Type\": \"", type, "\", \"Name\": \"", name, "\", \"Dimension\": \"",
                  dim, "\", \"Value\": ");
  AppendValue(out, value);
  absl::StrAppend(&out, ", \"NodeId\": \"algo-1\", \"Timestamp\": ", timestamp, "}\n");
}

// smdebug's layout: <profiler>/system/incremental/<YYYYMMDDHH>/<epoch>.<node>.json,
// one file per minute. Returns the bytes written (0 when reused).
int64_t Generate(const fs::path& profiler, int hours, int cpus, int gpus) {
  const fs::path marker =
      profiler / absl::StrCat(".generated-", hours, "h-", cpus, "c-", gpus, "g");
  if (fs::exists(marker)) return 0;
  std::vector<std::string> cpu_names, gpu_names;
  for (int c = 0; c < cpus; ++c) cpu_names.push_back(absl::StrCat("cpu", c));
  for (int g = 0; g < gpus; ++g) gpu_names.push_back(absl::StrCat("gpu", g));
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> noise(-5, 5);
  int64_t bytes = 0;
  std::string out;
  for (int minute = 0; minute < hours * 60; ++minute) {
    const double t0 = kStart + 60.0 * minute;
    const std::string hour = absl::FormatTime(
        "%Y%m%d%H", absl::FromUnixSeconds(static_cast<int64_t>(t0)), absl::UTCTimeZone());
    out.clear();
    for (int i = 0; i < 600; ++i) {
      const std::string ts = absl::StrFormat("%.1f", t0 + i * 0.1);
      // A daily wave plus noise, so buckets differ.
      const double base = 50 + 30 * std::sin((t0 + i * 0.1 - kStart) / 3600.0);
      for (int c = 0; c < cpus; ++c) {
        AppendLine(out, "cpu", cpu_names[c], "CPUUtilization",
                   std::clamp(base + noise(rng) + c % 7, 0.0, 100.0), ts);
      }
      for (int g = 0; g < gpus; ++g) {
        AppendLine(out, "gpu", gpu_names[g], "GPUUtilization",
                   std::clamp(100 - base + noise(rng), 0.0, 100.0), ts);
        AppendLine(out, "gpu", gpu_names[g], "GPUMemoryUtilization",
                   std::clamp(40 + noise(rng), 0.0, 100.0), ts);
      }
      AppendLine(out, "cpu", "cpu", "MemoryUsedPercent", std::clamp(60 + noise(rng), 0.0, 100.0),
                 ts);
      AppendLine(out, "cpu", "cpu", "I/OWaitPercentage", std::clamp(2 + noise(rng), 0.0, 100.0),
                 ts);
    }
    const fs::path file = profiler / "system" / "incremental" / hour /
                          absl::StrCat(static_cast<int64_t>(t0), ".algo-1.json");
    fs::create_directories(file.parent_path());
    std::ofstream(file, std::ios::binary) << out;
    bytes += static_cast<int64_t>(out.size());
  }
  std::ofstream(marker) << "done\n";
  return bytes;
}

class KeptResponse : public service::http::HttpResponder {
 public:
  struct Shared {
    absl::Notification done;
    service::http::HttpResponse response;
  };
  explicit KeptResponse(std::shared_ptr<Shared> shared) : shared_(std::move(shared)) {}
  void Respond(service::http::HttpResponse response) override {
    shared_->response = std::move(response);
    shared_->done.Notify();
  }

 private:
  std::shared_ptr<Shared> shared_;
};

struct Answer {
  double ms = 0;
  std::string body;
  int status = 0;
};

Answer Call(const service::dashboard::JobResource& resource, const std::string& query) {
  auto shared = std::make_shared<KeptResponse::Shared>();
  service::http::HttpRequest request;
  request.method = "GET";
  request.query = query;
  const absl::Time start = absl::Now();
  resource.handler(std::move(request), "bench", {}, std::make_unique<KeptResponse>(shared));
  shared->done.WaitForNotification();
  Answer a;
  a.ms = absl::ToDoubleMilliseconds(absl::Now() - start);
  a.status = shared->response.status;
  a.body = std::move(shared->response.body);
  return a;
}

// The ceiling: the same number of series and buckets, already reduced and
// rounded, in memory, written with the same JSON number writer as the route
// (service/dashboard/json_numbers.h): what serializing costs without the
// reduction, the pool hop and the refresh check.
double SerializeReduced(size_t series, size_t buckets, size_t* bytes) {
  std::vector<double> t(buckets), v(buckets);
  for (size_t i = 0; i < buckets; ++i) {
    t[i] = kStart + 86.4 * static_cast<double>(i);
    v[i] = std::round((50 + 30 * std::sin(static_cast<double>(i) / 100.0)) * 1000) / 1000;
  }
  const absl::Time start = absl::Now();
  auto array = [](std::string& out, const std::vector<double>& values) {
    out += '[';
    for (size_t i = 0; i < values.size(); ++i) {
      if (i > 0) out += ',';
      service::dashboard::AppendJsonNumber(out, values[i]);
    }
    out += ']';
  };
  std::string ts;
  array(ts, t);
  std::string body = "{\"series\":[";
  for (size_t s = 0; s < series; ++s) {
    if (s > 0) body += ',';
    body += "{\"node\":\"algo-1\",\"metric\":\"cpu\",\"device\":";
    service::dashboard::AppendJsonString(body, absl::StrCat("cpu", s));
    body += ",\"t\":";
    body += ts;
    for (const char* key : {",\"min\":", ",\"max\":", ",\"mean\":"}) {
      body += key;
      array(body, v);
    }
    body += '}';
  }
  body += "]}";
  *bytes = body.size();
  return absl::ToDoubleMilliseconds(absl::Now() - start);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("dashboard data routes on a big job");
  int hours = 24, cpus = 96, gpus = 8, rounds = 20;
  std::string dir_flag;
  app.add_option("--hours", hours)->check(CLI::Range(1, 24 * 30));
  app.add_option("--cpus", cpus)->check(CLI::Range(1, 1024));
  app.add_option("--gpus", gpus)->check(CLI::Range(0, 64));
  app.add_option("--rounds", rounds)->check(CLI::Range(1, 1000));
  app.add_option("--dir", dir_flag, "keep the generated files here (reused)");
  CLI11_PARSE(app, argc, argv);

  const bool keep = !dir_flag.empty();
  const fs::path dir =
      keep ? fs::path(dir_flag)
           : fs::temp_directory_path() / absl::StrCat("dashboard_bench_", ::getpid());
  fs::create_directories(dir);
  const fs::path profiler = dir / "profiler";
  const absl::Time gen_start = absl::Now();
  const int64_t generated = Generate(profiler, hours, cpus, gpus);
  const int64_t lines = int64_t{hours} * 3600 * 10 * (cpus + 2 * gpus + 2);
  std::printf("job: 1 node, %d cores, %d GPUs, %d h of 100 ms samples: %lld metric lines%s\n", cpus,
              gpus, hours, static_cast<long long>(lines),
              generated ? absl::StrFormat(" (%.1f GB generated in %.0f s)", generated / 1e9,
                                          absl::ToDoubleSeconds(absl::Now() - gen_start))
                              .c_str()
                        : " (files reused)");

  fs::remove(dir / "jobs.db");
  auto storage = persistence::SqliteStorage::Open((dir / "jobs.db").string());
  if (!storage.ok()) {
    std::fprintf(stderr, "%s\n", std::string(storage.status().message()).c_str());
    return 1;
  }
  core::TrainingJobManagerOptions manager_options;
  manager_options.validation.data_roots = {dir};
  auto manager = core::TrainingJobManager::Create(*std::move(storage), manager_options);
  if (!manager.ok()) return 1;
  {
    v1::CreateTrainingJobRequest request;
    request.set_training_job_name("bench");
    request.set_role_arn("arn:aws:iam::111122223333:role/service-role/Bench");
    request.mutable_output_data_config()->set_s3_output_path("s3://bucket/out");
    request.mutable_profiler_config()->set_s3_output_path(profiler.string());
    auto* rule = request.add_profiler_rule_configurations();
    rule->set_rule_configuration_name("LowGPUUtilization");
    rule->set_rule_evaluator_image("builtin");
    (*rule->mutable_rule_parameters())["rule_to_invoke"] = "LowGPUUtilization";
    v1::CreateTrainingJobResponse response;
    absl::Notification created;
    (*manager)->CreateTrainingJob(request, &response, [&](absl::Status s) {
      if (!s.ok()) std::fprintf(stderr, "create: %s\n", std::string(s.message()).c_str());
      created.Notify();
    });
    created.WaitForNotification();
  }

  // The store follows the InProgress job from its start: ingest time is
  // until everything is read.
  const absl::Time ingest_start = absl::Now();
  rules_engine::insights::InsightsStoreOptions options;
  options.data_roots = {dir};
  rules_engine::insights::InsightsStore store(manager->get(), options);
  if (absl::Status s = store.RefreshNow("bench"); !s.ok()) return 1;
  const double ingest_s = absl::ToDoubleSeconds(absl::Now() - ingest_start);
  std::printf("ingest: %.1f s, %.2f M metric lines/s; store holds %.0f MB for the job\n", ingest_s,
              lines / ingest_s / 1e6, store.memory_bytes() / 1e6);

  rules_engine::TensorQueryOptions tensor_options;
  tensor_options.data_roots = {dir};
  rules_engine::TensorQueryHandler tensors(manager->get(), tensor_options);
  const std::vector<service::dashboard::JobResource> resources =
      service::dashboard::InsightsResources({&store, &tensors});
  auto find = [&](const std::string& name) -> const service::dashboard::JobResource& {
    for (const auto& r : resources) {
      if (r.resource == name) return r;
    }
    std::abort();
  };

  struct Query {
    const char* label;
    const char* resource;
    const char* query;
  };
  const Query queries[] = {
      {"overview", "overview", ""},
      {"nodes: all series, whole range, width 1000", "system", "width=1000"},
      {"nodes: heatmap of every core, width 1000", "system", "metric=cpu&node=algo-1&width=1000"},
  };
  std::printf("\n%-46s %9s %9s %9s %11s %9s %9s\n", "query (server time)", "p50 ms", "p90 ms",
              "max ms", "bytes", "ceil ms", "ceil/p50");
  for (const Query& q : queries) {
    std::vector<double> ms;
    Answer last;
    for (int i = 0; i < rounds; ++i) {
      last = Call(find(q.resource), q.query);
      if (last.status != 200) {
        std::fprintf(stderr, "%s: %d %s\n", q.label, last.status, last.body.c_str());
        return 1;
      }
      ms.push_back(last.ms);
    }
    const bench::Percentiles p = bench::Summarize(ms);
    std::string ceiling = "-", ratio = "-";
    if (std::string(q.resource) == "system") {
      const nlohmann::json body = nlohmann::json::parse(last.body);
      const size_t series = body["series"].size();
      const size_t buckets = series ? body["series"][0]["t"].size() : 0;
      std::vector<double> c;
      size_t bytes = 0;
      for (int i = 0; i < rounds; ++i) c.push_back(SerializeReduced(series, buckets, &bytes));
      const double c50 = bench::Summarize(c).p50;
      ceiling = absl::StrFormat("%.1f", c50);
      ratio = absl::StrFormat("%.2f", c50 / p.p50);
      std::printf("  (%zu series x %zu buckets; ceiling body %zu bytes)\n", series, buckets, bytes);
    }
    std::printf("%-46s %9.1f %9.1f %9.1f %11zu %9s %9s\n", q.label, p.p50, p.p90, p.max,
                last.body.size(), ceiling.c_str(), ratio.c_str());
  }

  store.Shutdown();
  (*manager)->Shutdown();
  if (!keep) fs::remove_all(dir);
  return 0;
}
