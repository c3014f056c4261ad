// DescribeTrainingJob over the SageMaker HTTP API (AWS JSON 1.1, every
// request signed with SigV4 by libcurl's CURLOPT_AWS_SIGV4 and verified by
// the server) against the same call over gRPC on the same server (bearer
// token) and against a no-op handler on the same HTTP stack (libmicrohttpd,
// suspend/resume, the same signed requests, a reply of the same size, no
// authentication, parsing or lookup): the ceiling.
//
//   sagemaker_http_bench [--seconds 2] [--slices 3] [--callers 1,16,64] [--jobs 100]
//
// Everything runs in this process: the job manager over SQLite in a
// temporary directory, the HTTP listener (2 threads, as the server's
// default), the gRPC server, and closed-loop callers (one thread and one
// keep-alive connection each for HTTP; one shared channel for gRPC, as one
// client process would). A cell's time is cut into slices that rotate
// between the three targets, so that other load on the machine weighs on
// all alike.

#include <curl/curl.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "core/manager/training_job_manager.h"
#include "debugplane/v1/training_job.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "persistence/sqlite/sqlite_storage.h"
#include "service/auth/credential_authenticator.h"
#include "service/auth/credential_store.h"
#include "service/http/http_server.h"
#include "service/http/sagemaker_json.h"
#include "service/http/sagemaker_protocol.h"
#include "service/server.h"

namespace debugplane::bench {
namespace {

namespace fs = std::filesystem;

constexpr char kKeyId[] = "AKIDBENCH";
constexpr char kSecret[] = "bench-secret";

v1::CreateTrainingJobRequest JobRequest(const std::string& name) {
  v1::CreateTrainingJobRequest r;
  r.set_training_job_name(name);
  r.set_role_arn("arn:aws:iam::111122223333:role/service-role/AmazonSageMaker-ExecutionRole");
  auto* algorithm = r.mutable_algorithm_specification();
  algorithm->set_training_image(
      "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:1.13-gpu-py39");
  algorithm->set_training_input_mode("File");
  (*r.mutable_hyper_parameters())["epochs"] = "10";
  r.mutable_output_data_config()->set_s3_output_path("s3://bucket/bench/output");
  auto* hook = r.mutable_debug_hook_config();
  hook->set_s3_output_path("s3://bucket/bench/debug-output");
  for (const char* rule_name : {"VanishingGradient", "LossNotDecreasing"}) {
    auto* rule = r.add_debug_rule_configurations();
    rule->set_rule_configuration_name(rule_name);
    rule->set_rule_evaluator_image(
        "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest");
    (*rule->mutable_rule_parameters())["rule_to_invoke"] = rule_name;
  }
  r.mutable_profiler_config()->set_profiling_interval_in_milliseconds(500);
  r.mutable_resource_config()->set_instance_type("ml.p3.2xlarge");
  r.mutable_resource_config()->set_instance_count(1);
  return r;
}

struct Sample {
  std::vector<int64_t> latencies_ns;
  absl::Duration elapsed;
  int64_t errors = 0;
};

struct Result {
  double ops_per_second = 0;
  double p50_us = 0;
  double p99_us = 0;
  int64_t errors = 0;
};

Result Summarize(const std::vector<Sample>& samples) {
  std::vector<int64_t> all;
  absl::Duration elapsed;
  Result result;
  for (const Sample& sample : samples) {
    all.insert(all.end(), sample.latencies_ns.begin(), sample.latencies_ns.end());
    elapsed += sample.elapsed;
    result.errors += sample.errors;
  }
  if (all.empty()) return result;
  std::sort(all.begin(), all.end());
  result.ops_per_second = all.size() / absl::ToDoubleSeconds(elapsed);
  result.p50_us = all[all.size() / 2] / 1000.0;
  result.p99_us = all[std::min(all.size() - 1, all.size() * 99 / 100)] / 1000.0;
  return result;
}

size_t Discard(char* data, size_t size, size_t count, void* body) {
  static_cast<std::string*>(body)->append(data, size * count);
  return size * count;
}

// Runs `callers` threads, each calling `call(caller_index)` (true on success)
// in a closed loop for `duration`.
template <typename Call>
Sample RunCallers(int callers, absl::Duration duration, Call call) {
  std::vector<std::vector<int64_t>> latencies(callers);
  std::atomic<int64_t> errors{0};
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + duration;
  std::vector<std::thread> threads;
  for (int i = 0; i < callers; ++i) {
    threads.emplace_back([&, i] {
      auto state = call.Prepare(i);
      while (absl::Now() < deadline) {
        const absl::Time sent = absl::Now();
        if (call.Once(state, i)) {
          latencies[i].push_back(absl::ToInt64Nanoseconds(absl::Now() - sent));
        } else {
          errors.fetch_add(1);
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  Sample sample;
  sample.elapsed = absl::Now() - start;
  for (auto& l : latencies)
    sample.latencies_ns.insert(sample.latencies_ns.end(), l.begin(), l.end());
  sample.errors = errors.load();
  return sample;
}

// Signed DescribeTrainingJob POSTs over one keep-alive connection per caller.
struct HttpDescribe {
  int port;
  int jobs;
  struct State {
    CURL* curl = nullptr;
    curl_slist* headers = nullptr;
    std::string body;
    std::string reply;
    ~State() {
      curl_slist_free_all(headers);
      if (curl != nullptr) curl_easy_cleanup(curl);
    }
  };
  std::unique_ptr<State> Prepare(int caller) const {
    auto state = std::make_unique<State>();
    state->curl = curl_easy_init();
    const std::string url = absl::StrCat("http://127.0.0.1:", port, "/");
    curl_easy_setopt(state->curl, CURLOPT_URL, url.c_str());
    state->headers = curl_slist_append(nullptr, "X-Amz-Target: SageMaker.DescribeTrainingJob");
    state->headers = curl_slist_append(state->headers, "Content-Type: application/x-amz-json-1.1");
    curl_easy_setopt(state->curl, CURLOPT_HTTPHEADER, state->headers);
    curl_easy_setopt(state->curl, CURLOPT_AWS_SIGV4, "aws:amz:us-east-1:sagemaker");
    curl_easy_setopt(state->curl, CURLOPT_USERPWD, absl::StrCat(kKeyId, ":", kSecret).c_str());
    state->body = absl::StrCat(R"({"TrainingJobName": "bench-)", caller % jobs, R"("})");
    curl_easy_setopt(state->curl, CURLOPT_POSTFIELDS, state->body.c_str());
    curl_easy_setopt(state->curl, CURLOPT_WRITEFUNCTION, &Discard);
    curl_easy_setopt(state->curl, CURLOPT_WRITEDATA, &state->reply);
    return state;
  }
  bool Once(std::unique_ptr<State>& state, int) const {
    state->reply.clear();
    if (curl_easy_perform(state->curl) != CURLE_OK) return false;
    long status = 0;
    curl_easy_getinfo(state->curl, CURLINFO_RESPONSE_CODE, &status);
    return status == 200 && state->reply.size() > 100;
  }
};

struct GrpcDescribe {
  v1::TrainingJobService::Stub* stub;
  int jobs;
  int Prepare(int caller) const { return caller % jobs; }
  bool Once(int job, int) const {
    grpc::ClientContext context;
    context.AddMetadata("authorization", absl::StrCat("Bearer ", kKeyId, ":", kSecret));
    v1::DescribeTrainingJobRequest request;
    request.set_training_job_name(absl::StrCat("bench-", job));
    v1::DescribeTrainingJobResponse response;
    return stub->DescribeTrainingJob(&context, request, &response).ok();
  }
};

std::vector<int> ParseCallers(const std::string& text) {
  std::vector<int> callers;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int n = 0;
    if (absl::SimpleAtoi(part, &n) && n > 0) callers.push_back(n);
  }
  return callers;
}

int Main(int argc, char** argv) {
  CLI::App app{"sagemaker_http_bench"};
  double seconds = 2;
  int slices = 3;
  int jobs = 100;
  std::string callers_text = "1,16,64";
  app.add_option("--seconds", seconds, "Seconds per target per cell");
  app.add_option("--slices", slices, "Slices each cell's time is cut into");
  app.add_option("--callers", callers_text, "Concurrent callers, comma-separated");
  app.add_option("--jobs", jobs, "Jobs created before measuring");
  CLI11_PARSE(app, argc, argv);
  curl_global_init(CURL_GLOBAL_ALL);

  const fs::path dir = fs::temp_directory_path() / absl::StrCat("dp-http-bench-", getpid());
  fs::create_directories(dir);
  const std::string credentials = (dir / "credentials").string();
  std::ofstream(credentials) << "admin " << kKeyId << " " << kSecret << "\n";
  chmod(credentials.c_str(), 0600);
  auto store = service::auth::CredentialStore::Open(credentials);
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", std::string(store.status().message()).c_str());
    return 1;
  }
  std::shared_ptr<const service::auth::Authenticator> authenticator =
      service::auth::NewAuthenticator(*store);
  auto storage = persistence::SqliteStorage::Open((dir / "jobs.db").string());
  auto manager = core::TrainingJobManager::Create(*std::move(storage), {});
  if (!manager.ok()) {
    std::fprintf(stderr, "%s\n", std::string(manager.status().message()).c_str());
    return 1;
  }
  for (int i = 0; i < jobs; ++i) {
    absl::Notification done;
    v1::CreateTrainingJobResponse response;
    // Must outlive the (asynchronous) call.
    const v1::CreateTrainingJobRequest request = JobRequest(absl::StrCat("bench-", i));
    (*manager)->CreateTrainingJob(request, &response, [&done](absl::Status) { done.Notify(); });
    done.WaitForNotification();
  }

  service::http::SageMakerProtocol protocol(manager->get(), authenticator.get());
  auto real_http =
      service::http::HttpServer::Start({.listen_address = "127.0.0.1:0"}, {protocol.Route()});
  // The ceiling answers with a Describe reply of the real size.
  v1::DescribeTrainingJobRequest sample_request;
  sample_request.set_training_job_name("bench-0");
  v1::DescribeTrainingJobResponse sample_response;
  absl::Notification described;
  (*manager)->DescribeTrainingJob(sample_request, &sample_response,
                                  [&described](absl::Status) { described.Notify(); });
  described.WaitForNotification();
  const std::string canned = service::http::ToSageMakerJson(sample_response);
  auto noop_http = service::http::HttpServer::Start(
      {.listen_address = "127.0.0.1:0"},
      {{.method = "POST",
        .path = "/",
        .handler = [&canned](service::http::HttpRequest,
                             std::unique_ptr<service::http::HttpResponder> responder) {
          responder->Respond({.status = 200,
                              .headers = {{"Content-Type", "application/x-amz-json-1.1"}},
                              .body = canned});
        }}});
  service::GrpcServerOptions grpc_options;
  grpc_options.listen_address = "127.0.0.1:0";
  grpc_options.authenticator = authenticator;
  auto grpc_server = service::GrpcServer::Start(grpc_options, manager->get());
  if (!real_http.ok() || !noop_http.ok() || !grpc_server.ok()) {
    std::fprintf(stderr, "a server did not start\n");
    return 1;
  }
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*grpc_server)->port()),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1::TrainingJobService::NewStub(channel);

  std::printf("DescribeTrainingJob, %d jobs, reply %zu bytes, %d x %.1f s per target per cell\n",
              jobs, canned.size(), slices, seconds / slices);
  std::printf("%7s | %-22s | %-22s | %-22s | %9s %9s\n", "callers", "HTTP+SigV4 ops/s p50 p99",
              "gRPC ops/s p50 p99", "no-op HTTP ops/s p50 p99", "HTTP/noop", "HTTP/gRPC");
  const absl::Duration slice = absl::Seconds(seconds / slices);
  for (int callers : ParseCallers(callers_text)) {
    std::vector<Sample> http, grpc_samples, noop;
    for (int s = 0; s < slices; ++s) {
      http.push_back(RunCallers(callers, slice, HttpDescribe{(*real_http)->port(), jobs}));
      noop.push_back(RunCallers(callers, slice, HttpDescribe{(*noop_http)->port(), jobs}));
      grpc_samples.push_back(RunCallers(callers, slice, GrpcDescribe{stub.get(), jobs}));
    }
    const Result h = Summarize(http), g = Summarize(grpc_samples), n = Summarize(noop);
    std::printf("%7d | %8.0f %6.0f %6.0f | %8.0f %6.0f %6.0f | %8.0f %6.0f %6.0f | %8.0f%% %8.0f%%",
                callers, h.ops_per_second, h.p50_us, h.p99_us, g.ops_per_second, g.p50_us, g.p99_us,
                n.ops_per_second, n.p50_us, n.p99_us,
                100.0 * h.ops_per_second / std::max(1.0, n.ops_per_second),
                100.0 * h.ops_per_second / std::max(1.0, g.ops_per_second));
    if (h.errors + g.errors + n.errors > 0) {
      std::printf("  errors: http %lld grpc %lld noop %lld", static_cast<long long>(h.errors),
                  static_cast<long long>(g.errors), static_cast<long long>(n.errors));
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  (*real_http)->Shutdown(absl::Seconds(1));
  (*noop_http)->Shutdown(absl::Seconds(1));
  (*grpc_server)->Shutdown(absl::Seconds(1));
  (*grpc_server)->Wait();
  (*manager)->Shutdown();
  fs::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace debugplane::bench

int main(int argc, char** argv) { return debugplane::bench::Main(argc, argv); }
