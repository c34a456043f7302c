"""Build :class:`~setpoint.agent.inputs.ResolvedInputs` from the objects a pod refers to.

:func:`references` lists what to fetch (ConfigMap and Secret names in the pod's namespace,
projected ServiceAccount tokens); :func:`resolve_inputs` turns what was found into inputs, with
Kubernetes' rules and messages:

* ``configMap``/``secret`` volumes: every key (``data`` and ``binaryData``) becomes a file, or
  only the ``items`` listed (``key`` → ``path``, optional ``mode``); modes default to
  ``defaultMode`` (0644). A missing object or key is an error unless ``optional: true``
  (then the volume is empty / the item is skipped).
* ``projected`` volumes combine ``configMap``, ``secret`` and ``serviceAccountToken`` sources
  (``downwardAPI`` sources are the runtime's); ``defaultMode`` applies to all.
* ``envFrom`` adds every key with its ``prefix`` unless the name is not a valid variable name
  (skipped, as the kubelet does); ``env[].valueFrom`` key references resolve to values or to
  ``couldn't find key K in ConfigMap NS/NAME`` errors.

Secrets arrive as the API serves them (``data`` values base64); ConfigMaps as stored. Pure:
no I/O, no clock.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from setpoint.agent import inputs as inp

__all__ = ["References", "references", "resolve_inputs"]

Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class References:
    """What a pod needs fetched: names in its namespace, and token requests.

    ``tokens`` holds ``(volume name, path, audience, expirationSeconds)`` per projected
    ``serviceAccountToken`` source.
    """

    config_maps: frozenset[str]
    secrets: frozenset[str]
    tokens: tuple[tuple[str, str, str, int], ...]


def _containers(spec: Obj) -> list[Obj]:
    return [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]


def references(pod: Obj) -> References:
    """The ConfigMaps, Secrets and tokens ``pod`` refers to."""
    spec = pod.get("spec") or {}
    cms: set[str] = set()
    secrets: set[str] = set()
    tokens: list[tuple[str, str, str, int]] = []
    for c in _containers(spec):
        for src in c.get("envFrom") or []:
            if (ref := src.get("configMapRef")) and ref.get("name"):
                cms.add(ref["name"])
            if (ref := src.get("secretRef")) and ref.get("name"):
                secrets.add(ref["name"])
        for env in c.get("env") or []:
            vf = env.get("valueFrom") or {}
            if (ref := vf.get("configMapKeyRef")) and ref.get("name"):
                cms.add(ref["name"])
            if (ref := vf.get("secretKeyRef")) and ref.get("name"):
                secrets.add(ref["name"])
    for vol in spec.get("volumes") or []:
        if (cm := vol.get("configMap")) and cm.get("name"):
            cms.add(cm["name"])
        if (sec := vol.get("secret")) and sec.get("secretName"):
            secrets.add(sec["secretName"])
        for src in (vol.get("projected") or {}).get("sources") or []:
            if (cm := src.get("configMap")) and cm.get("name"):
                cms.add(cm["name"])
            if (sec := src.get("secret")) and sec.get("name"):
                secrets.add(sec["name"])
            if (tok := src.get("serviceAccountToken")) is not None:
                tokens.append((vol["name"], tok.get("path") or "token",
                               tok.get("audience") or "",
                               int(tok.get("expirationSeconds") or 3600)))
    return References(frozenset(cms), frozenset(secrets), tuple(tokens))


class _Missing(Exception):
    pass


def _config_map_data(cm: Obj) -> dict[str, bytes]:
    data = {k: str(v).encode() for k, v in (cm.get("data") or {}).items()}
    for k, v in (cm.get("binaryData") or {}).items():
        data[k] = _b64(v)
    return data


def _secret_data(secret: Obj) -> dict[str, bytes]:
    data = {k: _b64(v) for k, v in (secret.get("data") or {}).items()}
    for k, v in (secret.get("stringData") or {}).items():  # only if the caller kept it
        data[k] = str(v).encode()
    return data


def _b64(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    try:
        return base64.b64decode(str(value), validate=True)
    except (binascii.Error, ValueError):
        return str(value).encode()


def _key_files(kind: str, obj_name: str, data: Mapping[str, bytes], items: list[Obj] | None,
               default_mode: int, optional: bool, secret: bool) -> list[inp.VolumeFile]:
    files: list[inp.VolumeFile] = []
    if not items:
        for key in sorted(data):
            files.append(inp.VolumeFile(path=key, data=data[key], mode=default_mode,
                                        secret=secret))
        return files
    for item in items:
        key = item.get("key", "")
        if key not in data:
            if optional:
                continue
            raise _Missing(f"{kind} references non-existent {kind.lower()} key: {key}"
                           if kind == "Secret" else
                           f"configmap references non-existent config key: {key}")
        mode = item.get("mode")
        files.append(inp.VolumeFile(path=item.get("path") or key, data=data[key],
                                    mode=default_mode if mode is None else int(mode),
                                    secret=secret))
    return files


def _valid_env_name(name: str) -> bool:
    # RelaxedEnvironmentVariableValidation: any printable ASCII but '='.
    return bool(name) and all(" " <= ch <= "~" for ch in name) and "=" not in name


def resolve_inputs(pod: Obj, *, config_maps: Mapping[str, Obj] | None = None,
                   secrets: Mapping[str, Obj] | None = None,
                   tokens: Mapping[tuple[str, str], str] | None = None,
                   service_env: Mapping[str, str] | None = None) -> inp.ResolvedInputs:
    """Inputs for ``pod`` from the objects found (by name, in the pod's namespace).

    ``tokens`` maps ``(volume name, path)`` to a token for each projected
    ``serviceAccountToken`` source; a source without one fails the volume.
    """
    cms = config_maps or {}
    secs = secrets or {}
    toks = tokens or {}
    meta = pod.get("metadata") or {}
    ns = meta.get("namespace") or "default"
    spec = pod.get("spec") or {}
    containers: dict[str, inp.ContainerInputs] = {}
    for c in _containers(spec):
        env_from: list[tuple[str, str]] = []
        env: dict[str, str] = {}
        error: str | None = None
        try:
            for src in c.get("envFrom") or []:
                prefix = src.get("prefix") or ""
                if (ref := src.get("configMapRef")) is not None:
                    obj = cms.get(ref.get("name", ""))
                    if obj is None:
                        if ref.get("optional"):
                            continue
                        raise _Missing(f'configmap "{ref.get("name", "")}" not found')
                    data = {k: v.decode(errors="replace")
                            for k, v in _config_map_data(obj).items()}
                elif (ref := src.get("secretRef")) is not None:
                    obj = secs.get(ref.get("name", ""))
                    if obj is None:
                        if ref.get("optional"):
                            continue
                        raise _Missing(f'secret "{ref.get("name", "")}" not found')
                    data = {k: v.decode(errors="replace") for k, v in _secret_data(obj).items()}
                else:
                    continue
                for key in sorted(data):
                    if _valid_env_name(prefix + key):
                        env_from.append((prefix + key, data[key]))
            for var in c.get("env") or []:
                vf = var.get("valueFrom") or {}
                for kind, table, loader in (("ConfigMap", cms, _config_map_data),
                                            ("Secret", secs, _secret_data)):
                    ref = vf.get("configMapKeyRef" if kind == "ConfigMap" else "secretKeyRef")
                    if ref is None:
                        continue
                    name, key = ref.get("name", ""), ref.get("key", "")
                    obj = table.get(name)
                    if obj is None:
                        if ref.get("optional"):
                            break
                        raise _Missing(f'{kind.lower()} "{name}" not found')
                    values = loader(obj)
                    if key not in values:
                        if ref.get("optional"):
                            break
                        raise _Missing(f"couldn't find key {key} in {kind} {ns}/{name}")
                    env[var["name"]] = values[key].decode(errors="replace")
        except _Missing as e:
            error = str(e)
        containers[c.get("name", "")] = inp.ContainerInputs(
            env_from=tuple(env_from), env=env, error=error)

    volumes: dict[str, tuple[inp.VolumeFile, ...]] = {}
    volume_errors: dict[str, str] = {}
    for vol in spec.get("volumes") or []:
        name = vol.get("name", "")
        try:
            files: list[inp.VolumeFile] = []
            if (cm := vol.get("configMap")) is not None:
                mode = int(cm.get("defaultMode", 0o644))
                obj = cms.get(cm.get("name", ""))
                if obj is None:
                    if not cm.get("optional"):
                        raise _Missing(f'configmap "{cm.get("name", "")}" not found')
                else:
                    files = _key_files("ConfigMap", cm["name"], _config_map_data(obj),
                                       cm.get("items"), mode, bool(cm.get("optional")), False)
            elif (sec := vol.get("secret")) is not None:
                mode = int(sec.get("defaultMode", 0o644))
                obj = secs.get(sec.get("secretName", ""))
                if obj is None:
                    if not sec.get("optional"):
                        raise _Missing(f'secret "{sec.get("secretName", "")}" not found')
                else:
                    files = _key_files("Secret", sec["secretName"], _secret_data(obj),
                                       sec.get("items"), mode, bool(sec.get("optional")), True)
            elif (proj := vol.get("projected")) is not None:
                mode = int(proj.get("defaultMode", 0o644))
                for src in proj.get("sources") or []:
                    if (cm := src.get("configMap")) is not None:
                        obj = cms.get(cm.get("name", ""))
                        if obj is None:
                            if cm.get("optional"):
                                continue
                            raise _Missing(f'configmap "{cm.get("name", "")}" not found')
                        files += _key_files("ConfigMap", cm["name"], _config_map_data(obj),
                                            cm.get("items"), mode, bool(cm.get("optional")),
                                            False)
                    elif (sec := src.get("secret")) is not None:
                        obj = secs.get(sec.get("name", ""))
                        if obj is None:
                            if sec.get("optional"):
                                continue
                            raise _Missing(f'secret "{sec.get("name", "")}" not found')
                        files += _key_files("Secret", sec["name"], _secret_data(obj),
                                            sec.get("items"), mode, bool(sec.get("optional")),
                                            True)
                    elif (tok := src.get("serviceAccountToken")) is not None:
                        path = tok.get("path") or "token"
                        token = toks.get((name, path))
                        if token is None:
                            raise _Missing(f"no service account token for {path}")
                        files.append(inp.VolumeFile(path=path, data=token.encode(),
                                                    mode=mode, secret=True))
            else:
                continue
            volumes[name] = tuple(files)
        except (_Missing, inp.InputsError) as e:
            volume_errors[name] = (f'MountVolume.SetUp failed for volume "{name}" : {e}')
    return inp.ResolvedInputs(containers=containers, volumes=volumes,
                              volume_errors=volume_errors,
                              service_env=tuple(sorted((service_env or {}).items())))
