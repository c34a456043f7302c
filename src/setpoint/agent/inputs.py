"""What a pod needs from the API besides itself, already fetched: :class:`ResolvedInputs`.

A runtime never talks to the API server. Whoever drives it (the agent's sync loop) reads the
ConfigMaps, Secrets and ServiceAccount tokens a pod refers to and hands the runtime their
*contents*, shaped as the pod will see them:

* per container, the values of ``envFrom`` (prefixes applied, in order) and of the ``env``
  entries whose ``valueFrom`` is a ``configMapKeyRef`` or ``secretKeyRef``; ``fieldRef`` and
  ``resourceFieldRef`` entries are computed by the runtime itself, which knows the pod's IP;
* per volume, the files of ``configMap``, ``secret`` and ``projected`` volumes (keys already
  mapped to paths and modes by ``items``); ``downwardAPI`` files are again the runtime's;
* the service environment variables (``KUBERNETES_SERVICE_HOST`` and friends).

Something required that does not exist is not an exception here: it is a message the runtime
reports as Kubernetes does (``CreateContainerConfigError`` for a container's env, a
``FailedMount`` event and ``ContainerCreating`` for a volume), until new inputs arrive.
:func:`setpoint.agent.resolve.resolve_inputs` builds all this from the objects.

Invariants: every path is relative, normalised and free of ``..`` (checked here, since the
runtime writes these files under the pod's directory); sizes are bounded by
:data:`MAX_VOLUME_BYTES` per volume.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["MAX_VOLUME_BYTES", "ContainerInputs", "InputsError", "ResolvedInputs", "VolumeFile"]

#: Bytes of files one volume may carry (Kubernetes bounds a ConfigMap or Secret at 1 MiB;
#: a projected volume combines several).
MAX_VOLUME_BYTES: Final = 16 * 1024 * 1024
_MAX_PATH: Final = 4096


class InputsError(ValueError):
    """Inputs that cannot be materialised safely (a path escaping its volume, too many bytes)."""


def check_relative_path(path: str) -> str:
    """``path`` if it is relative, normalised and stays inside its directory."""
    if (not path or len(path) > _MAX_PATH or path.startswith("/") or "\x00" in path
            or posixpath.normpath(path) != path or path.split("/")[0] == ".."
            or any(part.startswith("..") for part in path.split("/"))):
        raise InputsError(f"invalid path {path!r}: must be relative, normalised, without '..'")
    return path


@dataclass(frozen=True, slots=True, kw_only=True)
class VolumeFile:
    """One file of a volume: its path inside the volume, bytes and mode.

    ``secret`` marks files from Secrets and ServiceAccount tokens: the runtime keeps only
    their owner bits (a pod runs as the agent's own user, so nobody else needs to read them).
    """

    path: str
    data: bytes
    mode: int = 0o644
    secret: bool = False

    def __post_init__(self) -> None:
        check_relative_path(self.path)
        if not 0 <= self.mode <= 0o777:
            raise InputsError(f"invalid mode {self.mode:o} for {self.path!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerInputs:
    """One container's resolved environment sources.

    ``env_from``: the ``envFrom`` variables in the order they apply (a later one wins).
    ``env``: values of ``env[].valueFrom.{configMapKeyRef,secretKeyRef}`` by variable name;
    an optional reference that resolved to nothing is simply absent.
    ``error``: why the container cannot be configured (a required key or object is missing).
    """

    env_from: tuple[tuple[str, str], ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolvedInputs:
    """Everything a pod needs from other API objects, by container and by volume name."""

    containers: Mapping[str, ContainerInputs] = field(default_factory=dict)
    volumes: Mapping[str, tuple[VolumeFile, ...]] = field(default_factory=dict)
    volume_errors: Mapping[str, str] = field(default_factory=dict)
    service_env: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        for name, files in self.volumes.items():
            if sum(len(f.data) for f in files) > MAX_VOLUME_BYTES:
                raise InputsError(f"volume {name!r} carries more than {MAX_VOLUME_BYTES} bytes")

    def container(self, name: str) -> ContainerInputs:
        return self.containers.get(name) or ContainerInputs()


def to_json(inputs: ResolvedInputs) -> dict[str, object]:
    """``inputs`` as JSON (file contents base64), for the runtime's state directory."""
    import base64

    return {
        "containers": {name: {"envFrom": [list(kv) for kv in c.env_from], "env": dict(c.env),
                              "error": c.error} for name, c in inputs.containers.items()},
        "volumes": {name: [{"path": f.path, "mode": f.mode, "secret": f.secret,
                            "data": base64.b64encode(f.data).decode()} for f in files]
                    for name, files in inputs.volumes.items()},
        "volumeErrors": dict(inputs.volume_errors),
        "serviceEnv": [list(kv) for kv in inputs.service_env],
    }


def from_json(data: Mapping[str, Any]) -> ResolvedInputs:
    """The inverse of :func:`to_json`; raises :class:`InputsError` on anything malformed."""
    import base64

    try:
        containers = {
            str(name): ContainerInputs(
                env_from=tuple((str(k), str(v)) for k, v in c.get("envFrom") or []),
                env={str(k): str(v) for k, v in (c.get("env") or {}).items()},
                error=c.get("error"))
            for name, c in dict(data.get("containers") or {}).items()
        }
        volumes = {
            str(name): tuple(VolumeFile(path=f["path"], mode=int(f["mode"]),
                                        secret=bool(f["secret"]),
                                        data=base64.b64decode(f["data"])) for f in files)
            for name, files in dict(data.get("volumes") or {}).items()
        }
        return ResolvedInputs(
            containers=containers, volumes=volumes,
            volume_errors={str(k): str(v)
                           for k, v in dict(data.get("volumeErrors") or {}).items()},
            service_env=tuple((str(k), str(v))
                              for k, v in data.get("serviceEnv") or []))
    except (KeyError, TypeError, ValueError) as e:
        raise InputsError(f"malformed inputs: {e}") from e
