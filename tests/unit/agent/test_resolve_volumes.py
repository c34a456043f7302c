"""Inputs from ConfigMaps and Secrets, and volumes as files in the pod's directory."""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from setpoint.agent import environment as envs
from setpoint.agent import inputs as inp
from setpoint.agent import resolve, volumes

CMS = {"cm": {"data": {"a": "1", "b": "2"},
              "binaryData": {"bin": base64.b64encode(b"\0\1").decode()}},
       "other": {"data": {"x": "y"}}}
SECRETS = {"s": {"data": {"pw": base64.b64encode(b"hunter2").decode()}}}


def pod(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "u", "labels": {"k": "v"}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}


def test_references() -> None:
    p = pod(volumes=[{"name": "v", "configMap": {"name": "cm"}},
                     {"name": "t", "projected": {"sources": [
                         {"serviceAccountToken": {"path": "token", "expirationSeconds": 600}},
                         {"secret": {"name": "s2"}}]}}])
    p["spec"]["containers"][0]["envFrom"] = [{"secretRef": {"name": "s"}}]
    p["spec"]["containers"][0]["env"] = [{"name": "X", "valueFrom": {
        "configMapKeyRef": {"name": "other", "key": "x"}}}]
    refs = resolve.references(p)
    assert refs.config_maps == {"cm", "other"}
    assert refs.secrets == {"s", "s2"}
    assert refs.tokens == (("t", "token", "", 600),)


def test_env_from_and_key_references() -> None:
    p = pod()
    p["spec"]["containers"][0]["envFrom"] = [{"configMapRef": {"name": "cm"}, "prefix": "CM_"},
                                             {"secretRef": {"name": "s"}},
                                             {"configMapRef": {"name": "gone", "optional": True}}]
    p["spec"]["containers"][0]["env"] = [
        {"name": "X", "valueFrom": {"configMapKeyRef": {"name": "other", "key": "x"}}},
        {"name": "Y", "valueFrom": {"secretKeyRef": {"name": "s", "key": "nope",
                                                     "optional": True}}}]
    got = resolve.resolve_inputs(p, config_maps=CMS, secrets=SECRETS).container("c")
    assert got.error is None
    assert got.env_from == (("CM_a", "1"), ("CM_b", "2"), ("CM_bin", "\0\1"), ("pw", "hunter2"))
    assert dict(got.env) == {"X": "y"}


@pytest.mark.parametrize(("env", "message"), [
    ({"configMapKeyRef": {"name": "cm", "key": "zz"}}, "couldn't find key zz in ConfigMap ns/cm"),
    ({"secretKeyRef": {"name": "s", "key": "zz"}}, "couldn't find key zz in Secret ns/s"),
    ({"configMapKeyRef": {"name": "gone", "key": "a"}}, 'configmap "gone" not found'),
    ({"secretKeyRef": {"name": "gone", "key": "a"}}, 'secret "gone" not found'),
])
def test_missing_references_are_config_errors(env: dict[str, Any], message: str) -> None:
    p = pod()
    p["spec"]["containers"][0]["env"] = [{"name": "X", "valueFrom": env}]
    got = resolve.resolve_inputs(p, config_maps=CMS, secrets=SECRETS).container("c")
    assert got.error == message


def test_volume_files() -> None:
    p = pod(volumes=[
        {"name": "all", "configMap": {"name": "cm"}},
        {"name": "some", "configMap": {"name": "cm", "defaultMode": 0o600,
                                       "items": [{"key": "a", "path": "dir/a.txt",
                                                  "mode": 0o400}, {"key": "b", "path": "b"}]}},
        {"name": "sec", "secret": {"secretName": "s"}},
        {"name": "proj", "projected": {"sources": [
            {"configMap": {"name": "other"}},
            {"serviceAccountToken": {"path": "token"}}]}},
        {"name": "opt", "configMap": {"name": "gone", "optional": True}},
        {"name": "bad", "configMap": {"name": "gone"}},
        {"name": "badkey", "secret": {"secretName": "s", "items": [{"key": "zz", "path": "z"}]}},
    ])
    got = resolve.resolve_inputs(p, config_maps=CMS, secrets=SECRETS,
                                 tokens={("proj", "token"): "tok"})
    files = {name: [(f.path, f.data, f.mode, f.secret) for f in fs]
             for name, fs in got.volumes.items()}
    assert files["all"] == [("a", b"1", 0o644, False), ("b", b"2", 0o644, False),
                            ("bin", b"\0\1", 0o644, False)]
    assert files["some"] == [("dir/a.txt", b"1", 0o400, False), ("b", b"2", 0o600, False)]
    assert files["sec"] == [("pw", b"hunter2", 0o644, True)]
    assert files["proj"] == [("x", b"y", 0o644, False), ("token", b"tok", 0o644, True)]
    assert files["opt"] == []
    assert got.volume_errors == {
        "bad": 'MountVolume.SetUp failed for volume "bad" : configmap "gone" not found',
        "badkey": 'MountVolume.SetUp failed for volume "badkey" : Secret references '
                  'non-existent secret key: zz'}


@pytest.mark.parametrize("path", ["/abs", "../up", "a/../../b", "..data", "a//b", "", "a/./b"])
def test_volume_file_paths_stay_inside(path: str) -> None:
    with pytest.raises(inp.InputsError):
        inp.VolumeFile(path=path, data=b"")


def test_inputs_round_trip_through_json() -> None:
    p = pod(volumes=[{"name": "sec", "secret": {"secretName": "s"}}])
    p["spec"]["containers"][0]["envFrom"] = [{"configMapRef": {"name": "cm"}}]
    got = resolve.resolve_inputs(p, config_maps=CMS, secrets=SECRETS,
                                 service_env={"KUBERNETES_SERVICE_HOST": "10.96.0.1"})
    assert inp.from_json(inp.to_json(got)) == got


FACTS = envs.PodFacts(pod_ip="10.0.0.5")


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_materialise(tmp_path: Path) -> None:
    host_dir = tmp_path / "host" / "made"
    p = pod(volumes=[
        {"name": "scratch", "emptyDir": {}},
        {"name": "cfg", "configMap": {"name": "cm"}},
        {"name": "sec", "secret": {"secretName": "s"}},
        {"name": "info", "downwardAPI": {"items": [
            {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
            {"path": "ip", "fieldRef": {"fieldPath": "status.podIP"}}]}},
        {"name": "host", "hostPath": {"path": str(host_dir), "type": "DirectoryOrCreate"}},
        {"name": "missing", "hostPath": {"path": str(tmp_path / "nope"), "type": "Directory"}},
        {"name": "claim", "persistentVolumeClaim": {"claimName": "data"}},
    ])
    ins = resolve.resolve_inputs(p, config_maps=CMS, secrets=SECRETS)
    vs = volumes.materialise(p, tmp_path / "pod", ins, FACTS)
    assert _mode(tmp_path / "pod" / "volumes") == 0o700
    cfg = Path(vs.paths["cfg"])
    assert (cfg / "a").read_text() == "1"
    assert (cfg / "a").is_symlink()
    assert os.readlink(cfg / "a") == "..data/a"
    sec = Path(vs.paths["sec"]) / "pw"
    assert sec.read_bytes() == b"hunter2"
    assert _mode(sec.resolve()) == 0o600  # owner bits only, whatever the mode asked
    info = Path(vs.paths["info"])
    assert (info / "labels").read_text() == 'k="v"\n'
    assert (info / "ip").read_text() == "10.0.0.5"
    assert Path(vs.paths["scratch"]).is_dir()
    assert vs.paths["host"] == str(host_dir)
    assert host_dir.is_dir()
    assert vs.errors == {
        "missing": f"hostPath type check failed: {tmp_path / 'nope'} is not a directory",
        "claim": 'MountVolume.SetUp failed for volume "claim" : setpoint\'s process runtime '
                 "does not support persistentVolumeClaim volumes"}


def test_updates_are_atomic_and_only_when_changed(tmp_path: Path) -> None:
    target = tmp_path / "v"
    assert volumes.write_atomic(target, [inp.VolumeFile(path="a", data=b"1"),
                                         inp.VolumeFile(path="d/b", data=b"2")])
    first = os.readlink(target / "..data")
    assert not volumes.write_atomic(target, [inp.VolumeFile(path="a", data=b"1"),
                                             inp.VolumeFile(path="d/b", data=b"2")])
    assert os.readlink(target / "..data") == first
    assert volumes.write_atomic(target, [inp.VolumeFile(path="a", data=b"new")])
    assert (target / "a").read_text() == "new"
    assert not (target / "d").exists()  # a key that went away goes away
    assert not (target / first).exists()  # the old version is removed
    assert sorted(p.name for p in target.iterdir() if not p.name.startswith("..")) == ["a"]


def test_mounts_and_sub_paths(tmp_path: Path) -> None:
    p = pod(volumes=[{"name": "cfg", "configMap": {"name": "cm"}},
                     {"name": "data", "emptyDir": {}}])
    c = {"name": "c", "volumeMounts": [
        {"name": "data", "mountPath": "/var/data/"},
        {"name": "cfg", "mountPath": "/etc/app/a.conf", "subPath": "a"},
        {"name": "data", "mountPath": "/var/data/logs", "subPathExpr": "$(POD_NAME)"},
        {"name": "cfg", "mountPath": "/etc/app", "readOnly": True}]}
    vs = volumes.materialise(p, tmp_path, resolve.resolve_inputs(p, config_maps=CMS), FACTS)
    mounts = volumes.mounts(c, vs, {"POD_NAME": "p"})
    # parents before children; otherwise in the spec's order
    assert [(m.target, m.read_only) for m in mounts] == [
        ("/var/data", False), ("/etc/app", True), ("/etc/app/a.conf", False),
        ("/var/data/logs", False)]
    sub = next(m for m in mounts if m.target == "/etc/app/a.conf")
    assert Path(sub.source).read_text() == "1"  # the file itself, not the symlink
    assert next(m for m in mounts if m.target == "/var/data/logs").source == str(
        Path(vs.paths["data"]) / "p")
    os.symlink("/etc", Path(vs.paths["data"]) / "escape")
    with pytest.raises(ValueError, match="leaves volume"):
        volumes.mounts({"name": "c", "volumeMounts": [
            {"name": "data", "mountPath": "/x", "subPath": "escape"}]}, vs, {})
    with pytest.raises(inp.InputsError):
        volumes.mounts({"name": "c", "volumeMounts": [
            {"name": "data", "mountPath": "/x", "subPath": "../../etc"}]}, vs, {})
