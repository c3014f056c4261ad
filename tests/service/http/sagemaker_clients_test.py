#!/usr/bin/env python3
"""debugplane's SageMaker HTTP API driven by the real clients: boto3 and the AWS CLI.

Run by tests/service/http/sagemaker_clients_test.cc against the real server
binary (started with --http-listen); by hand:

  tests/service/http/sagemaker_clients_test.py --endpoint http://127.0.0.1:PORT

Every reply is checked against botocore's service model
(sagemaker_model_checker.py). Exits 0 if every check passed, 1 otherwise,
printing each failure.
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid

import boto3
import botocore.auth
import botocore.awsrequest
import botocore.config
import botocore.credentials
import botocore.exceptions

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sagemaker_model_checker import ReplyRecorder, check_reply  # noqa: E402

REGION = "us-east-1"


class Failures:
    def __init__(self):
        self.items = []

    def check(self, condition, what):
        if not condition:
            self.items.append(what)
            print(f"FAIL: {what}", flush=True)
        return condition


def template_json(path, name):
    """The Debugger guide's CLI template, `//` comment lines removed, renamed."""
    with open(path, encoding="utf-8") as f:
        lines = [line for line in f if not line.lstrip().startswith("//")]
    job = json.loads("".join(lines))
    job["TrainingJobName"] = name
    return job


class Session:
    def __init__(self, args):
        self.args = args
        self.failures = Failures()
        self.recorder = ReplyRecorder()
        self.client = self.make_client(args.access_key, args.secret_key)
        self.name = "http-" + uuid.uuid4().hex[:12]

    def make_client(self, key, secret):
        return self.recorder.watch(boto3.client(
            "sagemaker", endpoint_url=self.args.endpoint, region_name=REGION,
            aws_access_key_id=key, aws_secret_access_key=secret,
            # A failure must show, not be retried away.
            config=botocore.config.Config(retries={"total_max_attempts": 1})))

    def expect_error(self, code, call, *, message_has=(), **kwargs):
        """Runs client.<call>(**kwargs) and checks it raises the AWS error `code`."""
        try:
            getattr(self.client, call)(**kwargs)
        except botocore.exceptions.ClientError as error:
            got = error.response["Error"]["Code"]
            message = error.response["Error"]["Message"]
            ok = self.failures.check(got == code, f"{call}: expected {code}, got {got}: {message}")
            for part in message_has:
                ok &= self.failures.check(part in message,
                                          f"{call}: message {message!r} lacks {part!r}")
            self.failures.check(bool(error.response["ResponseMetadata"].get("RequestId")),
                                f"{call}: no x-amzn-RequestId on the error")
            return error if ok else None
        self.failures.check(False, f"{call}: expected {code}, the call succeeded")
        return None

    def aws_cli(self, *arguments):
        env = dict(os.environ, AWS_ACCESS_KEY_ID=self.args.access_key,
                   AWS_SECRET_ACCESS_KEY=self.args.secret_key, AWS_DEFAULT_REGION=REGION,
                   AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull,
                   AWS_MAX_ATTEMPTS="1", AWS_PAGER="")
        return subprocess.run(
            [self.args.aws, "sagemaker", *arguments, "--endpoint-url", self.args.endpoint,
             "--output", "json"],
            env=env, capture_output=True, text=True, timeout=60)

    def raw_call(self, target, body, sign=True):
        """POSTs `body` (bytes) with X-Amz-Target `target`, signed like boto3; returns
        (status, headers, parsed JSON body)."""
        request = botocore.awsrequest.AWSRequest(
            method="POST", url=self.args.endpoint + "/", data=body,
            headers={"X-Amz-Target": target, "Content-Type": "application/x-amz-json-1.1"})
        if sign:
            credentials = botocore.credentials.Credentials(self.args.access_key,
                                                           self.args.secret_key)
            botocore.auth.SigV4Auth(credentials, "sagemaker", REGION).add_auth(request)
        prepared = request.prepare()
        raw = urllib.request.Request(prepared.url, data=body, method="POST",
                                     headers=dict(prepared.headers))
        try:
            with urllib.request.urlopen(raw, timeout=30) as response:
                return response.status, response.headers, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            content = error.read()
            return error.code, error.headers, json.loads(content) if content else {}


def test_create_with_cli(s):
    job = template_json(s.args.template, s.name)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(job, f)
        path = f.name
    result = s.aws_cli("create-training-job", "--cli-input-json", f"file://{path}")
    os.unlink(path)
    if not s.failures.check(result.returncode == 0,
                            f"aws create-training-job failed: {result.stderr.strip()}"):
        return
    reply = json.loads(result.stdout)
    s.failures.check(reply.get("TrainingJobArn", "").endswith(f"training-job/{s.name}"),
                     f"aws create-training-job: TrainingJobArn {reply.get('TrainingJobArn')!r}")
    # The same name again: ResourceInUse through the CLI. The same request
    # signed in the same second carries the same signature, which the server
    # refuses as a replay (a state-changing request is obeyed once); a person
    # running the command again signs it in a later second, so the test does.
    time.sleep(1.01 - time.time() % 1)
    job_path = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump(job, job_path)
    job_path.close()
    again = s.aws_cli("create-training-job", "--cli-input-json", f"file://{job_path.name}")
    os.unlink(job_path.name)
    s.failures.check(again.returncode != 0 and "(ResourceInUse)" in again.stderr,
                     f"aws create-training-job twice: rc {again.returncode}, {again.stderr!r}")


def test_describe(s):
    job = s.client.describe_training_job(TrainingJobName=s.name)
    s.failures.check(job["TrainingJobName"] == s.name, "describe: TrainingJobName")
    s.failures.check(job["TrainingJobStatus"] == "InProgress",
                     f"describe: TrainingJobStatus {job['TrainingJobStatus']}")
    s.failures.check(isinstance(job["CreationTime"], datetime.datetime),
                     f"describe: CreationTime parsed as {type(job['CreationTime'])}")
    statuses = job.get("DebugRuleEvaluationStatuses", [])
    # The rule's status depends on whether its s3:// trial can be read here
    # (InProgress, or Error saying why); the model checker checks its value.
    s.failures.check(
        [r["RuleConfigurationName"] for r in statuses] == ["LossNotDecreasing"] and
        statuses[0]["RuleEvaluationJobArn"].startswith("arn:") and
        isinstance(statuses[0]["LastModifiedTime"], datetime.datetime),
        f"describe: DebugRuleEvaluationStatuses {statuses}")
    s.failures.check(job["ProfilerConfig"].get("ProfilingIntervalInMilliseconds") == 500,
                     f"describe: ProfilerConfig {job.get('ProfilerConfig')}")
    s.failures.check(job.get("ProfilingStatus") == "Enabled", "describe: ProfilingStatus")
    # The CLI reads the same.
    result = s.aws_cli("describe-training-job", "--training-job-name", s.name)
    s.failures.check(result.returncode == 0 and
                     json.loads(result.stdout).get("TrainingJobStatus") == "InProgress",
                     f"aws describe-training-job: {result.returncode} {result.stderr.strip()}")


def test_list(s):
    now = datetime.datetime.now(datetime.timezone.utc)
    names = lambda reply: [j["TrainingJobName"] for j in reply["TrainingJobSummaries"]]
    found = s.client.list_training_jobs(StatusEquals="InProgress", NameContains=s.name[5:],
                                        CreationTimeAfter=now - datetime.timedelta(hours=1))
    s.failures.check(names(found) == [s.name], f"list (InProgress, name, after): {names(found)}")
    later = s.client.list_training_jobs(CreationTimeAfter=now + datetime.timedelta(hours=1))
    s.failures.check(later["TrainingJobSummaries"] == [],
                     f"list (created after in an hour): {names(later)}")
    stopped = s.client.list_training_jobs(StatusEquals="Stopped", NameContains=s.name[5:])
    s.failures.check(names(stopped) == [], f"list (Stopped): {names(stopped)}")
    summary = found["TrainingJobSummaries"][0] if found["TrainingJobSummaries"] else {}
    s.failures.check(isinstance(summary.get("CreationTime"), datetime.datetime),
                     f"list: CreationTime {summary.get('CreationTime')!r}")
    result = s.aws_cli("list-training-jobs", "--name-contains", s.name, "--status-equals",
                       "InProgress")
    s.failures.check(result.returncode == 0 and
                     [j["TrainingJobName"] for j in json.loads(result.stdout)
                      ["TrainingJobSummaries"]] == [s.name],
                     f"aws list-training-jobs: {result.returncode} {result.stdout} "
                     f"{result.stderr.strip()}")


def test_update(s):
    reply = s.client.update_training_job(
        TrainingJobName=s.name,
        ProfilerConfig={"ProfilingIntervalInMilliseconds": 1000,
                        "ProfilingParameters": {
                            "DetailedProfilingConfig": '{"StartStep": 5, "NumSteps": 3}'}})
    s.failures.check(reply["TrainingJobArn"].endswith(s.name), "update: TrainingJobArn")
    job = s.client.describe_training_job(TrainingJobName=s.name)
    s.failures.check(job["ProfilerConfig"]["ProfilingIntervalInMilliseconds"] == 1000,
                     f"update: interval now {job['ProfilerConfig']}")
    # ConfigVersion is an extra member (botocore drops it): read it on the wire.
    status, _, body = s.raw_call("SageMaker.DescribeTrainingJob",
                                 json.dumps({"TrainingJobName": s.name}).encode())
    s.failures.check(status == 200 and body.get("ConfigVersion") == 2,
                     f"update: ConfigVersion {body.get('ConfigVersion')!r} (a JSON number 2)")
    # Validation names the field, as gRPC does.
    s.expect_error("ValidationException", "update_training_job",
                   message_has=("ProfilerConfig.ProfilingIntervalInMilliseconds", "750"),
                   TrainingJobName=s.name, ProfilerConfig={"ProfilingIntervalInMilliseconds": 750})


def test_errors(s):
    missing = "no-such-" + s.name
    error = s.expect_error("ResourceNotFound", "describe_training_job", message_has=(missing,),
                           TrainingJobName=missing)
    if error is not None:
        s.failures.check(isinstance(error, s.client.exceptions.ResourceNotFound),
                         f"describe missing: raised {type(error).__name__}, not the modeled "
                         "ResourceNotFound")
        s.failures.check(error.response["ResponseMetadata"]["HTTPStatusCode"] == 400,
                         "describe missing: HTTP status")
    s.expect_error("ResourceNotFound", "stop_training_job", TrainingJobName=missing)
    s.expect_error("ValidationException", "describe_training_job",
                   message_has=("TrainingJobName",), TrainingJobName="bad_name!")
    # A SageMaker member debugplane does not serve is refused, naming it.
    s.expect_error("ValidationException", "list_training_jobs",
                   message_has=("WarmPoolStatusEquals",), WarmPoolStatusEquals="Available")
    # An operation debugplane does not serve, through boto3 itself.
    s.expect_error("UnknownOperationException", "list_endpoints")
    result = s.aws_cli("describe-training-job", "--training-job-name", missing)
    s.failures.check(result.returncode != 0 and "(ResourceNotFound)" in result.stderr and
                     missing in result.stderr,
                     f"aws describe missing: rc {result.returncode}, {result.stderr!r}")

    cases = [
        ("SageMaker.DescribeTrainingJob", b"{not json", 400, "SerializationException", "JSON"),
        ("SageMaker.DescribeTrainingJob", b'{"TrainingJobName": 5}', 400,
         "SerializationException", "TrainingJobName"),
        ("SageMaker.ListTrainingJobs", b'{"MaxResults": "ten"}', 400, "SerializationException",
         "MaxResults"),
        ("SageMaker.DescribeTrainingJob", b'{"TrainingJobName": "x", "Bogus": 1}', 400,
         "ValidationException", "Bogus"),
        ("SageMaker.ListTrainingJobs", b'{"StatusEquals": "Running"}', 400,
         "ValidationException", "StatusEquals"),
        ("SageMaker.CreateEndpoint", b"{}", 400, "UnknownOperationException", "CreateEndpoint"),
        ("", b"{}", 400, "UnknownOperationException", "X-Amz-Target"),
    ]
    for target, body, status, code, part in cases:
        got_status, headers, reply = s.raw_call(target, body)
        s.failures.check(
            got_status == status and reply.get("__type") == code and part in reply.get("message",
                                                                                     ""),
            f"raw {target or '(no target)'} {body!r}: {got_status} {reply}")
        s.failures.check(bool(headers.get("x-amzn-RequestId")),
                         f"raw {target}: no x-amzn-RequestId")
        s.failures.check(headers.get("Content-Type") == "application/x-amz-json-1.1",
                         f"raw {target}: Content-Type {headers.get('Content-Type')}")


def test_stop_wait_delete(s):
    s.client.stop_training_job(TrainingJobName=s.name)
    s.client.get_waiter("training_job_completed_or_stopped").wait(
        TrainingJobName=s.name, WaiterConfig={"Delay": 1, "MaxAttempts": 60})
    job = s.client.describe_training_job(TrainingJobName=s.name)
    s.failures.check(job["TrainingJobStatus"] == "Stopped",
                     f"after the waiter: {job['TrainingJobStatus']}")
    stopped = s.client.list_training_jobs(StatusEquals="Stopped", NameContains=s.name[5:])
    s.failures.check([j["TrainingJobName"] for j in stopped["TrainingJobSummaries"]] == [s.name],
                     "list (Stopped) after stop")
    s.client.delete_training_job(TrainingJobName=s.name)
    s.expect_error("ResourceNotFound", "describe_training_job", TrainingJobName=s.name)


def test_signatures(s):
    """With credentials configured: a wrong secret and a reader's Stop are refused."""
    wrong = s.make_client(s.args.access_key, "not-the-secret")
    try:
        wrong.list_training_jobs()
        s.failures.check(False, "a wrong secret was accepted")
    except botocore.exceptions.ClientError as error:
        code = error.response["Error"]["Code"]
        s.failures.check(code in ("InvalidSignatureException", "UnrecognizedClientException"),
                         f"wrong secret: {code}")
    unknown = s.make_client("AKIDUNKNOWN0000000000", "whatever")
    try:
        unknown.list_training_jobs()
        s.failures.check(False, "an unknown key id was accepted")
    except botocore.exceptions.ClientError as error:
        s.failures.check(error.response["Error"]["Code"] == "UnrecognizedClientException",
                         f"unknown key: {error.response['Error']['Code']}")
    status, _, body = s.raw_call("SageMaker.ListTrainingJobs", b"{}", sign=False)
    s.failures.check(status in (400, 403) and body.get("__type") in (
        "MissingAuthenticationTokenException", "IncompleteSignatureException"),
        f"unsigned request: {status} {body}")
    if s.args.reader_key:
        reader = s.make_client(s.args.reader_key, s.args.reader_secret)
        reader.list_training_jobs()  # Readers may read.
        try:
            reader.stop_training_job(TrainingJobName="any-job")
            s.failures.check(False, "a reader stopped a job")
        except botocore.exceptions.ClientError as error:
            s.failures.check(error.response["Error"]["Code"] == "AccessDeniedException" and
                             "StopTrainingJob" in error.response["Error"]["Message"],
                             f"reader stop: {error.response['Error']}")


def test_checker_catches_mistakes(s):
    """The model checker must fail replies that do not fit (so it can fail at all)."""
    model = s.client.meta.service_model.operation_model("DescribeTrainingJob")
    good = {"TrainingJobName": "a", "TrainingJobArn": "b", "TrainingJobStatus": "InProgress",
            "SecondaryStatus": "Starting", "StoppingCondition": {}, "CreationTime": 1.5,
            "ModelArtifacts": {"S3ModelArtifacts": "s3://x"}}
    s.failures.check(check_reply(model, 200, json.dumps(good).encode()) == [],
                     "checker: a good reply was refused")
    bad = [
        dict(good, TrainingJobStatu="InProgress"),           # A misspelt member.
        dict(good, CreationTime="2024-01-01T00:00:00Z"),     # A timestamp as a string.
        dict(good, TrainingJobStatus="Running"),             # Not an enum value.
        dict(good, TrainingTimeInSeconds="12"),              # An integer as a string.
        dict(good, ConfigVersion=2, StoppingCondition=[]),   # A list for a structure.
        {k: v for k, v in good.items() if k != "TrainingJobArn"},  # Required member absent.
    ]
    for reply in bad:
        s.failures.check(check_reply(model, 200, json.dumps(reply).encode()) != [],
                         f"checker: accepted {reply}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--template", required=True,
                        help="tests/data/sagemaker/create-training-job-template.jsonc")
    parser.add_argument("--aws", default="aws", help="the AWS CLI")
    parser.add_argument("--access-key", default="AKIDEXAMPLE")
    parser.add_argument("--secret-key", default="wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    parser.add_argument("--auth", action="store_true",
                        help="credentials are configured: also test refused signatures")
    parser.add_argument("--reader-key", default="")
    parser.add_argument("--reader-secret", default="")
    args = parser.parse_args()

    s = Session(args)
    tests = [test_checker_catches_mistakes, test_create_with_cli, test_describe, test_list,
             test_update, test_errors, test_stop_wait_delete]
    if args.auth:
        tests.append(test_signatures)
    for test in tests:
        print(f"== {test.__name__}", flush=True)
        try:
            test(s)
        except Exception as error:  # A crash is a failure of that test, the rest still run.
            s.failures.check(False, f"{test.__name__} raised {type(error).__name__}: {error}")
    for problem in s.recorder.problems:
        s.failures.check(False, f"reply does not fit botocore's model: {problem}")
    s.failures.check(s.recorder.replies >= 15,
                     f"only {s.recorder.replies} replies were checked against the model")
    print(f"{s.recorder.replies} replies checked against botocore's model; "
          f"{len(s.failures.items)} failures")
    return 1 if s.failures.items else 0


if __name__ == "__main__":
    sys.exit(main())
