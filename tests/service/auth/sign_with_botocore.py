# Signs a request with botocore's SigV4Auth, as boto3 does, and prints it as
# JSON: {"url": ..., "headers": {...}}. Used by sigv4_test.cc.
#   python3 sign_with_botocore.py KEY SECRET REGION SERVICE METHOD URL BODY_FILE
import json
import sys

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

key, secret, region, service, method, url, body_file = sys.argv[1:8]
with open(body_file, "rb") as f:
    body = f.read()
request = AWSRequest(method=method, url=url, data=body,
                     headers={"Content-Type": "application/x-amz-json-1.1",
                              "X-Amz-Target": "SageMaker.DescribeTrainingJob"})
SigV4Auth(Credentials(key, secret), service, region).add_auth(request)
prepared = request.prepare()
print(json.dumps({"url": prepared.url, "headers": dict(prepared.headers)}))
