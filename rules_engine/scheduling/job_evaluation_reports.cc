// JobEvaluator: the reports debugging rules render themselves
// (CreateXgboostReport), written through the ReportWriter like
// ProfilerReport's: throttled while steps arrive, final once the rule
// concluded.

#include <string>

#include "core/replication/lease_keeper.h"
#include "rules_engine/scheduling/job_evaluation.h"
#include "spdlog/spdlog.h"

namespace debugplane::rules_engine {

void JobEvaluator::WriteRuleReport(JobEvaluation& evaluation, size_t rule_index,
                                   bool final) const {
  JobEvaluation::RuleRun& run = evaluation.rules[rule_index];
  const std::string stem = run.rule->ReportFileStem();
  if (stem.empty() || !reports_->enabled() || run.report_schedule.final_written) return;
  // Another replica holds the job now: its reports are that replica's.
  const core::WriteFence fence = core::FenceForWrite(options_.leases, evaluation.job_name);
  if (!fence.allowed) return;
  const Rule& rule = *run.rule;
  const absl::Status written = reports_->WriteRendered(
      evaluation.job_name, run.configuration_name, stem,
      [&rule](const RuleReportContext& context) { return rule.RenderReport(context); }, final,
      fence.fence, run.report_schedule);
  if (!written.ok()) {
    spdlog::warn("job '{}': writing the report of rule '{}' failed: {}", evaluation.job_name,
                 run.configuration_name, written.ToString());
  }
}

void JobEvaluator::WriteDueRuleReports(JobEvaluation& evaluation) const {
  // Training ended: the final report follows the read that completes the
  // trial. A live one now would only replace a final one that an evaluation
  // of the same job wrote a moment ago (the scheduler evaluates a job again
  // when a commit shows a rule still InProgress before its verdict is).
  if (evaluation.reader != nullptr && evaluation.reader->summary().training_ended) return;
  for (size_t i = 0; i < evaluation.rules.size(); ++i) {
    const JobEvaluation::RuleRun& run = evaluation.rules[i];
    if (run.done || !reports_->Due(run.report_schedule)) continue;
    if (run.rule->ReportFileStem().empty()) continue;
    WriteRuleReport(evaluation, i, /*final=*/false);
  }
}

}  // namespace debugplane::rules_engine
