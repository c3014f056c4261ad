#!/usr/bin/env python3
"""A real S3-compatible server for the tests: moto's server on loopback.

  s3_test_server.py [--check-signatures] [--port=N] [--host=ADDR] BUCKET...

Starts moto's S3 server on 127.0.0.1 (or ADDR, e.g. 0.0.0.0 in a network
namespace of its own) on a free port (or port N: a store
that comes back where it was), creates an IAM user
with full S3 access and an access key for it, and the buckets named on the
command line. With --check-signatures every request's SigV4 signature is
checked against that key (moto's IAM authentication), and each bucket gets
the object "signed/hello.txt" ("hello, signed"); without it moto accepts any
request (moto's own signature check rejects correctly signed requests for
keys with characters like '+', '=' or non-ASCII, and delimited listings, so
those are tested on an unchecked server). Then it prints one JSON line:
  {"endpoint": "http://127.0.0.1:PORT", "access_key_id": "...",
   "secret_access_key": "..."}
and serves until its standard input is closed (the test process ended), so
that it never outlives the test that started it.

Exit status 3 with a message on stderr when moto's server is not installed.
"""

import json
import logging
import os
import sys

# Every request is authenticated except the few that create the user: moto
# counts the unauthenticated actions it allows from the start.
_CHECK_SIGNATURES = "--check-signatures" in sys.argv[1:]
_PORT = 0
_HOST = "127.0.0.1"
for _arg in sys.argv[1:]:
    if _arg.startswith("--port="):
        _PORT = int(_arg[len("--port="):])
    if _arg.startswith("--host="):
        _HOST = _arg[len("--host="):]
_BUCKETS = [arg for arg in sys.argv[1:]
            if arg != "--check-signatures" and not arg.startswith(("--port=", "--host="))]
_SETUP_ACTIONS = 3
if _CHECK_SIGNATURES:
    os.environ["INITIAL_NO_AUTH_ACTION_COUNT"] = str(_SETUP_ACTIONS)
os.environ.setdefault("AWS_ACCESS_KEY_ID", "setup")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "setup")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")

try:
    import boto3
    from moto.server import ThreadedMotoServer
except ImportError as error:
    sys.stderr.write(
        "s3_test_server.py: moto's server is not installed (%s); install it with "
        "scripts/install-deps.sh, or: python3 -m pip install 'moto[server]==5.2.1'\n" % error)
    sys.exit(3)

_POLICY = json.dumps({
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
})


def main() -> None:
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address=_HOST, port=_PORT, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = "http://%s:%d" % (host, port)

    iam = boto3.client("iam", endpoint_url=endpoint, region_name="us-east-1")
    iam.create_user(UserName="debugplane-test")
    iam.put_user_policy(UserName="debugplane-test", PolicyName="s3",
                        PolicyDocument=_POLICY)
    key = iam.create_access_key(UserName="debugplane-test")["AccessKey"]

    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                      aws_access_key_id=key["AccessKeyId"],
                      aws_secret_access_key=key["SecretAccessKey"])
    for bucket in _BUCKETS:
        s3.create_bucket(Bucket=bucket)
        if _CHECK_SIGNATURES:
            s3.put_object(Bucket=bucket, Key="signed/hello.txt", Body=b"hello, signed")

    print(json.dumps({"endpoint": endpoint, "access_key_id": key["AccessKeyId"],
                      "secret_access_key": key["SecretAccessKey"]}), flush=True)
    sys.stdin.read()  # Until the test process closes our stdin or ends.
    server.stop()


if __name__ == "__main__":
    main()
