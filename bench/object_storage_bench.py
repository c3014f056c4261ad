#!/usr/bin/env python3
"""Rules over object storage (issue 11): detection latency, idle cost, read
throughput against plain GETs, and detection through the agent's uploads.

  bench/object_storage_bench.py [--build build/release] [--samples 20]
      [--step-interval-ms 200] [--idle-jobs 200] [--idle-seconds 60]
      [--read-rounds 0] [--request-log FILE] [--agent-samples 0]
      [--agent-step-ms 200]

Runs moto's S3 server on loopback behind a counting WSGI wrapper (every
request counted by kind: LIST = ListObjectsV2, GET, HEAD, PUT), and the real
debugplane-server pointed at it the way a user does (AWS_ENDPOINT_URL_S3,
AWS_ACCESS_KEY_ID, ...), then:

- detection: per sample a job with ExplodingTensor on s3://bench/det-N, a
  `debugplane watch` on it, and the steps of tests/data/smdebug/exploding_tensor
  uploaded one every --step-interval-ms (event file, then index file, as the
  agent uploads); the latency is from the PUT of the index file of the step
  IssuesFound names returning to the IssuesFound line on the watch stream.
- idle: --idle-jobs jobs on empty s3:// prefixes (training not started),
  left alone for --idle-seconds after a 10 s settling: list requests per
  minute in total (counted at the store), the server's CPU (user+system
  from /proc) and RSS.
- read (--read-rounds N): the fixture trials that ExplodingTensor reads to
  their end without an issue (healthy, vanishing_gradient,
  loss_not_decreasing, dead_relu; not overfit: s3_get_bench's recursive
  listing of it got a reply our XML parser refused, not looked into yet)
  are uploaded once; each round
  first GETs every object of them (bench/s3_get_bench.cc: the server's own
  S3 store code, one GET after the other), then runs one job per trial, one
  after the other, each from its CreateTrainingJob to its verdict on a watch
  stream. Reported: both times, the objects and bytes each read (the
  server's from ReadProgress), and GET time / server time; then per round
  where the time went (issue 27): the requests the store served in each
  phase by kind (count, the time the store spent serving them, GET bytes),
  and per job `debugplane create`, the wait from its return to the job's
  first request, the time between the job's requests when none was being
  served (the server's own work and the requests' transit), and from its
  last request to the verdict; and the CPU time of the server and of this
  process (moto) meanwhile. --request-log appends every request (and each
  job's times) as JSON lines.
- agent (--agent-samples N): per sample a job with ExplodingTensor and a
  stoptraining action, run by the real debugplane-agent around
  dp_fake_training writing a step every --agent-step-ms with a NaN at step
  10; the agent uploads to the store. The latency is from the training
  having written the NaN step's last file (its index file; the time it
  logs) to the IssuesFound line on a `debugplane watch` stream.
"""

import argparse
import collections
import json
import logging
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import boto3
from moto.server import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import make_server

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(ROOT, "tests", "data", "smdebug", "exploding_tensor")
BUCKET = "bench"
RULES_IMAGE = "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest"

COUNTS = collections.Counter()
COUNTS_LOCK = threading.Lock()
# Every request served, while REQUEST_LOG is a list: (start, end, kind, path,
# body bytes sent), times from time.time(), end when the reply's last byte
# was handed to the server.
REQUEST_LOG = None


class TimedBody:
    """The app's reply body, passed through; logs the request when the
    server closes it (after the last byte)."""

    def __init__(self, body, record):
        self.body, self.record, self.sent = body, record, 0

    def __iter__(self):
        for chunk in self.body:
            self.sent += len(chunk)
            yield chunk

    def close(self):
        if hasattr(self.body, "close"):
            self.body.close()
        start, kind, path = self.record
        with COUNTS_LOCK:
            if REQUEST_LOG is not None:
                REQUEST_LOG.append((start, time.time(), kind, path, self.sent))


def start_store():
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    app = DomainDispatcherApplication(create_backend_app)

    def counting(environ, start_response):
        method = environ["REQUEST_METHOD"]
        kind = "LIST" if method == "GET" and "list-type=2" in environ.get("QUERY_STRING", "") \
            else method
        with COUNTS_LOCK:
            COUNTS[kind] += 1
        query = environ.get("QUERY_STRING", "")
        prefix = re.search(r"(?:^|&)prefix=([^&]*)", query) if kind == "LIST" else None
        path = "/" + BUCKET + "/" + prefix.group(1).replace("%2F", "/") if prefix \
            else environ.get("PATH_INFO", "")
        return TimedBody(app(environ, start_response), (time.time(), kind, path))

    server = make_server("127.0.0.1", 0, counting, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return "http://127.0.0.1:%d" % server.server_port


def counts():
    with COUNTS_LOCK:
        return dict(COUNTS)


def start_server(build, data_dir, env):
    proc = subprocess.Popen(
        [os.path.join(build, "debugplane-server"), "--listen", "127.0.0.1:0", "--data-dir",
         data_dir, "--log-level", "warn"],
        stdout=subprocess.PIPE, stderr=open(os.path.join(data_dir, "server.log"), "w"),
        env=env, text=True)
    for line in proc.stdout:
        match = re.match(r"debugplane-server listening on port (\d+)", line)
        if match:
            return proc, "127.0.0.1:" + match.group(1)
    raise SystemExit("the server did not start; see %s/server.log" % data_dir)


def job_json(name, path):
    return {
        "TrainingJobName": name,
        "RoleArn": "arn:aws:iam::111122223333:role/service-role/Bench",
        "OutputDataConfig": {"S3OutputPath": "s3://bucket/out"},
        "DebugHookConfig": {"S3OutputPath": path},
        "DebugRuleConfigurations": [{
            "RuleConfigurationName": "ExplodingTensor", "RuleEvaluatorImage": RULES_IMAGE,
            "RuleParameters": {"rule_to_invoke": "ExplodingTensor"}}],
    }


def create(cli, address, job, tmp):
    path = os.path.join(tmp, job["TrainingJobName"] + ".json")
    with open(path, "w") as f:
        json.dump(job, f)
    subprocess.run([cli, "--server", address, "create", "--file", path], check=True,
                   stdout=subprocess.DEVNULL)


def fixture_steps():
    steps = collections.defaultdict(list)
    for dirpath, _, files in os.walk(FIXTURE):
        for name in files:
            rel = os.path.relpath(os.path.join(dirpath, name), FIXTURE)
            match = re.match(r"(\d{12})_", name)
            if match:
                steps[int(match.group(1))].append(rel)
    return {step: sorted(rels, key=lambda r: r.startswith("index/")) for step, rels in
            steps.items()}


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100.0 * (len(ordered) - 1))))]


def detection(args, s3, cli, address, tmp):
    steps = fixture_steps()
    collections_files = [os.path.relpath(os.path.join(d, n), FIXTURE)
                         for d, _, fs in os.walk(os.path.join(FIXTURE, "collections")) for n in fs]
    latencies = []
    for sample in range(args.samples):
        name = "det-%d" % sample
        create(cli, address, job_json(name, "s3://%s/%s" % (BUCKET, name)), tmp)
        watch = subprocess.Popen([cli, "--server", address, "watch", name],
                                 stdout=subprocess.PIPE, text=True)
        found = {}

        def read_watch():
            for line in watch.stdout:
                if "IssuesFound" in line:
                    found["at"] = time.monotonic()
                    found["line"] = line
                    return

        reader = threading.Thread(target=read_watch, daemon=True)
        reader.start()
        time.sleep(0.5)  # The watch is open.
        for rel in collections_files:
            s3.upload_file(os.path.join(FIXTURE, rel), BUCKET, "%s/%s" % (name, rel))
        index_put = {}
        for step in sorted(steps):
            for rel in steps[step]:
                s3.upload_file(os.path.join(FIXTURE, rel), BUCKET, "%s/%s" % (name, rel))
            index_put[step] = time.monotonic()
            if "at" in found:
                break
            time.sleep(args.step_interval_ms / 1000.0)
        reader.join(timeout=30)
        watch.kill()
        if "at" not in found:
            print("sample %d: no IssuesFound within 30 s" % sample, file=sys.stderr)
            continue
        step = int(re.search(r"step (\d+)", found["line"]).group(1))
        latencies.append((found["at"] - index_put[step]) * 1000.0)
    print("detection over object storage: %d samples, step every %d ms: p50 %.0f ms, "
          "p99 %.0f ms, max %.0f ms" % (len(latencies), args.step_interval_ms,
                                         percentile(latencies, 50), percentile(latencies, 99),
                                         max(latencies)))


READ_FIXTURES = ["healthy", "vanishing_gradient", "loss_not_decreasing", "dead_relu"]
TERMINAL = {"NoIssuesFound", "IssuesFound", "Error", "Stopped"}


def upload_tree(s3, local, prefix):
    for dirpath, _, files in os.walk(local):
        for name in files:
            path = os.path.join(dirpath, name)
            s3.upload_file(path, BUCKET, "%s/%s" % (prefix, os.path.relpath(path, local)))


def watch_until(cli, address, name, done, timeout=120):
    """Reads `debugplane watch` events until done(event); returns the event
    and time.time() when its line arrived (None, None on timeout)."""
    watch = subprocess.Popen([cli, "--server", address, "watch", name],
                             stdout=subprocess.PIPE, text=True)
    result = {}

    def read():
        for line in watch.stdout:
            event = json.loads(line)
            if done(event):
                result["at"] = time.time()
                result["event"] = event
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=timeout)
    watch.kill()
    watch.wait()
    return result.get("event"), result.get("at")


def rules_terminal(event):
    rules = event.get("DebugRuleEvaluationStatuses", [])
    return bool(rules) and all(r.get("RuleEvaluationStatus") in TERMINAL for r in rules)


def describe(cli, address, name):
    out = subprocess.run([cli, "--server", address, "describe", name], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out)


def own_cpu_seconds():
    times = os.times()
    return times.user + times.system


def read_bench(args, s3, cli, address, tmp, env, server_pid=None):
    for fixture in READ_FIXTURES:
        upload_tree(s3, os.path.join(ROOT, "tests", "data", "smdebug", fixture),
                    "read/" + fixture)
    global REQUEST_LOG
    get_bench = os.path.join(args.build, "s3_get_bench")
    ratios = []
    for round_ in range(args.read_rounds):
        command = [get_bench, "--bucket", BUCKET]
        for fixture in READ_FIXTURES:
            command += ["--prefix", "read/%s/" % fixture]
        with COUNTS_LOCK:
            REQUEST_LOG = []
        baseline = json.loads(subprocess.run(command, check=True, stdout=subprocess.PIPE,
                                             env=env, text=True).stdout)
        with COUNTS_LOCK:
            baseline_log, REQUEST_LOG = REQUEST_LOG, []
        server_seconds, objects, read_bytes = 0.0, 0, 0
        jobs = []
        cpu_before = (cpu_seconds(server_pid) if server_pid else 0.0, own_cpu_seconds())
        for fixture in READ_FIXTURES:
            name = "read-%d-%s" % (round_, fixture.replace("_", "-"))
            started = time.time()
            create(cli, address, job_json(name, "s3://%s/read/%s" % (BUCKET, fixture)), tmp)
            created = time.time()
            event, at = watch_until(cli, address, name, rules_terminal)
            if event is None:
                raise SystemExit("%s: no verdict within 120 s" % name)
            server_seconds += at - started
            jobs.append(("/read/%s/" % fixture, started, created, at))
            rule = describe(cli, address, name)["DebugRuleEvaluationStatuses"][0]
            if rule["RuleEvaluationStatus"] != "NoIssuesFound":
                print("%s: %s (%s)" % (name, rule["RuleEvaluationStatus"],
                                       rule.get("StatusDetails")), file=sys.stderr)
            progress = rule.get("ReadProgress", {})
            objects += progress.get("ObjectsRead", 0)
            read_bytes += progress.get("BytesRead", 0)
        with COUNTS_LOCK:
            server_log, REQUEST_LOG = REQUEST_LOG, None
        cpu = ((cpu_seconds(server_pid) if server_pid else 0.0) - cpu_before[0],
               own_cpu_seconds() - cpu_before[1])
        ratio = baseline["get_seconds"] / server_seconds
        ratios.append(ratio)
        print("read round %d: plain GETs %d objects, %d bytes in %.2f s; server %d objects, "
              "%d bytes to %d verdicts in %.2f s; GET time / server time %.0f%%" % (
                  round_, baseline["objects"], baseline["bytes"], baseline["get_seconds"],
                  objects, read_bytes, len(READ_FIXTURES), server_seconds, 100.0 * ratio),
              flush=True)
        print_breakdown(round_, baseline_log, server_log, jobs)
        print("read round %d CPU while the server read: debugplane-server %.2f s, this process "
              "(moto's S3 and the bench) %.2f s" % (round_, cpu[0], cpu[1]), flush=True)
        if args.request_log:
            with open(args.request_log, "a") as f:
                for phase, log in (("plain", baseline_log), ("server", server_log)):
                    for start, end, kind, path, sent in log:
                        f.write(json.dumps({"round": round_, "phase": phase, "start": start,
                                            "end": end, "kind": kind, "path": path,
                                            "bytes": sent}) + "\n")
                for path, started, created, verdict in jobs:
                    f.write(json.dumps({"round": round_, "job": path, "started": started,
                                        "created": created, "verdict": verdict}) + "\n")
    print("read: median GET time / server time over %d rounds: %.0f%%" % (
        len(ratios), 100.0 * statistics.median(ratios)))


def by_kind(log):
    """{kind: (requests, seconds serving them, body bytes sent)}."""
    kinds = collections.defaultdict(lambda: [0, 0.0, 0])
    for start, end, kind, _, sent in log:
        kinds[kind][0] += 1
        kinds[kind][1] += end - start
        kinds[kind][2] += sent
    return kinds


def print_breakdown(round_, baseline_log, server_log, jobs):
    """Where the server's time to its verdicts went, as seen from the store
    and the client: the requests by kind (the time moto spent serving them),
    `debugplane create`, the wait from the job's creation to its first
    request, the time between its first and last request that no request
    was being served (the server's own work: decoding, rules, scheduling),
    and from the last request to the verdict on the watch stream (the
    verdict's durable write and the stream)."""
    def kinds_text(kinds):
        return ", ".join("%s %d in %.2f s%s" % (
            kind, n, seconds, " (%d bytes)" % sent if kind == "GET" else "")
            for kind, (n, seconds, sent) in sorted(kinds.items()))

    print("read round %d breakdown, plain GETs: %s" % (round_, kinds_text(by_kind(baseline_log))))
    create_s = first_wait = gaps = tail = 0.0
    for path, started, created, verdict in jobs:
        mine = sorted(r for r in server_log if path in r[3] + "/" and started <= r[0] <= verdict)
        create_s += created - started
        if not mine:
            continue
        first_wait += mine[0][0] - created
        busy_until = mine[0][0]
        for start, end, _, _, _ in mine:
            gaps += max(0.0, start - busy_until)
            busy_until = max(busy_until, end)
        tail += verdict - busy_until
    print("read round %d breakdown, server: %s; create %.2f s, create to first request %.2f s, "
          "between requests %.2f s, last request to verdict %.2f s" % (
              round_, kinds_text(by_kind(server_log)), create_s, first_wait, gaps, tail),
          flush=True)


def agent_detection(args, cli, address, tmp, env):
    agent = os.path.join(args.build, "debugplane-agent")
    training = os.path.join(args.build, "dp_fake_training")
    nan_at = 10
    latencies = []
    for sample in range(args.agent_samples):
        name = "agent-det-%d" % sample
        job = job_json(name, "s3://%s/%s/debug-output" % (BUCKET, name))
        job["OutputDataConfig"] = {"S3OutputPath": "s3://%s/%s" % (BUCKET, name)}
        job["DebugRuleConfigurations"][0]["RuleParameters"]["action_json"] = \
            '{"name": "stoptraining"}'
        create(cli, address, job, tmp)
        host = os.path.join(tmp, name)
        os.makedirs(os.path.join(host, "tmp"))
        log = os.path.join(host, "training.log")
        found = {}

        def watch():
            found["event"], found["at"] = watch_until(
                cli, address, name, lambda e: any(
                    r.get("RuleEvaluationStatus") == "IssuesFound"
                    for r in e.get("DebugRuleEvaluationStatuses", [])))

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        time.sleep(0.5)  # The watch is open.
        proc = subprocess.Popen(
            [agent, "run", "--server", address, "--job", name, "--stop-grace", "1",
             "--upload-wait", "30", "--", training, "--steps", "100000", "--step-ms",
             str(args.agent_step_ms), "--nan-at", str(nan_at), "--log", log, "--ignore-term"],
            cwd=host, env=dict(env, TMPDIR=os.path.join(host, "tmp")),
            stderr=open(os.path.join(host, "agent.log"), "w"))
        proc.wait(timeout=120)
        watcher.join(timeout=120)
        written = None
        with open(log) as f:
            for line in f:
                match = re.search(r"nan step \d+ written at unix us (\d+)", line)
                if match:
                    written = int(match.group(1)) / 1e6
        if found.get("at") is None or written is None:
            print("sample %d: no IssuesFound (or no NaN step written); see %s" % (sample, host),
                  file=sys.stderr)
            continue
        latencies.append((found["at"] - written) * 1000.0)
    print("detection through the agent: %d samples, step every %d ms: p50 %.0f ms, "
          "p99 %.0f ms, max %.0f ms" % (len(latencies), args.agent_step_ms,
                                         percentile(latencies, 50), percentile(latencies, 99),
                                         max(latencies)))


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def idle(args, server, cli, address, tmp):
    for i in range(args.idle_jobs):
        create(cli, address, job_json("idle-%d" % i, "s3://%s/idle-%d" % (BUCKET, i)), tmp)
    time.sleep(10)  # Settle: the probes back off to their idle interval.
    before, cpu_before, t0 = counts(), cpu_seconds(server.pid), time.monotonic()
    time.sleep(args.idle_seconds)
    after, cpu_after, t1 = counts(), cpu_seconds(server.pid), time.monotonic()
    minutes = (t1 - t0) / 60.0
    per_minute = {k: (after.get(k, 0) - before.get(k, 0)) / minutes for k in after}
    print("idle: %d jobs on object storage for %.0f s: %.0f list requests/min in total "
          "(%.1f per job), all requests %.0f/min; server CPU %.1f%% of a core, RSS %.0f MiB" % (
              args.idle_jobs, t1 - t0, per_minute.get("LIST", 0),
              per_minute.get("LIST", 0) / max(1, args.idle_jobs), sum(per_minute.values()),
              100.0 * (cpu_after - cpu_before) / (t1 - t0), rss_mib(server.pid)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build", "release"))
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--step-interval-ms", type=int, default=200)
    parser.add_argument("--idle-jobs", type=int, default=200)
    parser.add_argument("--idle-seconds", type=int, default=60)
    parser.add_argument("--read-rounds", type=int, default=0)
    parser.add_argument("--request-log", default="",
                        help="with --read-rounds: append every request served (JSON lines)")
    parser.add_argument("--agent-samples", type=int, default=0)
    parser.add_argument("--agent-step-ms", type=int, default=200)
    args = parser.parse_args()
    args.build = os.path.abspath(args.build)  # The agent runs in a directory of its own.

    endpoint = start_store()
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                      aws_access_key_id="bench", aws_secret_access_key="bench-secret")
    s3.create_bucket(Bucket=BUCKET)
    env = dict(os.environ, AWS_ENDPOINT_URL_S3=endpoint, AWS_REGION="us-east-1",
               AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench-secret",
               AWS_SHARED_CREDENTIALS_FILE="/nonexistent", AWS_CONFIG_FILE="/nonexistent")
    cli = os.path.join(args.build, "debugplane")
    with tempfile.TemporaryDirectory() as tmp:
        server, address = start_server(args.build, tmp, env)
        try:
            if args.read_rounds > 0:
                read_bench(args, s3, cli, address, tmp, env, server.pid)
            if args.agent_samples > 0:
                agent_detection(args, cli, address, tmp, env)
            if args.samples > 0:
                detection(args, s3, cli, address, tmp)
            if args.idle_jobs > 0:
                idle(args, server, cli, address, tmp)
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
