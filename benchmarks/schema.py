"""Measure ``setpoint.schema`` against the ``jsonschema`` package, in one run, on one machine.

The schema is a realistic CRD ``openAPIV3Schema`` (about 40 fields: nested objects, lists of
objects, a map, enums, patterns, bounds, formats, defaults, a list-map). Each object is about
2 KB of JSON. Measured, as objects per second (best of several rounds):

* setpoint ``prune + default + validate`` — what the API server does on every write;
* setpoint ``validate`` alone;
* jsonschema (Draft 4, which matches OpenAPI v3.0's keywords, with its format checker)
  validating the same objects against the same schema, collecting every error.

Objects are decoded fresh for each round outside the timed region (pruning and defaulting
mutate them), and the rounds of the three measurements are interleaved. ``jsonschema`` is
optional: without it the script says so and exits 0.

    python benchmarks/schema.py [--objects 2000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from setpoint.schema import CompiledSchema  # noqa: E402

STR = {"type": "string"}
NAME = {"type": "string", "minLength": 1, "maxLength": 63,
        "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"}
QUANTITY = {"x-kubernetes-int-or-string": True}
PORT = {"type": "object", "required": ["containerPort"], "properties": {
    "name": NAME, "containerPort": {"type": "integer", "minimum": 1, "maximum": 65535},
    "protocol": {"type": "string", "enum": ["TCP", "UDP", "SCTP"], "default": "TCP"}}}
ENV = {"type": "object", "required": ["name"], "properties": {
    "name": {"type": "string", "minLength": 1}, "value": STR}}
CONTAINER = {"type": "object", "required": ["name", "image"], "properties": {
    "name": NAME, "image": {"type": "string", "minLength": 1},
    "args": {"type": "array", "items": STR},
    "ports": {"type": "array", "items": PORT, "x-kubernetes-list-type": "map",
              "x-kubernetes-list-map-keys": ["containerPort"]},
    "env": {"type": "array", "items": ENV},
    "resources": {"type": "object", "properties": {
        "limits": {"type": "object", "additionalProperties": QUANTITY},
        "requests": {"type": "object", "additionalProperties": QUANTITY}}},
    "imagePullPolicy": {"type": "string", "enum": ["Always", "IfNotPresent", "Never"],
                        "default": "IfNotPresent"}}}
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "apiVersion": STR, "kind": STR, "metadata": {"type": "object"},
        "spec": {"type": "object", "required": ["replicas", "template"], "properties": {
            "replicas": {"type": "integer", "minimum": 0, "maximum": 1000, "default": 1},
            "paused": {"type": "boolean", "default": False},
            "minReadySeconds": {"type": "integer", "minimum": 0},
            "revisionHistoryLimit": {"type": "integer", "format": "int32", "default": 10},
            "strategy": {"type": "object", "properties": {
                "type": {"type": "string", "enum": ["RollingUpdate", "Recreate"]},
                "maxSurge": QUANTITY, "maxUnavailable": QUANTITY}},
            "owner": {"type": "object", "properties": {
                "email": {"type": "string", "format": "email"},
                "team": {"type": "string", "maxLength": 40}}},
            "schedule": {"type": "string", "pattern": "^(@(hourly|daily)|[0-9*/, -]+)$"},
            "expiresAt": {"type": "string", "format": "date-time"},
            "weight": {"type": "number", "minimum": 0, "maximum": 1, "multipleOf": 0.01},
            "labels": {"type": "object", "additionalProperties": STR, "maxProperties": 32},
            "template": {"type": "object", "required": ["containers"], "properties": {
                "containers": {"type": "array", "minItems": 1, "maxItems": 10,
                               "items": CONTAINER},
                "nodeSelector": {"type": "object", "additionalProperties": STR},
                "serviceAccountName": NAME,
                "restartPolicy": {"type": "string", "enum": ["Always", "OnFailure", "Never"]},
                "priority": {"type": "integer"},
                "hostNetwork": {"type": "boolean"},
                "volumes": {"type": "array", "items": {
                    "type": "object", "required": ["name"], "properties": {
                        "name": NAME,
                        "configMap": {"type": "object", "properties": {"name": NAME}},
                        "emptyDir": {"type": "object", "properties": {"sizeLimit": QUANTITY}}}}}}},
            "tags": {"type": "array", "items": STR, "x-kubernetes-list-type": "set"}}},
        "status": {"type": "object", "properties": {
            "observedGeneration": {"type": "integer"},
            "readyReplicas": {"type": "integer", "minimum": 0},
            "phase": {"type": "string", "enum": ["Pending", "Running", "Failed"]},
            "conditions": {"type": "array", "items": {
                "type": "object", "required": ["type", "status"], "properties": {
                    "type": STR, "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                    "reason": STR, "message": {"type": "string", "maxLength": 1024},
                    "lastTransitionTime": {"type": "string", "format": "date-time"}}}}}},
    },
}


def make_object(i: int) -> dict[str, Any]:
    container = {
        "name": f"app-{i % 7}", "image": f"registry.example.com/team/app:{i % 13}.0",
        "args": ["--port=8080", "--verbose", f"--shard={i % 4}"],
        "ports": [{"name": "http", "containerPort": 8080}, {"name": "metrics",
                                                            "containerPort": 9090}],
        "env": [{"name": "MODE", "value": "production"}, {"name": "REGION", "value": "eu-west"}],
        "resources": {"limits": {"cpu": "500m", "memory": "256Mi"},
                      "requests": {"cpu": 1, "memory": "128Mi"}},
    }
    return {
        "apiVersion": "bench.example.com/v1", "kind": "Workload",
        "metadata": {"name": f"workload-{i}", "namespace": "default",
                     "labels": {"app": "bench", "tier": "backend"}},
        "spec": {
            "replicas": 3, "minReadySeconds": 5,
            "strategy": {"type": "RollingUpdate", "maxSurge": "25%", "maxUnavailable": 1},
            "owner": {"email": "team@example.com", "team": "platform"},
            "schedule": "@daily", "expiresAt": "2030-01-02T03:04:05Z", "weight": 0.25,
            "labels": {"env": "prod", "cost-center": "1234", "owner": "platform"},
            "template": {"containers": [container, {**container, "name": "sidecar"}],
                         "nodeSelector": {"disktype": "ssd"}, "serviceAccountName": "bench",
                         "restartPolicy": "Always", "priority": 10, "hostNetwork": False,
                         "volumes": [{"name": "config", "configMap": {"name": "app-config"}},
                                     {"name": "cache", "emptyDir": {"sizeLimit": "1Gi"}},
                                     {"name": "scratch", "emptyDir": {}}]},
            "tags": ["a", "b", "c"],
            "unknownField": {"dropped": True},
        },
        "status": {"observedGeneration": 2, "readyReplicas": 3, "phase": "Running",
                   "conditions": [{"type": "Ready", "status": "True", "reason": "AllGood",
                                   "message": "all replicas are ready",
                                   "lastTransitionTime": "2024-05-06T07:08:09Z"},
                                  {"type": "Progressing", "status": "False",
                                   "reason": "Complete", "message": "rollout finished",
                                   "lastTransitionTime": "2024-05-06T07:08:09Z"}]},
    }


def _strip_extensions(schema: Any) -> Any:
    """The same schema without Kubernetes' x-kubernetes-* extensions, for jsonschema."""
    if isinstance(schema, dict):
        out = {k: _strip_extensions(v) for k, v in schema.items()
               if not k.startswith("x-kubernetes-")}
        if schema.get("x-kubernetes-int-or-string"):
            out["type"] = ["integer", "string"]
        return out
    if isinstance(schema, list):
        return [_strip_extensions(v) for v in schema]
    return schema


def measure(fns: dict[str, Callable[[Any], Any]], payloads: list[bytes],
            rounds: int) -> dict[str, float]:
    """Best objects/s of each function over ``rounds`` passes.

    Passes of the different functions are interleaved, so that load from other processes on
    the machine affects them alike. Each pass decodes fresh objects outside the timed region.
    """
    best = dict.fromkeys(fns, 0.0)
    for _ in range(rounds):
        for name, fn in fns.items():
            objects = [orjson.loads(p) for p in payloads]
            start = time.perf_counter()
            for obj in objects:
                fn(obj)
            elapsed = time.perf_counter() - start
            best[name] = max(best[name], len(objects) / elapsed)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--objects", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    payloads = [orjson.dumps(make_object(i)) for i in range(args.objects)]
    size = sum(len(p) for p in payloads) / len(payloads)
    compiled = CompiledSchema.from_openapi(SCHEMA)

    def pipeline(obj: Any) -> None:
        compiled.prune(obj)
        compiled.default(obj)
        errors = compiled.validate(obj)
        assert not errors, errors

    try:
        import jsonschema
    except ImportError:
        print("jsonschema is not installed (pip install jsonschema); nothing to compare with.")
        return 0

    validator_cls = jsonschema.Draft4Validator
    js = validator_cls(_strip_extensions(SCHEMA), format_checker=validator_cls.FORMAT_CHECKER)

    def js_validate(obj: Any) -> None:
        errors = list(js.iter_errors(obj))
        assert not errors, errors

    rates = measure({"ours": pipeline, "validate": compiled.validate, "theirs": js_validate},
                    payloads, args.rounds)
    ours, ours_validate, theirs = rates["ours"], rates["validate"], rates["theirs"]

    print(f"schema benchmark: {args.objects} objects of ~{size:.0f} bytes, best of "
          f"{args.rounds} rounds")
    print(f"{'what':<44} {'objects/s':>12} {'vs jsonschema':>14}")
    rows = [
        ("setpoint prune + default + validate", ours),
        ("setpoint validate only", ours_validate),
        (f"jsonschema {_version()} Draft4 validate", theirs),
    ]
    for name, rate in rows:
        print(f"{name:<44} {rate:>12,.0f} {rate / theirs:>13.1f}x")
    return 0


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("jsonschema")
    except metadata.PackageNotFoundError:  # pragma: no cover
        return "?"


if __name__ == "__main__":
    sys.exit(main())
