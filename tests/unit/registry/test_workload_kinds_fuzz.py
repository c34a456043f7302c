"""Property-based fuzzing of the Pod, Node, Service, Endpoints, EndpointSlice, ReplicaSet,
Deployment, Job, CronJob, DaemonSet, StatefulSet and PodDisruptionBudget strategies.

A valid object has values at random paths replaced by random JSON (wrong types, nulls,
junk strings, deep nesting). Whatever comes of it, each hook the store calls either refuses
the object with field errors or a decode error, or takes it; none raises, so a request can
never end in a 500 because of what it sent. Tables are computed for every object that
decodes.
"""

from __future__ import annotations

import copy
import os
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from setpoint.registry import (
    cronjobs,
    daemonsets,
    deployments,
    disruptionbudgets,
    endpointslices,
    jobs,
    nodes,
    pods,
    replicasets,
    services,
    statefulsets,
)
from setpoint.registry.options import DeleteOptions
from setpoint.registry.strategy import Strategy

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**64), max_value=2**64)
    | st.floats(allow_nan=False) | st.text(max_size=12)
    | st.sampled_from(["*/5 * * * *", "@hourly", "Europe/Paris", "Indexed", "TZ=UTC",
                       "", "None", "Always", "TCP", "10.96.0.5", "1Gi", "-1", "a=b",
                       "NodePort", "ExternalName", "Exists", "NoExecute"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["schedule", "timeZone", "completions", "parallelism",
                         "completionMode", "selector", "matchLabels", "updateStrategy",
                         "maxUnavailable", "minAvailable", "name", "image", "port", "ports",
                         "containerPort", "nodePort",
                         "protocol", "value", "valueFrom", "fieldRef", "key", "effect",
                         "operator", "limits", "requests", "cpu", "emptyDir", "hostPath",
                         "path", "ip", "addresses", "state", "waiting", "reason",
                         "clusterIP", "type", "targetPort", "conditions", "status"]),
        inner, max_size=4),
    max_leaves=12)

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default",
                                                       "uid": "u-1"},
       "spec": {"containers": [{"name": "app", "image": "busybox",
                                "ports": [{"containerPort": 80}],
                                "env": [{"name": "A", "value": "b"}],
                                "resources": {"limits": {"cpu": "1"}},
                                "volumeMounts": [{"name": "v", "mountPath": "/v"}]}],
                "initContainers": [{"name": "init", "image": "busybox"}],
                "volumes": [{"name": "v", "emptyDir": {}}],
                "tolerations": [{"key": "k", "operator": "Exists"}], "nodeName": "n1"},
       "status": {"phase": "Running", "containerStatuses": [
           {"name": "app", "ready": True, "restartCount": 2,
            "state": {"running": {}}, "lastState": {"terminated": {
                "exitCode": 1, "finishedAt": "2026-01-01T00:00:00Z"}}}]}}
NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
        "spec": {"podCIDR": "10.0.0.0/24", "taints": [{"key": "a", "effect": "NoSchedule"}]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}],
                   "capacity": {"cpu": "2"}}}
SERVICE = {"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": "s", "namespace": "default"},
           "spec": {"type": "NodePort", "ports": [{"port": 80, "targetPort": "http",
                                                   "nodePort": 30000}],
                    "selector": {"app": "x"}, "clusterIP": "10.96.0.5"}}
ENDPOINTS = {"apiVersion": "v1", "kind": "Endpoints",
             "metadata": {"name": "e", "namespace": "default"},
             "subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 80}]}]}
SLICE = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
         "metadata": {"name": "s", "namespace": "default"}, "addressType": "IPv4",
         "endpoints": [{"addresses": ["10.0.0.1"]}], "ports": [{"port": 80}]}

DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment",
              "metadata": {"name": "d", "namespace": "default", "generation": 1},
              "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "x"},
                                                   "matchExpressions": [
                                                       {"key": "tier", "operator": "In",
                                                        "values": ["a"]}]},
                       "strategy": {"type": "RollingUpdate",
                                    "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
                       "template": {"metadata": {"labels": {"app": "x", "tier": "a"}},
                                    "spec": POD["spec"]}},
              "status": {"replicas": 2, "readyReplicas": 1, "conditions": [
                  {"type": "Available", "status": "True"}]}}
REPLICA_SET = {**DEPLOYMENT, "kind": "ReplicaSet",
               "spec": {k: v for k, v in DEPLOYMENT["spec"].items() if k != "strategy"}}
TEMPLATE = {"metadata": {"labels": {"app": "x"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "b"}]}}
JOB = {"apiVersion": "batch/v1", "kind": "Job",
       "metadata": {"name": "j", "namespace": "default", "uid": "u-2"},
       "spec": {"completions": 3, "parallelism": 2, "completionMode": "Indexed",
                "activeDeadlineSeconds": 10, "template": TEMPLATE},
       "status": {"succeeded": 1, "completedIndexes": "0", "startTime": "2026-01-01T00:00:00Z",
                  "conditions": [{"type": "Complete", "status": "True"}]}}
CRONJOB = {"apiVersion": "batch/v1", "kind": "CronJob",
           "metadata": {"name": "c", "namespace": "default"},
           "spec": {"schedule": "*/5 * * * *", "timeZone": "Europe/Paris",
                    "jobTemplate": {"spec": {"template": TEMPLATE}}},
           "status": {"lastScheduleTime": "2026-01-01T00:00:00Z", "active": [{"name": "x"}]}}
DAEMONSET = {"apiVersion": "apps/v1", "kind": "DaemonSet",
             "metadata": {"name": "d", "namespace": "default"},
             "spec": {"selector": {"matchLabels": {"app": "x"}},
                      "template": {"metadata": {"labels": {"app": "x"}}, "spec": {
                          "nodeSelector": {"a": "b"},
                          "containers": [{"name": "c", "image": "b"}]}},
                      "updateStrategy": {"type": "RollingUpdate",
                                         "rollingUpdate": {"maxUnavailable": "10%"}}},
             "status": {"numberReady": 1}}
STATEFULSET = {"apiVersion": "apps/v1", "kind": "StatefulSet",
               "metadata": {"name": "s", "namespace": "default"},
               "spec": {"replicas": 2, "serviceName": "s",
                        "selector": {"matchLabels": {"app": "x"}},
                        "template": {"metadata": {"labels": {"app": "x"}}, "spec": {
                            "containers": [{"name": "c", "image": "b", "volumeMounts": [
                                {"name": "data", "mountPath": "/d"}]}]}},
                        "volumeClaimTemplates": [{"metadata": {"name": "data"},
                                                  "spec": {"accessModes": ["ReadWriteOnce"]}}],
                        "ordinals": {"start": 1},
                        "updateStrategy": {"type": "RollingUpdate",
                                           "rollingUpdate": {"partition": 1}}},
               "status": {"replicas": 1, "readyReplicas": 1}}

PDB = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
       "metadata": {"name": "b", "namespace": "default", "generation": 1},
       "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "x"}},
                "unhealthyPodEvictionPolicy": "AlwaysAllow"},
       "status": {"disruptionsAllowed": 1, "currentHealthy": 2, "desiredHealthy": 1,
                  "expectedPods": 2, "observedGeneration": 1,
                  "disruptedPods": {"p": "2026-01-01T00:00:00Z"},
                  "conditions": [{"type": "DisruptionAllowed", "status": "True",
                                  "reason": "SufficientPods", "message": "",
                                  "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}

STRATEGIES: list[tuple[Strategy, dict[str, Any]]] = [
    (pods.PodStrategy(pods.pod_resource()[0]), POD),
    (nodes.NodeStrategy(nodes.node_resource()[0]), NODE),
    (services.ServiceStrategy(services.service_resource()[0]), SERVICE),
    (services.EndpointsStrategy(services.endpoints_resource()[0]), ENDPOINTS),
    (endpointslices.EndpointSliceStrategy(endpointslices.endpoint_slice_resource()[0]), SLICE),
    (replicasets.ReplicaSetStrategy(replicasets.replica_set_resource()[0]), REPLICA_SET),
    (deployments.DeploymentStrategy(deployments.deployment_resource()[0]), DEPLOYMENT),
    (jobs.JobStrategy(jobs.job_resource()[0]), JOB),
    (cronjobs.CronJobStrategy(cronjobs.cronjob_resource()[0]), CRONJOB),
    (daemonsets.DaemonSetStrategy(daemonsets.daemonset_resource()[0]), DAEMONSET),
    (statefulsets.StatefulSetStrategy(statefulsets.statefulset_resource()[0]), STATEFULSET),
    (disruptionbudgets.PodDisruptionBudgetStrategy(disruptionbudgets.pdb_resource()[0]), PDB),
]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            if prefix or key not in ("apiVersion", "kind", "metadata"):
                found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += _paths(item, (*prefix, i))
    return found


def _set(obj: Any, path: tuple[Any, ...], value: Any) -> None:
    for step in path[:-1]:
        obj = obj[step]
    obj[path[-1]] = value


@st.composite
def mutated(draw: st.DrawFn) -> tuple[Strategy, dict[str, Any], dict[str, Any]]:
    strategy, base = draw(st.sampled_from(STRATEGIES))
    obj = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 4))):
        paths = _paths(obj)
        if not paths:
            break
        _set(obj, draw(st.sampled_from(paths)), draw(JSON))
    return strategy, copy.deepcopy(base), obj


NOW = datetime(2026, 1, 2, tzinfo=UTC)


EXAMPLES = int(os.environ.get("SETPOINT_FUZZ_EXAMPLES", "400"))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_no_hook_raises_whatever_the_object(
        case: tuple[Strategy, dict[str, Any], dict[str, Any]]) -> None:
    strategy, base, obj = case
    version = strategy.info.storage_version
    if strategy.decode_error(obj, version) is not None:
        return  # a 400, as Go's decoder would answer
    strategy.prune(obj, version)
    strategy.default(obj, version)
    created = copy.deepcopy(obj)
    strategy.prepare_for_create(created, version)
    errs = strategy.validate(created, version)
    assert all(e.field is not None for e in errs)
    old = copy.deepcopy(base)
    strategy.default(old, version)
    strategy.prepare_for_create(old, version)
    for subresource in ("", "status"):
        new = copy.deepcopy(obj)
        strategy.prepare_for_update(new, old, version, subresource)
        strategy.validate_subresource_update(new, old, version, subresource)
    for column in strategy.columns(version):
        column.cell(obj, NOW)
        column.cell(created, NOW)
    strategy.field_labels(obj)
    strategy.grace_period(obj, DeleteOptions())
    strategy.blocks_deletion(obj)
    strategy.scale_selector(obj)
