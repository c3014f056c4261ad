#!/usr/bin/env python3
"""An orchestration script on debugplane's generated gRPC stubs.

It does what a workflow step around a training job does: create the job with
a Debugger rule, poll DescribeTrainingJob for the rule's status, watch the
job's changes as a stream, stop the job, and wait until the watch reports it
Stopped. Each step prints one line.

Stubs: client/python/generate_stubs.sh writes them (debugplane/v1/*_pb2*.py)
into client/python/gen, which this script puts on its path (or give
--stubs DIR). Needs Debian's python3-grpcio and python3-protobuf.

  DEBUGPLANE_TOKEN=AKID:SECRET /usr/bin/python3 client/python/debugplane_example.py \
      --server 127.0.0.1:7070 --job-name nightly-resnet --output-path /data/nightly-resnet

Exit codes, as the CLI's: 0 done, 2 usage, 3 refused by the server (the message
says why), 7 server unreachable, 8 not authenticated or not allowed, 1 other.
"""

import argparse
import os
import pathlib
import queue
import sys
import threading
import time


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="127.0.0.1:7070", help="HOST:PORT of debugplane-server")
    parser.add_argument("--job-name", required=True, help="the training job to create")
    parser.add_argument("--output-path", required=True,
                        help="DebugHookConfig.S3OutputPath: s3://bucket/prefix, or a local path "
                             "under one of the server's --data-root directories")
    parser.add_argument("--token", default=os.environ.get("DEBUGPLANE_TOKEN", ""),
                        help="ACCESS_KEY_ID:SECRET_ACCESS_KEY (default: $DEBUGPLANE_TOKEN)")
    parser.add_argument("--ca-cert", help="PEM roots: connect with TLS")
    parser.add_argument("--stubs", default=str(pathlib.Path(__file__).resolve().parent / "gen"),
                        help="directory of the generated stubs (default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=30, help="seconds for each step")
    return parser.parse_args(argv)


def connect(args, grpc):
    if args.ca_cert:
        with open(args.ca_cert, "rb") as roots:
            return grpc.secure_channel(args.server, grpc.ssl_channel_credentials(roots.read()))
    return grpc.insecure_channel(args.server)


def create_request(pb, args):
    """The job: ExplodingTensor on the tensors the hook saves, as in SageMaker."""
    request = pb.CreateTrainingJobRequest(
        training_job_name=args.job_name,
        role_arn="arn:aws:iam::111122223333:role/debugplane-example",
    )
    request.algorithm_specification.training_image = "example/train:latest"
    request.algorithm_specification.training_input_mode = "File"
    request.output_data_config.s3_output_path = args.output_path
    request.resource_config.instance_type = "ml.p3.2xlarge"
    request.resource_config.instance_count = 1
    request.resource_config.volume_size_in_gb = 30
    request.stopping_condition.max_runtime_in_seconds = 3600
    request.debug_hook_config.s3_output_path = args.output_path
    rule = request.debug_rule_configurations.add()
    rule.rule_configuration_name = "ExplodingTensor"
    rule.rule_evaluator_image = (
        "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest")
    rule.rule_parameters["rule_to_invoke"] = "ExplodingTensor"
    rule.rule_parameters["collection_names"] = "losses"
    return request


def watch(stub, pb, job_name, metadata, events, timeout):
    """Puts each watch event on `events`, then None when the stream ends."""
    try:
        stream = stub.WatchTrainingJob(pb.WatchTrainingJobRequest(training_job_name=job_name),
                                       metadata=metadata, timeout=timeout)
        for event in stream:
            events.put(event)
    except Exception as error:  # Reported by the main thread.
        events.put(error)
    events.put(None)


def run(args):
    sys.path.insert(0, args.stubs)
    try:
        import grpc
        from debugplane.v1 import training_job_pb2 as pb
        from debugplane.v1 import training_job_pb2_grpc as pb_grpc
    except ImportError as error:
        print(f"cannot import the stubs or grpc ({error}); run client/python/generate_stubs.sh "
              "and install python3-grpcio", file=sys.stderr)
        return 2
    metadata = [("authorization", f"Bearer {args.token}")] if args.token else []
    status_name = pb.TrainingJobStatus.Value.Name
    rule_status_name = pb.RuleEvaluationStatus.Value.Name

    with connect(args, grpc) as channel:
        stub = pb_grpc.TrainingJobServiceStub(channel)
        try:
            created = stub.CreateTrainingJob(create_request(pb, args), metadata=metadata,
                                             timeout=args.timeout)
            print(f"created {created.training_job_arn}")

            # Poll as a workflow engine does: the rule's status is in Describe.
            deadline = time.monotonic() + args.timeout
            while True:
                job = stub.DescribeTrainingJob(
                    pb.DescribeTrainingJobRequest(training_job_name=args.job_name),
                    metadata=metadata, timeout=args.timeout)
                rules = {s.rule_configuration_name: rule_status_name(s.rule_evaluation_status)
                         for s in job.debug_rule_evaluation_statuses}
                if rules or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            print(f"described {status_name(job.training_job_status)} rules {rules}")

            events = queue.Queue()
            watcher = threading.Thread(
                target=watch, args=(stub, pb, args.job_name, metadata, events, args.timeout),
                daemon=True)
            watcher.start()
            first = events.get(timeout=args.timeout)
            if isinstance(first, Exception):
                raise first
            print(f"watching from {status_name(first.training_job_status)}")

            stub.StopTrainingJob(pb.StopTrainingJobRequest(training_job_name=args.job_name),
                                 metadata=metadata, timeout=args.timeout)
            print("stop requested")
            final = None
            while True:
                event = events.get(timeout=args.timeout)
                if event is None:
                    break
                if isinstance(event, Exception):
                    raise event
                final = event
                for change in event.changes:
                    what = change.rule_configuration_name or "job"
                    print(f"changed {what}: {getattr(change, 'from')} -> {change.to}")
            final_status = status_name(final.training_job_status) if final else "unknown"
            print(f"watch ended: {final_status}")
            return 0 if final_status == "Stopped" else 1
        except grpc.RpcError as error:
            print(f"{error.code().name}: {error.details()}", file=sys.stderr)
            if error.code() == grpc.StatusCode.UNAVAILABLE:
                return 7
            if error.code() in (grpc.StatusCode.UNAUTHENTICATED,
                                grpc.StatusCode.PERMISSION_DENIED):
                return 8
            return 3 if error.code() in (grpc.StatusCode.INVALID_ARGUMENT,
                                         grpc.StatusCode.ALREADY_EXISTS,
                                         grpc.StatusCode.NOT_FOUND) else 1
        except queue.Empty:
            print(f"no watch event within {args.timeout} s", file=sys.stderr)
            return 1


if __name__ == "__main__":
    sys.exit(run(parse_args(sys.argv[1:])))
