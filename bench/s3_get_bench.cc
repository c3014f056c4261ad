// The baseline of the object storage read bench (bench/object_storage_bench.py
// --read-rounds): plain GETs of every object a trial reader fetches (all
// objects under the given prefixes but training_job_end.ts, which readers
// only list), one after the other on one connection, with the store the
// server uses (objectstore/s3_object_store, configured from the
// environment as the server is: AWS_ENDPOINT_URL_S3, AWS_ACCESS_KEY_ID, ...).
//
//   s3_get_bench --bucket BUCKET --prefix P [--prefix P2 ...]
//
// Prints one JSON line: {"objects": N, "bytes": B, "get_seconds": T,
// "list_seconds": L}. Exit status 1 with the store's error on stderr.

#include <cstdio>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "objectstore/aws_config.h"
#include "objectstore/s3_object_store.h"

namespace debugplane::bench {
namespace {

int Run(const std::string& bucket, const std::vector<std::string>& prefixes) {
  absl::StatusOr<objectstore::S3Config> config =
      objectstore::LoadS3Config({}, objectstore::ProcessEnvironment());
  if (!config.ok()) {
    std::fprintf(stderr, "s3_get_bench: %s\n", config.status().ToString().c_str());
    return 1;
  }
  objectstore::S3ObjectStore::Options options;
  options.config = *config;
  options.bucket = bucket;
  absl::StatusOr<std::shared_ptr<objectstore::S3ObjectStore>> store =
      objectstore::S3ObjectStore::Create(options);
  if (!store.ok()) {
    std::fprintf(stderr, "s3_get_bench: %s\n", store.status().ToString().c_str());
    return 1;
  }
  const absl::Time list_start = absl::Now();
  std::vector<std::string> keys;
  for (const std::string& prefix : prefixes) {
    objectstore::ListOptions list;
    list.prefix = prefix;
    absl::StatusOr<objectstore::ListResult> listed = (*store)->ListAll(list);
    if (!listed.ok()) {
      std::fprintf(stderr, "s3_get_bench: %s\n", listed.status().ToString().c_str());
      return 1;
    }
    for (const objectstore::ObjectEntry& object : listed->objects) {
      if (!absl::EndsWith(object.key, "/training_job_end.ts")) keys.push_back(object.key);
    }
  }
  const absl::Duration list_time = absl::Now() - list_start;
  std::string content;
  uint64_t bytes = 0;
  const absl::Time get_start = absl::Now();
  for (const std::string& key : keys) {
    absl::Status read = (*store)->ReadRangeInto(key, 0, objectstore::kMaxReadBytes, &content);
    if (!read.ok()) {
      std::fprintf(stderr, "s3_get_bench: %s\n", read.ToString().c_str());
      return 1;
    }
    bytes += content.size();
  }
  const absl::Duration get_time = absl::Now() - get_start;
  std::printf(
      "{\"objects\": %zu, \"bytes\": %llu, \"get_seconds\": %.4f, \"list_seconds\": %.4f}\n",
      keys.size(), static_cast<unsigned long long>(bytes), absl::ToDoubleSeconds(get_time),
      absl::ToDoubleSeconds(list_time));
  return 0;
}

}  // namespace
}  // namespace debugplane::bench

int main(int argc, char** argv) {
  CLI::App app{"Plain GETs of the objects under some prefixes (object storage read baseline)"};
  std::string bucket;
  std::vector<std::string> prefixes;
  app.add_option("--bucket", bucket, "Bucket")->required();
  app.add_option("--prefix", prefixes, "Key prefix (ending in '/'); repeatable")->required();
  CLI11_PARSE(app, argc, argv);
  return debugplane::bench::Run(bucket, prefixes);
}
