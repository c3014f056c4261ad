#!/usr/bin/env bash
# Idle scale (issue 3): N jobs with 5 built-in rules each, all waiting for
# training data that has not arrived, on the real server. Prints the server's
# CPU use over a window and its resident memory. With PROFILER_REPORT=1 each
# job also has a ProfilerReport (all ten profiler rules and its report) on a
# profiler directory with no data yet (issue 5).
#   [PROFILER_REPORT=1] bench/idle_scale.sh [BUILD_DIR] [JOBS] [SECONDS]
set -euo pipefail
build=${1:-build}
jobs=${2:-200}
window=${3:-30}
work=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$work/data" "$work/jobs"
"$build/debugplane-server" --listen "127.0.0.1:$port" --data-dir "$work/data" --log-level warn \
  > "$work/server.log" 2>&1 &
server=$!
sleep 0.5
rules='VanishingGradient ExplodingTensor LossNotDecreasing DeadRelu StalledTrainingRule'
for i in $(seq 0 $((jobs - 1))); do
  configs=""
  for r in $rules; do
    extra=""
    [ "$r" = StalledTrainingRule ] && extra=', "threshold": "3600"'
    configs+="${configs:+,}{\"RuleConfigurationName\": \"$r\", \"RuleEvaluatorImage\": \"builtin\", \"RuleParameters\": {\"rule_to_invoke\": \"$r\"$extra}}"
  done
  profiler=""
  if [ "${PROFILER_REPORT:-0}" = 1 ]; then
    profiler=", \"ProfilerConfig\": {\"S3OutputPath\": \"$work/data/profiler/job-$i\"},
 \"ProfilerRuleConfigurations\": [{\"RuleConfigurationName\": \"ProfilerReport\",
   \"RuleEvaluatorImage\": \"builtin\", \"RuleParameters\": {\"rule_to_invoke\": \"ProfilerReport\"}}]"
  fi
  cat > "$work/jobs/$i.json" <<JSON
{"TrainingJobName": "scale-$i", "RoleArn": "arn:aws:iam::111122223333:role/Test",
 "OutputDataConfig": {"S3OutputPath": "s3://bucket/out"},
 "DebugHookConfig": {"S3OutputPath": "$work/data/trials/job-$i",
   "CollectionConfigurations": [{"CollectionName": "gradients"}, {"CollectionName": "relu_output"}]},
 "DebugRuleConfigurations": [$configs]$profiler}
JSON
  "$build/debugplane" --server "127.0.0.1:$port" create --file "$work/jobs/$i.json" > /dev/null
done
sleep 5
ticks_per_s=$(getconf CLK_TCK)
t0=$(awk '{print $14 + $15}' "/proc/$server/stat")
sleep "$window"
t1=$(awk '{print $14 + $15}' "/proc/$server/stat")
echo "jobs: $jobs, rules: $((jobs * 5))${profiler:+ + $jobs ProfilerReport}, window: ${window}s"
echo "cpu: $(echo "scale=2; 100 * ($t1 - $t0) / $ticks_per_s / $window" | bc)% of one core"
grep -E "VmRSS|Threads" "/proc/$server/status"
