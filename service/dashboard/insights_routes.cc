#include "service/dashboard/insights_routes.h"

#include <atomic>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "rules_engine/insights/rule_insights.h"
#include "service/dashboard/gzip_reply.h"
#include "service/dashboard/insights_query.h"
#include "service/dashboard/json_numbers.h"

namespace debugplane::service::dashboard {

namespace {

using nlohmann::json;
using rules_engine::insights::JobView;
namespace insights = rules_engine::insights;

// Values to a thousandth: enough for a chart, and short in JSON.
double Round3(double v) { return std::round(v * 1000) / 1000; }

json OptionalNumber(const std::optional<double>& v) {
  return v.has_value() ? json(Round3(*v)) : json(nullptr);
}

std::string Dump(const json& j) {
  // Training data may hold invalid UTF-8 (names): replaced, never thrown on.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

json Problems(const JobView& view) {
  json problems = json::array();
  if (!view.problem.empty()) problems.push_back(view.problem);
  for (const std::string& e : view.read_errors) problems.push_back(e);
  return problems;
}

json BucketTimes(const insights::LevelChoice& buckets) {
  json t = json::array();
  const int64_t n = buckets.output_buckets();
  for (int64_t i = 0; i < n; ++i) t.push_back(buckets.output_start(i));
  return t;
}

json SummaryJson(const JobView& view) {
  const insights::TrainingSummary s = view.data->Summary(view.training_ended);
  json summary = {{"start", OptionalNumber(s.start)},
                  {"end", OptionalNumber(s.end)},
                  {"durationSeconds", nullptr},
                  {"phases", json::array()}};
  if (!s.start.has_value()) return summary;
  const double duration = s.latest - *s.start;
  summary["durationSeconds"] = Round3(duration);
  for (const insights::TrainingPhase& p : s.phases) {
    const double seconds = p.end - p.start;
    summary["phases"].push_back({{"name", p.name},
                                 {"start", Round3(p.start)},
                                 {"end", Round3(p.end)},
                                 {"seconds", Round3(seconds)},
                                 {"share", duration > 0 ? Round3(seconds / duration) : 0.0}});
  }
  return summary;
}

json UtilizationJson(const JobView& view) {
  json out = json::array();
  for (const insights::Utilization& u : view.data->UtilizationSummary()) {
    const bool percent = insights::IsPercent(u.metric);
    json entry = {{"node", u.node},
                  {"metric", percent ? std::string(insights::MetricName(u.metric)) : "network"},
                  {"unit", percent ? "percent" : "bytes_per_second"},
                  {"min", Round3(u.min)},
                  {"max", Round3(u.max)},
                  {"p99", OptionalNumber(u.p99)},
                  {"p90", OptionalNumber(u.p90)},
                  {"p50", OptionalNumber(u.p50)}};
    if (!percent) entry["direction"] = u.metric == insights::Metric::kNetworkRx ? "rx" : "tx";
    out.push_back(std::move(entry));
  }
  return out;
}

json OperationsJson(const JobView& view) {
  json out = json::array();
  for (const insights::Operation& op : view.data->TopOperations()) {
    out.push_back({{"name", op.name},
                   {"phase", std::string(insights::PhaseName(op.phase))},
                   {"totalSeconds", Round3(op.total_seconds)},
                   {"count", op.count},
                   {"share", Round3(op.share)}});
  }
  return out;
}

json InsightsJson(const JobView& view) {
  json out = json::array();
  for (const insights::RuleInsight& r : insights::RuleInsightsOf(*view.record)) {
    json found = nullptr;
    if (r.found.has_value()) {
      found = {{"step", r.found->step ? json(*r.found->step) : json(nullptr)},
               {"tensor", r.found->tensor.empty() ? json(nullptr) : json(r.found->tensor)},
               {"value", r.found->value ? json(*r.found->value) : json(nullptr)},
               {"message", r.found->message}};
    }
    out.push_back({{"rule", r.rule},
                   {"kind", r.kind},
                   {"status", r.status},
                   {"checks", r.checks},
                   {"parameters", r.parameters},
                   {"found", std::move(found)},
                   {"suggestion", r.suggestion},
                   {"report", r.report}});
  }
  return out;
}

// Runs `reply(view)` on the store's pool and answers with its JSON (200),
// gzipped there when `accept_encoding` allows, or the store's error.
template <typename Reply>
void AnswerWithView(insights::InsightsStore* store, const std::string& job_name,
                    std::string accept_encoding, std::shared_ptr<http::HttpResponder> responder,
                    Reply reply) {
  store->WithJob(job_name, [responder, accept_encoding = std::move(accept_encoding),
                            reply = std::move(reply)](absl::StatusOr<JobView> view) mutable {
    if (!view.ok()) {
      responder->Respond(JsonErrorResponse(view.status()));
      return;
    }
    http::HttpResponse response = JsonResponse(200, reply(*view));
    GzipIfAccepted(accept_encoding, response);
    responder->Respond(std::move(response));
  });
}

JobResource Resource(std::string name, auth::Action action,
                     decltype(JobResource::handler) handler) {
  return JobResource{"GET", std::move(name), action, std::move(handler)};
}

std::string ModeName(v1::TensorMode::Value mode) {
  return mode == v1::TensorMode::TENSOR_MODE_UNSPECIFIED ? "ALL" : v1::TensorMode::Value_Name(mode);
}

}  // namespace

std::string OverviewJson(const JobView& view) {
  json out = {{"summary", SummaryJson(view)},
              {"utilization", UtilizationJson(view)},
              {"operations", OperationsJson(view)},
              {"insights", InsightsJson(view)},
              {"problems", Problems(view)}};
  return Dump(out);
}

namespace {

// The start of each output bucket, as a JSON array.
std::string BucketStartsJson(const insights::SystemSeries& system) {
  const int64_t bucket_count = system.buckets.output_buckets();
  std::string starts = "[";
  for (int64_t i = 0; i < bucket_count; ++i) {
    if (i > 0) starts += ',';
    AppendJsonNumber(starts, system.buckets.output_start(i));
  }
  starts += ']';
  return starts;
}

// One of min, max, mean per bucket (`value` of its cell), as a JSON array;
// null for a bucket without samples.
template <typename Value>
void AppendCellValues(std::string& out, const std::vector<insights::SampleCell>& cells,
                      Value value) {
  out += '[';
  for (size_t i = 0; i < cells.size(); ++i) {
    if (i > 0) out += ',';
    if (cells[i].count == 0) {
      out += "null";
    } else {
      AppendJsonNumber(out, Round3(value(cells[i])));
    }
  }
  out += ']';
}

// One series: its node, metric and device, then the arrays `fields` names:
// the bucket starts `starts` and its min, max and mean per bucket.
void AppendSeriesJson(std::string& out, const insights::ReducedSeries& series,
                      const std::string& starts, const SystemFields& fields) {
  out += "{\"node\":";
  AppendJsonString(out, series.key.node);
  out += ",\"metric\":\"";
  absl::StrAppend(&out, insights::MetricName(series.key.metric));
  out += "\",\"device\":";
  AppendJsonString(out, series.key.device);
  if (fields.t) {
    out += ",\"t\":";
    out += starts;
  }
  if (fields.min) {
    out += ",\"min\":";
    AppendCellValues(out, series.cells,
                     [](const insights::SampleCell& c) { return static_cast<double>(c.min); });
  }
  if (fields.max) {
    out += ",\"max\":";
    AppendCellValues(out, series.cells,
                     [](const insights::SampleCell& c) { return static_cast<double>(c.max); });
  }
  if (fields.mean) {
    out += ",\"mean\":";
    AppendCellValues(out, series.cells, [](const insights::SampleCell& c) {
      return static_cast<double>(c.sum) / static_cast<double>(c.count);
    });
  }
  out += '}';
}

}  // namespace

std::string SystemJson(const JobView& view, const insights::SystemQuery& query,
                       const SystemFields& fields) {
  // Written directly (not through a json tree): the Nodes view asks for
  // every series at up to 4000 buckets.
  const insights::SystemSeries system = view.data->QuerySystem(query);
  const std::string starts = BucketStartsJson(system);
  const size_t arrays = (fields.min ? 1 : 0) + (fields.max ? 1 : 0) + (fields.mean ? 1 : 0);
  std::string out;
  out.reserve(system.series.size() *
                  ((fields.t ? starts.size() : 0) +
                   static_cast<size_t>(system.buckets.output_buckets()) * 8 * arrays + 64) +
              starts.size() + 256);
  out += "{\"start\":";
  AppendJsonNumber(out, system.start);
  out += ",\"end\":";
  AppendJsonNumber(out, system.end);
  out += ",\"bucketSeconds\":";
  AppendJsonNumber(out, system.buckets.bucket_seconds());
  out += ",\"nodes\":";
  out += Dump(system.nodes);
  out += ",\"t\":";
  out += starts;
  out += ",\"series\":[";
  for (size_t i = 0; i < system.series.size(); ++i) {
    if (i > 0) out += ',';
    AppendSeriesJson(out, system.series[i], starts, fields);
  }
  out += "],\"problems\":";
  out += Dump(Problems(view));
  out += '}';
  return out;
}

std::string FrameworkJson(const JobView& view, const insights::TimeRange& range, int width) {
  const insights::FrameworkSeries f = view.data->QueryFramework(range, width);
  const double bucket = f.buckets.bucket_seconds();
  const json t = BucketTimes(f.buckets);
  json phases = json::array();
  for (int i = 0; i < insights::kPhaseCount; ++i) {
    json busy = json::array();
    // Overlapping events of one phase (threads) could pass the bucket.
    for (double b : f.busy[i]) busy.push_back(Round3(std::min(1.0, b / bucket)));
    phases.push_back({{"phase", std::string(insights::PhaseName(static_cast<insights::Phase>(i)))},
                      {"t", t},
                      {"busy", std::move(busy)}});
  }
  json steps = json::array();
  for (const insights::StepRecord& s : f.steps) {
    steps.push_back({{"step", s.step >= 0 ? json(s.step) : json(nullptr)},
                     {"start", s.start},
                     {"end", s.end},
                     // Microseconds: a small model's steps take well under 1 ms.
                     {"seconds", std::round((s.end - s.start) * 1e6) / 1e6},
                     {"node", s.node},
                     {"mode", s.mode}});
  }
  json out = {{"start", f.start},
              {"end", f.end},
              {"bucketSeconds", bucket},
              {"phases", std::move(phases)},
              {"steps", std::move(steps)}};
  return Dump(out);
}

std::string TensorsJson(const v1::ListTensorsResponse& response) {
  json collections = json::array();
  for (const v1::CollectionSummary& c : response.collections()) {
    collections.push_back(
        {{"name", c.collection_name()},
         {"tensors", std::vector<std::string>(c.tensor_names().begin(), c.tensor_names().end())}});
  }
  json tensors = json::array();
  for (const v1::TensorSummary& t : response.tensors()) {
    json steps = json::object();
    for (const v1::TensorModeSteps& m : t.modes()) {
      steps[ModeName(m.mode())] = {m.first_step(), m.last_step(), m.step_count()};
    }
    tensors.push_back(
        {{"name", t.tensor_name()},
         {"collections", std::vector<std::string>(t.collections().begin(), t.collections().end())},
         {"shape", std::vector<int64_t>(t.shape().begin(), t.shape().end())},
         {"steps", std::move(steps)},
         {"histogram", t.histogram()},
         {"series", t.series_name().empty() ? json(nullptr) : json(t.series_name())}});
  }
  return Dump({{"collections", std::move(collections)}, {"tensors", std::move(tensors)}});
}

std::string TensorJson(const std::string& name,
                       const std::vector<v1::TensorValuesResponse>& messages) {
  // One series per mode, in the order modes first appear.
  std::vector<v1::TensorMode::Value> order;
  std::map<v1::TensorMode::Value, json> series;
  auto optional = [](bool has, double v) { return has ? json(v) : json(nullptr); };
  for (const v1::TensorValuesResponse& m : messages) {
    for (const v1::TensorPoint& p : m.points()) {
      auto [it, inserted] = series.try_emplace(p.mode());
      json& s = it->second;
      if (inserted) {
        order.push_back(p.mode());
        s = {{"mode", ModeName(p.mode())}, {"steps", json::array()}, {"scalar", p.has_value()}};
        if (p.has_value()) {
          s["value"] = json::array();
        } else {
          for (const char* k : {"mean", "norm", "min", "max"}) s[k] = json::array();
        }
      }
      s["steps"].push_back(p.has_step() ? json(p.step()) : json(nullptr));
      if (s["scalar"].get<bool>()) {
        s["value"].push_back(optional(p.has_value(), p.value()));
      } else {
        s["mean"].push_back(optional(p.has_mean(), p.mean()));
        s["norm"].push_back(optional(p.has_norm(), p.norm()));
        s["min"].push_back(optional(p.has_min(), p.min()));
        s["max"].push_back(optional(p.has_max(), p.max()));
      }
    }
  }
  json out = {{"name", name}, {"series", json::array()}};
  for (v1::TensorMode::Value mode : order) out["series"].push_back(std::move(series[mode]));
  return Dump(out);
}

namespace {

// The reply a view resource gives from the job's view.
using ViewReply = std::function<std::string(const JobView&)>;

// A resource answered from the job's view (kDescribeTrainingJob):
// `reply_for(query, &reply)` parses the request's query into the reply to
// give; a ParamError is answered as such.
template <typename ReplyFor>
JobResource ViewResource(std::string name, insights::InsightsStore* store, ReplyFor reply_for) {
  return Resource(std::move(name), auth::Action::kDescribeTrainingJob,
                  [store, reply_for](http::HttpRequest request, std::string job, auth::Principal,
                                     std::unique_ptr<http::HttpResponder> responder) {
                    ViewReply reply;
                    if (ParamError e = reply_for(request.query, &reply); !e.ok()) {
                      responder->Respond(JsonErrorResponse(e.status, e.field));
                      return;
                    }
                    AnswerWithView(store, job, std::string(request.Header("Accept-Encoding")),
                                   std::shared_ptr<http::HttpResponder>(std::move(responder)),
                                   std::move(reply));
                  });
}

// /api/jobs/NAME/overview: the job's profile at a glance (OverviewJson).
JobResource OverviewResource(insights::InsightsStore* store) {
  return ViewResource("overview", store, [](absl::string_view, ViewReply* reply) {
    *reply = [](const JobView& view) { return OverviewJson(view); };
    return ParamError{};
  });
}

// /api/jobs/NAME/system: the system metrics' series (SystemJson).
JobResource SystemResource(insights::InsightsStore* store) {
  return ViewResource("system", store, [](absl::string_view query, ViewReply* reply) {
    insights::SystemQuery parsed;
    SystemFields fields;
    ParamError error = ParseSystemQuery(query, &parsed, &fields);
    *reply = [parsed, fields](const JobView& view) { return SystemJson(view, parsed, fields); };
    return error;
  });
}

// /api/jobs/NAME/framework: the framework phases (FrameworkJson).
JobResource FrameworkResource(insights::InsightsStore* store) {
  return ViewResource("framework", store, [](absl::string_view query, ViewReply* reply) {
    insights::TimeRange range;
    int width = kDefaultWidth;
    ParamError error = ParseFrameworkQuery(query, &range, &width);
    *reply = [range, width](const JobView& view) { return FrameworkJson(view, range, width); };
    return error;
  });
}

// /api/jobs/NAME/tensors: the tensors the job saved (TensorsJson).
JobResource TensorsResource(rules_engine::TensorQueryHandler* tensors) {
  return Resource("tensors", auth::Action::kQueryTensors,
                  [tensors](http::HttpRequest request, std::string job, auth::Principal,
                            std::unique_ptr<http::HttpResponder> responder) {
                    std::map<std::string, std::string> params;
                    if (ParamError e = ParseQueryString(request.query, {}, &params); !e.ok()) {
                      responder->Respond(JsonErrorResponse(e.status, e.field));
                      return;
                    }
                    auto list = std::make_shared<v1::ListTensorsRequest>();
                    list->set_training_job_name(job);
                    auto response = std::make_shared<v1::ListTensorsResponse>();
                    std::shared_ptr<http::HttpResponder> shared(std::move(responder));
                    tensors->ListTensors(
                        *list, response.get(),
                        [shared, response, list](const absl::Status& status) {
                          if (!status.ok()) {
                            shared->Respond(JsonErrorResponse(status));
                            return;
                          }
                          shared->Respond(JsonResponse(200, TensorsJson(*response)));
                        });
                  });
}

// /api/jobs/NAME/tensor: one tensor's values by step (TensorJson).
JobResource TensorResource(rules_engine::TensorQueryHandler* tensors) {
  return Resource(
      "tensor", auth::Action::kQueryTensors,
      [tensors](http::HttpRequest request, std::string job, auth::Principal,
                std::unique_ptr<http::HttpResponder> responder) {
        v1::GetTensorValuesRequest values;
        if (ParamError e = ParseTensorQuery(request.query, job, &values); !e.ok()) {
          responder->Respond(JsonErrorResponse(e.status, e.field));
          return;
        }
        std::shared_ptr<http::HttpResponder> shared(std::move(responder));
        const std::string name = values.tensor_name();
        tensors->GetTensorValues(
            values, std::make_shared<const std::atomic<bool>>(false),
            [shared, name](absl::StatusOr<std::vector<v1::TensorValuesResponse>> messages) {
              if (!messages.ok()) {
                shared->Respond(JsonErrorResponse(messages.status()));
                return;
              }
              shared->Respond(JsonResponse(200, TensorJson(name, *messages)));
            });
      });
}

}  // namespace

std::vector<JobResource> InsightsResources(InsightsRouteDeps deps) {
  return {OverviewResource(deps.store), SystemResource(deps.store), FrameworkResource(deps.store),
          TensorsResource(deps.tensors), TensorResource(deps.tensors)};
}

}  // namespace debugplane::service::dashboard
