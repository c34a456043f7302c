"""$(VAR) expansion, the env order, and the downward API, as the kubelet computes them."""

from __future__ import annotations

from fractions import Fraction

import pytest

from setpoint.agent import environment as envs
from setpoint.agent import inputs as inp

VARS = {"A": "a", "EMPTY": "", "B": "$(A)"}


@pytest.mark.parametrize(("text", "expected"), [
    ("$(A)", "a"),
    ("x$(A)y", "xay"),
    ("$(A)$(A)", "aa"),
    ("$(MISSING)", "$(MISSING)"),
    ("$$(A)", "$(A)"),
    ("$$$(A)", "$a"),
    ("$(EMPTY)x", "x"),
    ("$(A", "$(A"),
    ("$A", "$A"),
    ("$", "$"),
    ("a$", "a$"),
    ("$(B)", "$(A)"),  # values are not expanded again
    ("$()", "$()"),
    ("(A)", "(A)"),
], ids=lambda v: repr(v))
def test_expand(text: str, expected: str) -> None:
    assert envs.expand(text, VARS.get) == expected


POD = {
    "metadata": {"name": "web", "namespace": "prod", "uid": "u-1",
                 "labels": {"app": "web", "tier": "front"},
                 "annotations": {"note": 'say "hi"\n'}},
    "spec": {"nodeName": "n1", "serviceAccountName": "sa",
             "containers": [{"name": "c", "resources": {"limits": {"cpu": "250m",
                                                                    "memory": "64Mi"},
                                                         "requests": {"cpu": "100m"}}},
                            {"name": "bare"}]},
}
FACTS = envs.PodFacts(pod_ip="10.0.0.7", host_ip="192.168.1.2", node_name="n1",
                      allocatable_cpu=Fraction(4), allocatable_memory=Fraction(8 << 30))


@pytest.mark.parametrize(("path", "value"), [
    ("metadata.name", "web"), ("metadata.namespace", "prod"), ("metadata.uid", "u-1"),
    ("metadata.labels['app']", "web"), ('metadata.labels["tier"]', "front"),
    ("metadata.labels['none']", ""), ("spec.nodeName", "n1"),
    ("spec.serviceAccountName", "sa"), ("status.podIP", "10.0.0.7"),
    ("status.hostIP", "192.168.1.2"), ("status.podIPs", "10.0.0.7"),
])
def test_field_ref(path: str, value: str) -> None:
    assert envs.field_ref(POD, path, FACTS) == value


def test_field_ref_rejects_unknown_paths() -> None:
    with pytest.raises(ValueError, match="unsupported fieldPath"):
        envs.field_ref(POD, "spec.containers", FACTS)


@pytest.mark.parametrize(("container", "resource", "divisor", "value"), [
    (0, "limits.cpu", None, "1"),          # 250m rounds up to one core
    (0, "limits.cpu", "1m", "250"),
    (0, "requests.cpu", "1m", "100"),
    (0, "limits.memory", "1Mi", "64"),
    (0, "requests.memory", "1Mi", "64"),   # requests default to limits
    (1, "limits.cpu", None, "4"),          # no limit: the node's allocatable
    (1, "limits.memory", "1Gi", "8"),
    (1, "requests.cpu", None, "0"),
])
def test_resource_field_ref(container: int, resource: str, divisor: str | None,
                            value: str) -> None:
    c = POD["spec"]["containers"][container]  # type: ignore[index]
    assert envs.resource_field_ref(c, resource, divisor, FACTS) == value


def test_container_env_order_and_sources() -> None:
    container = {"name": "c", "env": [  # no limits: CPU reads the node's 4 cores
        {"name": "FROM_LITERAL", "value": "x-$(PREFIXED_K)-$(SVC_HOST)-$(LATER)"},
        {"name": "LATER", "value": "late"},
        {"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu",
                                                           "divisor": "1m"}}},
        {"name": "FROM_CM", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}}},
        {"name": "OPTIONAL", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k",
                                                            "optional": True}}},
        {"name": "PREFIXED_K", "value": "overridden"},
    ]}
    ins = inp.ContainerInputs(env_from=(("PREFIXED_K", "v1"), ("OTHER", "o")),
                              env={"FROM_CM": "cm-value"})
    env = envs.container_env(POD, container, ins, (("SVC_HOST", "10.1.0.1"),
                                                   ("OTHER", "svc")), FACTS)
    assert env == [("PREFIXED_K", "overridden"), ("OTHER", "o"),
                   ("FROM_LITERAL", "x-v1-10.1.0.1-$(LATER)"), ("LATER", "late"),
                   ("NAME", "web"), ("CPU", "4000"), ("FROM_CM", "cm-value"),
                   ("SVC_HOST", "10.1.0.1")]


def test_downward_files_format_labels_and_annotations_as_the_kubelet() -> None:
    files = envs.downward_files(POD, [
        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
        {"path": "notes/annotations", "fieldRef": {"fieldPath": "metadata.annotations"},
         "mode": 0o600},
        {"path": "mem", "resourceFieldRef": {"containerName": "c", "resource": "limits.memory",
                                             "divisor": "1Mi"}},
    ], 0o644, FACTS)
    assert [(f.path, f.data, f.mode) for f in files] == [
        ("labels", b'app="web"\ntier="front"\n', 0o644),
        ("notes/annotations", b'note="say \\"hi\\"\\n"\n', 0o600),
        ("mem", b"64", 0o644),
    ]


REWRITES = [["/etc/config", "/pods/u/volumes/cfg"], ["/etc/config/deep", "/pods/u/volumes/deep"],
            ["/data", "/pods/u/volumes/data"]]


@pytest.mark.parametrize(("text", "expected"), [
    ("/etc/config/key", "/pods/u/volumes/cfg/key"),
    ("/etc/config", "/pods/u/volumes/cfg"),
    ("/etc/config/deep/x", "/pods/u/volumes/deep/x"),       # the longest target wins
    ("cat /etc/config/key; ls /data", "cat /pods/u/volumes/cfg/key; ls /pods/u/volumes/data"),
    ("--config=/etc/config/a.yaml", "--config=/pods/u/volumes/cfg/a.yaml"),
    ("'/data'", "'/pods/u/volumes/data'"),
    ("/etc/configuration", "/etc/configuration"),           # not a whole component
    ("/var/data", "/var/data"),                             # does not start a word
    ("x/data", "x/data"),
    ("", ""),
], ids=repr)
def test_paths_under_a_mount_point_the_volume_without_namespaces(text: str,
                                                                 expected: str) -> None:
    from setpoint.agent.supervisor import rewrite_paths

    assert rewrite_paths([text], REWRITES) == [expected]
