"""kubeconfig loading: contexts, KUBECONFIG merges, data vs file fields, tokens, paths."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from setpoint.client import config as cfg
from setpoint.client import kubeconfig as kc

CA_PEM = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def write(path: Path, document: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document))
    return path


def kubeconfig(*, clusters: dict[str, Any] | None = None, users: dict[str, Any] | None = None,
               contexts: dict[str, Any] | None = None, current: str | None = None
               ) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": n, "cluster": c} for n, c in (clusters or {}).items()],
        "users": [{"name": n, "user": u} for n, u in (users or {}).items()],
        "contexts": [{"name": n, "context": c} for n, c in (contexts or {}).items()],
    }
    if current is not None:
        doc["current-context"] = current
    return doc


def simple(server: str = "https://k8s.example:6443", *, user: dict[str, Any] | None = None,
           cluster: dict[str, Any] | None = None, namespace: str | None = None,
           name: str = "dev") -> dict[str, Any]:
    context: dict[str, Any] = {"cluster": name, "user": name}
    if namespace:
        context["namespace"] = namespace
    return kubeconfig(clusters={name: {"server": server, **(cluster or {})}},
                      users={name: user or {}}, contexts={name: context}, current=name)


def test_current_context_token_and_namespace(tmp_path: Path) -> None:
    path = write(tmp_path / "config",
                 simple(user={"token": "abc"}, namespace="team-a",
                        cluster={"certificate-authority-data": b64(CA_PEM)}))
    config = cfg.load_kubeconfig(path)
    assert config.server == "https://k8s.example:6443"
    assert config.token == "abc"
    assert config.namespace == "team-a"
    assert config.ca_data == CA_PEM
    assert config.ca_file is None


def test_namespace_defaults_to_default(tmp_path: Path) -> None:
    assert cfg.load_kubeconfig(write(tmp_path / "c", simple())).namespace == "default"


def test_explicit_context_wins_over_current(tmp_path: Path) -> None:
    doc = kubeconfig(
        clusters={"a": {"server": "https://a:1"}, "b": {"server": "http://b:2"}},
        users={"ua": {"token": "ta"}, "ub": {}},
        contexts={"ca": {"cluster": "a", "user": "ua"},
                  "cb": {"cluster": "b", "user": "ub", "namespace": "nb"}},
        current="ca")
    path = write(tmp_path / "c", doc)
    assert cfg.load_kubeconfig(path).server == "https://a:1"
    other = cfg.load_kubeconfig(path, context="cb")
    assert (other.server, other.namespace, other.token) == ("http://b:2", "nb", None)


@pytest.mark.parametrize(("doc", "context", "message"), [
    (simple(), "nope", "context 'nope' not found"),
    ({**simple(), "current-context": ""}, None, "no current-context"),
    (kubeconfig(clusters={}, users={"u": {}}, contexts={"c": {"cluster": "x", "user": "u"}},
                current="c"), None, "names cluster 'x'"),
    (kubeconfig(clusters={"x": {"server": "https://x"}}, users={},
                contexts={"c": {"cluster": "x", "user": "u"}}, current="c"), None,
     "names user 'u'"),
    (simple(server=""), None, "no server URL"),
    (simple(user={"exec": {"command": "aws", "apiVersion": "client.authentication.k8s.io/v1"}}),
     None, "exec credential plugins are not supported"),
    (simple(user={"auth-provider": {"name": "oidc"}}), None, "auth-provider 'oidc'"),
    (simple(cluster={"certificate-authority-data": "%%%"}), None, "not valid base64"),
    (simple(user={"client-certificate-data": b64(b"cert")}), None, "needs its key"),
    (simple(cluster={"insecure-skip-tls-verify": True,
                     "certificate-authority-data": b64(CA_PEM)}), None, "insecure"),
    (simple(server="ftp://x"), None, "http:// or https://"),
    (simple(cluster={"insecure-skip-tls-verify": "maybe"}), None, "must be true or false"),
    (kubeconfig(clusters={"x": {"server": "https://x"}},
                contexts={"c": {"cluster": ["x"]}}, current="c"), None, "names cluster"),
], ids=["unknown-context", "no-current", "missing-cluster", "missing-user", "no-server",
        "exec", "auth-provider", "bad-base64", "cert-without-key", "insecure-with-ca",
        "bad-scheme", "bad-flag", "cluster-not-a-name"])
def test_unusable_kubeconfigs(tmp_path: Path, doc: dict[str, Any], context: str | None,
                              message: str) -> None:
    with pytest.raises(kc.ConfigError, match=message):
        cfg.load_kubeconfig(write(tmp_path / "c", doc), context=context)


def test_user_without_name_is_anonymous(tmp_path: Path) -> None:
    doc = kubeconfig(clusters={"x": {"server": "http://x:1"}}, contexts={"c": {"cluster": "x"}},
                     current="c")
    config = cfg.load_kubeconfig(write(tmp_path / "c", doc))
    assert config.token is None
    assert config.client_cert_file is None


def test_bare_host_gets_https(tmp_path: Path) -> None:
    assert cfg.load_kubeconfig(write(tmp_path / "c", simple(server="k8s:6443"))).server == \
        "https://k8s:6443"


def test_relative_paths_resolve_against_the_defining_file(tmp_path: Path) -> None:
    path = write(tmp_path / "nested" / "dir" / "config", simple(
        cluster={"certificate-authority": "pki/ca.crt"},
        user={"client-certificate": "pki/user.crt", "client-key": "/abs/user.key",
              "tokenFile": "token"}))
    config = cfg.load_kubeconfig(path)
    base = tmp_path / "nested" / "dir"
    assert config.ca_file == base / "pki" / "ca.crt"
    assert config.client_cert_file == base / "pki" / "user.crt"
    assert config.client_key_file == Path("/abs/user.key")
    assert config.token_file == base / "token"


def test_inline_data_wins_over_files(tmp_path: Path) -> None:
    path = write(tmp_path / "c", simple(
        cluster={"certificate-authority": "ca.crt", "certificate-authority-data": b64(CA_PEM)},
        user={"client-certificate-data": b64(b"CERT"), "client-certificate": "x.crt",
              "client-key-data": b64(b"KEY"), "client-key": "x.key"}))
    config = cfg.load_kubeconfig(path)
    assert (config.ca_data, config.ca_file) == (CA_PEM, None)
    assert (config.client_cert_data, config.client_cert_file) == (b"CERT", None)
    assert (config.client_key_data, config.client_key_file) == (b"KEY", None)


def test_string_flags_are_accepted(tmp_path: Path) -> None:
    path = write(tmp_path / "c", simple(cluster={"insecure-skip-tls-verify": "True"}))
    assert cfg.load_kubeconfig(path).insecure_skip_tls_verify


def test_cluster_options(tmp_path: Path) -> None:
    config = cfg.load_kubeconfig(write(tmp_path / "c", simple(cluster={
        "insecure-skip-tls-verify": True, "tls-server-name": "api.internal",
        "proxy-url": "http://proxy:3128"}, user={"username": "u", "password": "p"})))
    assert config.insecure_skip_tls_verify
    assert config.tls_server_name == "api.internal"
    assert config.proxy_url == "http://proxy:3128"
    assert (config.username, config.password) == ("u", "p")


def test_overrides_replace_fields(tmp_path: Path) -> None:
    config = cfg.load_kubeconfig(write(tmp_path / "c", simple()), request_timeout=3.0)
    assert config.request_timeout == 3.0


def test_explicit_path_must_exist(tmp_path: Path) -> None:
    with pytest.raises(kc.ConfigError, match="cannot read kubeconfig"):
        cfg.load_kubeconfig(tmp_path / "missing")


@pytest.mark.parametrize(("text", "message"), [
    ("- a\n- b\n", "not a mapping"),
    ("clusters: {a: 1}\n", "must be a list"),
    ("clusters: [{cluster: {}}]\n", "needs a name"),
    ("key: [unclosed\n", "not valid YAML"),
], ids=["list", "clusters-mapping", "nameless", "bad-yaml"])
def test_malformed_files(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "c"
    path.write_text(text)
    with pytest.raises(kc.ConfigError, match=message):
        cfg.load_kubeconfig(path)


# --- KUBECONFIG merging ---------------------------------------------------------------------


def test_merge_first_file_wins_per_name_and_for_current_context(tmp_path: Path) -> None:
    first = write(tmp_path / "one" / "config", kubeconfig(
        clusters={"shared": {"server": "https://first:1", "certificate-authority": "ca.crt"}},
        users={"u1": {"token": "t1"}},
        contexts={"c1": {"cluster": "shared", "user": "u1"}}))  # no current-context here
    second = write(tmp_path / "two" / "config", kubeconfig(
        clusters={"shared": {"server": "https://second:2"},
                  "only2": {"server": "https://only2:3"}},
        users={"u1": {"token": "ignored"}, "u2": {"token": "t2"}},
        contexts={"c1": {"cluster": "only2", "user": "u2"},
                  "c2": {"cluster": "only2", "user": "u2", "namespace": "n2"}},
        current="c1"))
    third = write(tmp_path / "three" / "config", simple(name="c3"))
    env = {"KUBECONFIG": os.pathsep.join([str(first), str(second), str(third)])}
    config = cfg.load_kubeconfig(environ=env)
    # current-context from file two, but context c1 and cluster "shared" from file one
    assert config.server == "https://first:1"
    assert config.token == "t1"
    assert config.ca_file == tmp_path / "one" / "ca.crt"
    assert cfg.load_kubeconfig(environ=env, context="c2").namespace == "n2"
    assert cfg.load_kubeconfig(environ=env, context="c3").server == "https://k8s.example:6443"


def test_merge_skips_missing_empty_and_duplicate_entries(tmp_path: Path) -> None:
    real = write(tmp_path / "config", simple(user={"token": "t"}))
    listed = os.pathsep.join(["", str(tmp_path / "missing"), str(real), str(real), ""])
    paths = kc.default_paths({"KUBECONFIG": listed})
    assert paths == [tmp_path / "missing", real]
    merged = kc.merge(paths, require_all=False)
    assert merged.sources == (real,)
    assert cfg.load_kubeconfig(environ={"KUBECONFIG": listed}).token == "t"


def test_merge_with_no_existing_file_fails(tmp_path: Path) -> None:
    with pytest.raises(kc.ConfigError, match="no kubeconfig file found"):
        cfg.load_kubeconfig(environ={"KUBECONFIG": str(tmp_path / "none")})


def test_empty_file_merges_as_nothing(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_text("")
    real = write(tmp_path / "config", simple())
    env = {"KUBECONFIG": os.pathsep.join([str(empty), str(real)])}
    assert cfg.load_kubeconfig(environ=env).server == "https://k8s.example:6443"


def test_explicit_path_ignores_kubeconfig_env(tmp_path: Path) -> None:
    mine = write(tmp_path / "mine", simple(server="https://mine:1"))
    theirs = write(tmp_path / "theirs", simple(server="https://theirs:1"))
    assert cfg.load_kubeconfig(mine, environ={"KUBECONFIG": str(theirs)}).server == \
        "https://mine:1"


def test_default_path_is_home_kube_config(tmp_path: Path) -> None:
    assert kc.default_paths({}, home=tmp_path) == [tmp_path / ".kube" / "config"]


# --- auto_config --------------------------------------------------------------------------


def serviceaccount(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "token").write_text("sa-token\n")
    (root / "namespace").write_text("pods-ns")
    return root


def test_auto_prefers_kubeconfig_env(tmp_path: Path) -> None:
    path = write(tmp_path / "c", simple(server="https://from-env:1"))
    env = {"KUBECONFIG": str(path), "KUBERNETES_SERVICE_HOST": "10.0.0.1",
           "KUBERNETES_SERVICE_PORT": "443"}
    config = cfg.auto_config(environ=env, incluster_root=serviceaccount(tmp_path / "sa"))
    assert config.server == "https://from-env:1"


def test_auto_then_incluster(tmp_path: Path) -> None:
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    config = cfg.auto_config(environ=env, incluster_root=serviceaccount(tmp_path / "sa"),
                         home=tmp_path)
    assert config.server == "https://10.0.0.1:443"
    assert config.namespace == "pods-ns"


def test_auto_then_home(tmp_path: Path) -> None:
    write(tmp_path / ".kube" / "config", simple(server="https://home:1"))
    assert cfg.auto_config(environ={}, home=tmp_path).server == "https://home:1"


def test_auto_with_nothing(tmp_path: Path) -> None:
    with pytest.raises(kc.ConfigError, match="no configuration found"):
        cfg.auto_config(environ={}, home=tmp_path, incluster_root=tmp_path / "sa")


def test_result_is_a_frozen_config(tmp_path: Path) -> None:
    config = cfg.load_kubeconfig(write(tmp_path / "c", simple()))
    assert isinstance(config, cfg.ClientConfig)
    with pytest.raises(AttributeError):
        config.server = "x"  # type: ignore[misc]
