"""Checks debugplane's raw SageMaker replies against botocore's own service model.

Every reply body is captured with a botocore event hook (after-call, which
sees the raw HTTP response of successes and errors alike) and walked against
the operation's output shape: each member the model knows must have the
model's JSON type (structure, list, map, string, integer/long, boolean,
timestamp as a number, an enum value from the allowed set), required members
must be present, and a member the model does not know must be one of
debugplane's documented extras (so a misspelt member fails).
"""

import json

# debugplane's members beyond SageMaker's, per output shape (botocore's shape
# names). SageMaker clients ignore members they do not know.
DEBUGPLANE_EXTRAS = {
    "CreateTrainingJobResponse": {"Warnings"},
    "UpdateTrainingJobResponse": {"Warnings"},
    "DescribeTrainingJobResponse": {"ConfigVersion", "RuleActions", "ConfigurationUpdates",
                                    "TrainingHosts"},
    "DebugRuleEvaluationStatus": {"LastEvaluatedStep"},
}

# Required members debugplane leaves out, and when. SageMaker's model marks
# ModelArtifacts required; debugplane knows the artifacts' path only once the
# job completed (botocore does not enforce output requirements).
KNOWN_ABSENT_REQUIRED = {
    ("DescribeTrainingJobResponse", "ModelArtifacts"):
        lambda body: body.get("TrainingJobStatus") != "Completed",
}

# Errors every operation may answer with (the model lists only the modeled
# ones per operation; these are the common AWS JSON protocol errors).
COMMON_ERRORS = {
    "ValidationException", "SerializationException", "UnknownOperationException",
    "AccessDeniedException", "UnrecognizedClientException", "InvalidSignatureException",
    "IncompleteSignatureException", "MissingAuthenticationTokenException",
    "ThrottlingException", "ServiceUnavailable", "InternalFailure",
}


def check_value(shape, value, path, problems):
    kind = shape.type_name
    if kind == "structure":
        check_structure(shape, value, path, problems)
    elif kind == "list":
        if not isinstance(value, list):
            problems.append(f"{path}: expected a list, got {type(value).__name__}")
            return
        for i, item in enumerate(value):
            check_value(shape.member, item, f"{path}[{i}]", problems)
    elif kind == "map":
        if not isinstance(value, dict):
            problems.append(f"{path}: expected a map, got {type(value).__name__}")
            return
        for key, item in value.items():
            check_value(shape.key, key, f"{path} key", problems)
            check_value(shape.value, item, f"{path}[{key!r}]", problems)
    elif kind == "string":
        if not isinstance(value, str):
            problems.append(f"{path}: expected a string, got {type(value).__name__} {value!r}")
        elif shape.enum and value not in shape.enum:
            problems.append(f"{path}: {value!r} is not one of the model's values {shape.enum}")
    elif kind in ("integer", "long"):
        if isinstance(value, bool) or not isinstance(value, int):
            problems.append(f"{path}: expected an integer number, got {type(value).__name__} "
                            f"{value!r}")
    elif kind in ("double", "float"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            problems.append(f"{path}: expected a number, got {type(value).__name__} {value!r}")
    elif kind == "boolean":
        if not isinstance(value, bool):
            problems.append(f"{path}: expected a boolean, got {type(value).__name__} {value!r}")
    elif kind == "timestamp":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            problems.append(f"{path}: expected a timestamp (epoch seconds), got "
                            f"{type(value).__name__} {value!r}")
    elif kind == "blob":
        if not isinstance(value, str):
            problems.append(f"{path}: expected a base64 string, got {type(value).__name__}")
    else:
        problems.append(f"{path}: shape type {kind} is not checked")


def check_structure(shape, value, path, problems):
    if not isinstance(value, dict):
        problems.append(f"{path}: expected a structure, got {type(value).__name__}")
        return
    for name in shape.required_members:
        if name in value:
            continue
        excuse = KNOWN_ABSENT_REQUIRED.get((shape.name, name))
        if excuse is None or not excuse(value):
            problems.append(f"{path}.{name}: required by {shape.name} but absent")
    extras = DEBUGPLANE_EXTRAS.get(shape.name, set())
    for name, member_value in value.items():
        if name in shape.members:
            check_value(shape.members[name], member_value, f"{path}.{name}", problems)
        elif name not in extras:
            problems.append(f"{path}.{name}: not a member of {shape.name} and not one of "
                            f"debugplane's extras")


def check_reply(operation_model, status_code, body_bytes):
    """Returns the problems of one reply (an empty list if it fits the model)."""
    problems = []
    name = operation_model.name
    try:
        body = json.loads(body_bytes.decode("utf-8")) if body_bytes else {}
    except ValueError as error:
        return [f"{name}: the body is not JSON: {error}"]
    if status_code >= 300:
        if set(body) != {"__type", "message"}:
            problems.append(f"{name} error: members {sorted(body)} instead of __type, message")
        code = body.get("__type")
        allowed = {shape.name for shape in operation_model.error_shapes} | COMMON_ERRORS
        if code not in allowed:
            problems.append(f"{name} error: __type {code!r} is neither modeled for the operation "
                            f"nor a common AWS error")
        if not isinstance(body.get("message"), str):
            problems.append(f"{name} error: message is not a string")
        return problems
    if operation_model.output_shape is None:
        if body != {}:
            problems.append(f"{name}: the model has no output, got {body!r}")
        return problems
    check_structure(operation_model.output_shape, body, name, problems)
    return problems


class ReplyRecorder:
    """Checks every reply a botocore client receives; keeps what it found."""

    def __init__(self):
        self.problems = []
        self.replies = 0

    def watch(self, client):
        client.meta.events.register("after-call.sagemaker", self._after_call)
        return client

    def _after_call(self, http_response, parsed, model, **kwargs):
        self.replies += 1
        for problem in check_reply(model, http_response.status_code, http_response.content):
            self.problems.append(problem)
