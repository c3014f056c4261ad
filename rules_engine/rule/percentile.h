// Percentiles of a rule's window of values, as the SageMaker rules compute
// them with numpy.percentile's default (method "linear"): the value at rank
// percent / 100 * (n - 1), interpolated linearly between the two order
// statistics around it. The one home of this semantics for the tensor rules
// and the profiler rules alike.
//
// (The report's and the dashboard's quantiles are nearest-rank over
// histograms, another semantics: ProfilerReportData::StepQuantileUs,
// PercentHistogram::Quantile.)

#ifndef DEBUGPLANE_RULES_ENGINE_RULE_PERCENTILE_H_
#define DEBUGPLANE_RULES_ENGINE_RULE_PERCENTILE_H_

#include <utility>
#include <vector>

namespace debugplane::rules_engine {

// numpy.percentile(values, percent) with linear interpolation; 0 for no
// values. `percent` in [0, 100]. The two order statistics are selected
// (nth_element), not sorted for, so `*values` is reordered: a caller that
// needs its order, or the same result for NaN-holding data whatever ran
// before, passes a copy.
double LinearInterpolatedPercentile(std::vector<double>* values, double percent);

// {LinearInterpolatedPercentile(copy, low), LinearInterpolatedPercentile(
// copy, high)} for `low` <= `high`, each on a fresh copy of `*values`, with
// one selection pass shared by both where that gives the same values (no NaN
// and no -0 among them); `*values` is reordered.
std::pair<double, double> LinearInterpolatedPercentiles(std::vector<double>* values, double low,
                                                        double high);

}  // namespace debugplane::rules_engine

#endif  // DEBUGPLANE_RULES_ENGINE_RULE_PERCENTILE_H_
