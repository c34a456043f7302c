"""Where the API server is and how to prove who we are: :class:`ClientConfig` and its loaders.

Invariants of :class:`ClientConfig`:

- ``server`` is an absolute ``http://`` or ``https://`` URL without a trailing slash.
- For each of the CA, the client certificate and the client key, at most one of the
  ``*_data`` (PEM bytes) and ``*_file`` fields is set; a certificate comes with its key.
- ``insecure_skip_tls_verify`` excludes a CA (kubectl rejects the pair as well).
- Every timeout and limit is positive: nothing is unbounded.
- Secrets (``token``, ``password``, ``client_key_data``) never appear in ``repr``.

Files are named, not read, here: the transport reads CA and certificate files when it builds
its TLS context, and re-reads ``token_file`` periodically (projected service-account tokens
rotate under a running process).

Loaders: :func:`load_kubeconfig` (kubectl's rules, see :mod:`setpoint.client.kubeconfig`),
:func:`load_incluster` (a pod's service account) and :func:`auto_config` (the first that
applies). Exec and auth-provider credential plugins are not supported; they raise
:class:`ConfigError` naming the plugin.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import os
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from setpoint.client import kubeconfig

#: where a pod's service-account credentials are mounted
INCLUSTER_ROOT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientConfig:
    """Everything the client needs to reach one API server as one identity."""

    server: str
    ca_data: bytes | None = None
    ca_file: Path | None = None
    client_cert_data: bytes | None = None
    client_cert_file: Path | None = None
    client_key_data: bytes | None = field(default=None, repr=False)
    client_key_file: Path | None = None
    token: str | None = field(default=None, repr=False)
    #: re-read every ``token_refresh_interval`` seconds; wins over ``token`` once read
    token_file: Path | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    insecure_skip_tls_verify: bool = False
    #: the name to verify the server certificate against, when it differs from the URL host
    tls_server_name: str | None = None
    #: an ``http://`` proxy for every request
    proxy_url: str | None = None
    #: the namespace used when a call names none
    namespace: str = "default"
    connect_timeout: float = 10.0
    #: whole-request limit for everything except watches
    request_timeout: float = 60.0
    #: a watch that delivers no byte for this long ends (the caller re-watches)
    watch_inactivity_timeout: float = 90.0
    token_refresh_interval: float = 60.0
    #: connection-pool size. Every open watch holds one connection; a request that finds the
    #: pool full waits for a free connection for up to ``connect_timeout``
    max_connections: int = 100
    user_agent: str = "setpoint-client"

    def __post_init__(self) -> None:
        parsed = urllib.parse.urlsplit(self.server)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise kubeconfig.ConfigError(
                f"server must be an http:// or https:// URL, not {self.server!r}")
        if self.server.endswith("/"):
            object.__setattr__(self, "server", self.server.rstrip("/"))
        pairs = (("ca_data", "ca_file"), ("client_cert_data", "client_cert_file"),
                 ("client_key_data", "client_key_file"))
        for data_name, file_name in pairs:
            if getattr(self, data_name) is not None and getattr(self, file_name) is not None:
                raise kubeconfig.ConfigError(f"{data_name} and {file_name} are mutually exclusive")
        has_cert = self.client_cert_data is not None or self.client_cert_file is not None
        has_key = self.client_key_data is not None or self.client_key_file is not None
        if has_cert != has_key:
            raise kubeconfig.ConfigError(
                "a client certificate needs its key, and a key its certificate")
        if self.insecure_skip_tls_verify and (self.ca_data is not None
                                              or self.ca_file is not None):
            raise kubeconfig.ConfigError("a certificate authority cannot be combined with "
                              "insecure_skip_tls_verify")
        if (self.username is None) != (self.password is None):
            raise kubeconfig.ConfigError("basic authentication needs both username and password")
        if self.proxy_url is not None and not self.proxy_url.startswith("http://"):
            raise kubeconfig.ConfigError(
                f"only http:// proxies are supported, not {self.proxy_url!r}")
        for name in ("connect_timeout", "request_timeout", "watch_inactivity_timeout",
                     "token_refresh_interval"):
            if not getattr(self, name) > 0:
                raise kubeconfig.ConfigError(f"{name} must be positive")
        if self.max_connections < 1:
            raise kubeconfig.ConfigError("max_connections must be at least 1")
        if not self.namespace:
            raise kubeconfig.ConfigError("namespace must not be empty")

    @property
    def is_https(self) -> bool:
        return self.server.startswith("https://")


# --- kubeconfig -----------------------------------------------------------------------------


def _decode(entry: Mapping[str, Any], key: str, where: str) -> bytes | None:
    value = entry.get(key)
    if value in (None, ""):
        return None
    if not isinstance(value, str):
        raise kubeconfig.ConfigError(f"{where}: {key} must be a base64 string")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as e:
        raise kubeconfig.ConfigError(f"{where}: {key} is not valid base64") from e


def _path(entry: Mapping[str, Any], key: str) -> Path | None:
    value = entry.get(key)
    return Path(value) if isinstance(value, str) and value else None


def _pick(entry: Mapping[str, Any], data_key: str, file_key: str,
          where: str) -> tuple[bytes | None, Path | None]:
    # client-go: inline data wins over a file when both are present.
    data = _decode(entry, data_key, where)
    return (data, None) if data is not None else (None, _path(entry, file_key))


def _flag(entry: Mapping[str, Any], key: str, where: str) -> bool:
    value = entry.get(key, False)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise kubeconfig.ConfigError(f"{where}: {key} must be true or false, not {value!r}")


def _server_url(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise kubeconfig.ConfigError(f"{where}: no server URL")
    # kubectl's default scheme for a bare host:port
    return value if "://" in value else "https://" + value


def config_from_selection(selection: kubeconfig.Selection, **overrides: Any) -> ClientConfig:
    """Build a :class:`ClientConfig` from one selected context."""
    cluster, user = selection.cluster, selection.user
    where = f"context {selection.context!r}"
    if user.get("exec"):
        command = user["exec"].get("command") if isinstance(user["exec"], Mapping) else None
        raise kubeconfig.ConfigError(f"{where}: exec credential plugins are not supported "
                          f"(the user runs {command!r}); use a token or client certificate")
    if user.get("auth-provider"):
        provider = user["auth-provider"]
        name = provider.get("name") if isinstance(provider, Mapping) else provider
        raise kubeconfig.ConfigError(f"{where}: auth-provider {name!r} is not supported")
    ca_data, ca_file = _pick(cluster, "certificate-authority-data", "certificate-authority",
                             where)
    cert_data, cert_file = _pick(user, "client-certificate-data", "client-certificate", where)
    key_data, key_file = _pick(user, "client-key-data", "client-key", where)
    token = user.get("token")
    proxy = cluster.get("proxy-url")
    values: dict[str, Any] = {
        "server": _server_url(cluster.get("server"), where),
        "ca_data": ca_data, "ca_file": ca_file,
        "client_cert_data": cert_data, "client_cert_file": cert_file,
        "client_key_data": key_data, "client_key_file": key_file,
        "token": str(token) if token else None,
        "token_file": _path(user, "tokenFile"),
        "username": user.get("username") or None,
        "password": user.get("password") or None,
        "insecure_skip_tls_verify": _flag(cluster, "insecure-skip-tls-verify", where),
        "tls_server_name": cluster.get("tls-server-name") or None,
        "proxy_url": proxy or None,
        "namespace": selection.namespace,
    }
    values.update(overrides)
    try:
        return ClientConfig(**values)
    except kubeconfig.ConfigError as e:
        raise kubeconfig.ConfigError(f"{where}: {e}") from e


def load_kubeconfig(path: str | os.PathLike[str] | None = None, context: str | None = None,
                    *, environ: Mapping[str, str] | None = None,
                    **overrides: Any) -> ClientConfig:
    """The configuration a kubeconfig's context describes, as ``kubectl`` would read it.

    ``path`` wins over ``KUBECONFIG`` (read from ``environ``, default ``os.environ``), which
    wins over ``~/.kube/config``. ``context`` defaults to the merged ``current-context``.
    ``overrides`` replace :class:`ClientConfig` fields (e.g. ``request_timeout=5``).
    """
    env = os.environ if environ is None else environ
    if path is not None:
        merged = kubeconfig.merge([Path(path)], require_all=True)
    else:
        merged = kubeconfig.merge(kubeconfig.default_paths(env), require_all=False)
    return config_from_selection(kubeconfig.select(merged, context), **overrides)


def config_from_document(document: Mapping[str, Any], context: str | None = None,
                         **overrides: Any) -> ClientConfig:
    """The configuration of a kubeconfig held in memory (a dict as the YAML file reads)."""
    merged = kubeconfig.merge_documents([(Path("<kubeconfig>"), document)])
    return config_from_selection(kubeconfig.select(merged, context), **overrides)


# --- in-cluster -----------------------------------------------------------------------------


def load_incluster(root: str | os.PathLike[str] = INCLUSTER_ROOT, *,
                   environ: Mapping[str, str] | None = None,
                   **overrides: Any) -> ClientConfig:
    """A pod's own identity: its service-account token, the cluster CA and its namespace.

    Reads ``KUBERNETES_SERVICE_HOST`` and ``KUBERNETES_SERVICE_PORT`` from ``environ``
    (default ``os.environ``) and ``token``, ``ca.crt`` and ``namespace`` under ``root``. The
    token is referenced as a file, so a rotated projected token is picked up.
    """
    env = os.environ if environ is None else environ
    base = Path(root)
    host = env.get("KUBERNETES_SERVICE_HOST", "")
    port = env.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise kubeconfig.ConfigError("not running in a cluster: KUBERNETES_SERVICE_HOST and "
                          "KUBERNETES_SERVICE_PORT must be set")
    token_file = base / "token"
    if not token_file.is_file():
        raise kubeconfig.ConfigError(
            f"not running in a cluster: no service-account token at {token_file}")
    try:
        is_v6 = ipaddress.ip_address(host).version == 6
    except ValueError:
        is_v6 = False
    netloc = f"[{host}]:{port}" if is_v6 else f"{host}:{port}"
    ca_file = base / "ca.crt"
    namespace = "default"
    namespace_file = base / "namespace"
    if namespace_file.is_file():
        namespace = namespace_file.read_text().strip() or "default"
    values: dict[str, Any] = {
        "server": f"https://{netloc}",
        "ca_file": ca_file if ca_file.is_file() else None,
        "token_file": token_file,
        "namespace": namespace,
    }
    values.update(overrides)
    return ClientConfig(**values)


def auto_config(*, environ: Mapping[str, str] | None = None,
                incluster_root: str | os.PathLike[str] = INCLUSTER_ROOT,
                home: Path | None = None, **overrides: Any) -> ClientConfig:
    """The first configuration that applies, in controller-runtime's order.

    1. ``KUBECONFIG`` when set; 2. the in-cluster service account when
    ``KUBERNETES_SERVICE_HOST`` is set; 3. ``~/.kube/config``.
    """
    env = os.environ if environ is None else environ
    if env.get("KUBECONFIG"):
        return load_kubeconfig(environ=env, **overrides)
    if env.get("KUBERNETES_SERVICE_HOST"):
        return load_incluster(incluster_root, environ=env, **overrides)
    default = kubeconfig.default_paths({}, home)
    if default[0].exists():
        return config_from_selection(
            kubeconfig.select(kubeconfig.merge(default, require_all=True)), **overrides)
    raise kubeconfig.ConfigError("no configuration found: KUBECONFIG is unset, this is not a "
                                 f"pod, and {default[0]} does not exist")
