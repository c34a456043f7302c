"""ClientConfig invariants and the in-cluster loader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from setpoint.client import config as cfg
from setpoint.client import kubeconfig as kc


@pytest.mark.parametrize(("fields", "message"), [
    ({"server": "k8s:6443"}, "http:// or https://"),
    ({"server": "https://"}, "http:// or https://"),
    ({"server": "https://x", "ca_data": b"a", "ca_file": Path("b")}, "mutually exclusive"),
    ({"server": "https://x", "client_cert_file": Path("c")}, "needs its key"),
    ({"server": "https://x", "client_key_data": b"k"}, "needs its key"),
    ({"server": "https://x", "insecure_skip_tls_verify": True, "ca_file": Path("ca")},
     "insecure"),
    ({"server": "https://x", "username": "u"}, "both username and password"),
    ({"server": "https://x", "proxy_url": "socks5://p:1080"}, "only http:// proxies"),
    ({"server": "https://x", "request_timeout": 0}, "request_timeout must be positive"),
    ({"server": "https://x", "watch_inactivity_timeout": -1}, "must be positive"),
    ({"server": "https://x", "max_connections": 0}, "max_connections"),
    ({"server": "https://x", "namespace": ""}, "namespace"),
], ids=["no-scheme", "no-host", "ca-twice", "cert-no-key", "key-no-cert", "insecure-ca",
        "half-basic", "socks", "zero-timeout", "negative-inactivity", "no-connections",
        "empty-namespace"])
def test_invalid_configs(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(kc.ConfigError, match=message):
        cfg.ClientConfig(**fields)


def test_trailing_slash_is_dropped() -> None:
    assert cfg.ClientConfig(server="https://x:6443/prefix/").server == "https://x:6443/prefix"


def test_secrets_stay_out_of_repr() -> None:
    config = cfg.ClientConfig(server="https://x", token="s3cret", username="u", password="pw",
                          client_cert_data=b"cert", client_key_data=b"PRIVATE")
    text = repr(config)
    assert "s3cret" not in text
    assert "pw" not in text
    assert "PRIVATE" not in text
    assert "https://x" in text


def test_is_https() -> None:
    assert cfg.ClientConfig(server="https://x").is_https
    assert not cfg.ClientConfig(server="http://x").is_https


# --- in-cluster ---------------------------------------------------------------------------

ENV = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}


def mount(root: Path, *, token: str = "tok", namespace: str | None = "apps",
          ca: bool = True) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "token").write_text(token)
    if namespace is not None:
        (root / "namespace").write_text(namespace + "\n")
    if ca:
        (root / "ca.crt").write_text("pem")
    return root


def test_incluster_reads_the_mounted_service_account(tmp_path: Path) -> None:
    root = mount(tmp_path / "sa")
    config = cfg.load_incluster(root, environ=ENV)
    assert config.server == "https://10.96.0.1:443"
    assert config.token_file == root / "token"
    assert config.token is None  # read per request, so rotation is picked up
    assert config.ca_file == root / "ca.crt"
    assert config.namespace == "apps"


def test_incluster_ipv6_host_is_bracketed(tmp_path: Path) -> None:
    env = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "6443"}
    assert cfg.load_incluster(mount(tmp_path / "sa"), environ=env).server == "https://[fd00::1]:6443"


def test_incluster_defaults(tmp_path: Path) -> None:
    config = cfg.load_incluster(mount(tmp_path / "sa", namespace=None, ca=False), environ=ENV)
    assert config.namespace == "default"
    assert config.ca_file is None


def test_incluster_overrides(tmp_path: Path) -> None:
    config = cfg.load_incluster(mount(tmp_path / "sa"), environ=ENV, namespace="other",
                            request_timeout=5)
    assert (config.namespace, config.request_timeout) == ("other", 5)


@pytest.mark.parametrize("env", [{}, {"KUBERNETES_SERVICE_HOST": "10.0.0.1"},
                                 {"KUBERNETES_SERVICE_PORT": "443"}],
                         ids=["none", "no-port", "no-host"])
def test_incluster_needs_the_service_env(tmp_path: Path, env: dict[str, str]) -> None:
    with pytest.raises(kc.ConfigError, match="KUBERNETES_SERVICE_HOST"):
        cfg.load_incluster(mount(tmp_path / "sa"), environ=env)


def test_incluster_needs_a_token(tmp_path: Path) -> None:
    (tmp_path / "sa").mkdir()
    with pytest.raises(kc.ConfigError, match="no service-account token"):
        cfg.load_incluster(tmp_path / "sa", environ=ENV)
