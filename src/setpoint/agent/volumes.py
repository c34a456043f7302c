"""Volumes as files in the pod's directory, and each container's mounts of them.

:func:`materialise` makes every volume of a pod under ``<pod dir>/volumes/<name>``:

* ``emptyDir``: a directory (``medium: Memory`` and ``sizeLimit`` are not enforced: it is
  on the disk that holds the agent's directory).
* ``configMap``, ``secret``, ``projected``, ``downwardAPI``: the files of
  :class:`~setpoint.agent.inputs.ResolvedInputs` (plus the downward API items, computed here)
  written the way the kubelet's atomic writer does: into a fresh ``..<timestamp>`` directory,
  published by renaming a ``..data`` symlink, with one top-level symlink per entry into
  ``..data`` — so a process reading the volume while it is updated sees the old files or the
  new ones, never a mixture. Unchanged contents are not rewritten. Secret files keep only their
  owner's permission bits.
* ``hostPath``: the host path itself, after the ``type`` check (``DirectoryOrCreate`` and
  ``FileOrCreate`` create it).
* anything else (persistentVolumeClaim, nfs, csi, ...): an error, reported as a failed mount.

:func:`mounts` turns a container's ``volumeMounts`` into ``(source, target, read-only)``
triples, with ``subPath`` / ``subPathExpr`` resolved inside the volume (a sub path that leaves
the volume through ``..`` or a symlink is refused), parents before children.

Blocking file I/O: callers on an event loop run these in a thread.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import stat
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from setpoint.agent import environment as envs
from setpoint.agent import inputs as inp

__all__ = ["Mount", "VolumeSet", "materialise", "mounts"]

Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Mount:
    source: str
    target: str
    read_only: bool

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "target": self.target, "readOnly": self.read_only}


@dataclass(slots=True)
class VolumeSet:
    """Each volume's directory (or host path), and the volumes that failed, with why."""

    paths: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


def _digest(files: list[inp.VolumeFile]) -> str:
    h = hashlib.sha256()
    for f in sorted(files, key=lambda f: f.path):
        h.update(f"{f.path}\0{f.mode:o}\0{int(f.secret)}\0{len(f.data)}\0".encode())
        h.update(f.data)
    return h.hexdigest()


def write_atomic(target: Path, files: list[inp.VolumeFile]) -> bool:
    """Publish ``files`` in ``target``; False when they were already there."""
    target.mkdir(parents=True, exist_ok=True, mode=0o755)
    digest = _digest(files)
    marker = target / "..digest"
    with contextlib.suppress(OSError):
        if marker.read_text() == digest and (target / "..data").exists():
            return False
    stamp = time.strftime("%Y_%m_%d_%H_%M_%S", time.gmtime())
    version = target / f"..{stamp}.{secrets.token_hex(4)}"
    version.mkdir(mode=0o755)
    for f in files:
        path = version / f.path
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        mode = (f.mode & 0o700) if f.secret else f.mode
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, f.data)
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
    tmp = target / "..data_tmp"
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    tmp.symlink_to(version.name)
    tmp.rename(target / "..data")
    tops = {f.path.split("/", 1)[0] for f in files}
    for entry in target.iterdir():
        if not entry.name.startswith("..") and entry.name not in tops:
            entry.unlink()
    for top in tops:
        link = target / top
        if not link.is_symlink():
            link.symlink_to(f"..data/{top}")
    for entry in target.iterdir():
        if (entry.name.startswith("..") and entry.name not in ("..data", "..digest")
                and entry.is_dir() and not entry.is_symlink() and entry != version):
            shutil.rmtree(entry, ignore_errors=True)
    marker.write_text(digest)
    return True


_HOST_PATH_CHECKS = {
    "Directory": (stat.S_ISDIR, "is not a directory"),
    "File": (stat.S_ISREG, "is not a file"),
    "Socket": (stat.S_ISSOCK, "is not a socket file"),
    "CharDevice": (stat.S_ISCHR, "is not a character device"),
    "BlockDevice": (stat.S_ISBLK, "is not a block device"),
}


def _host_path(spec: Obj) -> str:
    path = str(spec.get("path") or "")
    kind = str(spec.get("type") or "")
    if not path.startswith("/"):
        raise inp.InputsError(f"hostPath {path!r} is not absolute")
    if kind == "DirectoryOrCreate":
        os.makedirs(path, mode=0o755, exist_ok=True)
    elif kind == "FileOrCreate":
        os.makedirs(os.path.dirname(path) or "/", mode=0o755, exist_ok=True)
        if not os.path.exists(path):
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
    elif kind in _HOST_PATH_CHECKS:
        check, text = _HOST_PATH_CHECKS[kind]
        try:
            if not check(os.stat(path).st_mode):
                raise inp.InputsError(f"hostPath type check failed: {path} {text}")
        except FileNotFoundError as e:
            raise inp.InputsError(f"hostPath type check failed: {path} {text}") from e
    return path


def materialise(pod: Obj, pod_dir: Path, inputs: inp.ResolvedInputs,
                facts: envs.PodFacts) -> VolumeSet:
    """Make (or update) every volume of ``pod``; see the module docstring."""
    out = VolumeSet()
    root = pod_dir / "volumes"
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    for vol in (pod.get("spec") or {}).get("volumes") or []:
        name = str(vol.get("name") or "")
        target = root / name
        try:
            inp.check_relative_path(name)
            if name in inputs.volume_errors:
                raise inp.InputsError(inputs.volume_errors[name])
            if "emptyDir" in vol:
                target.mkdir(exist_ok=True, mode=0o777)
                out.paths[name] = str(target)
            elif "hostPath" in vol:
                out.paths[name] = _host_path(vol["hostPath"] or {})
            elif any(k in vol for k in ("configMap", "secret", "projected", "downwardAPI")):
                files = list(inputs.volumes.get(name, ()))
                if (dapi := vol.get("downwardAPI")) is not None:
                    files += envs.downward_files(pod, dapi.get("items") or [],
                                                 int(dapi.get("defaultMode", 0o644)), facts)
                for src in (vol.get("projected") or {}).get("sources") or []:
                    if (dapi := src.get("downwardAPI")) is not None:
                        mode = int((vol.get("projected") or {}).get("defaultMode", 0o644))
                        files += envs.downward_files(pod, dapi.get("items") or [], mode, facts)
                write_atomic(target, files)
                out.paths[name] = str(target)
            else:
                kinds = sorted(k for k in vol if k != "name")
                raise inp.InputsError(
                    f'MountVolume.SetUp failed for volume "{name}" : setpoint\'s process runtime '
                    f"does not support {', '.join(kinds) or 'this'} volumes")
        except (inp.InputsError, ValueError) as e:
            out.errors[name] = str(e)
        except OSError as e:
            out.errors[name] = f'MountVolume.SetUp failed for volume "{name}" : {e}'
    return out


def mounts(container: Obj, volumes: VolumeSet, env: Mapping[str, str]) -> list[Mount]:
    """The container's mounts; raises ValueError for one that cannot be made."""
    out: list[Mount] = []
    for m in container.get("volumeMounts") or []:
        name = str(m.get("name") or "")
        target = str(m.get("mountPath") or "")
        if not target.startswith("/"):
            raise ValueError(f"mountPath {target!r} is not absolute")
        if name not in volumes.paths:
            raise ValueError(f"volume {name!r} is not mounted")
        source = volumes.paths[name]
        sub = m.get("subPath") or ""
        if m.get("subPathExpr"):
            sub = envs.expand(str(m["subPathExpr"]), env.get)
        if sub:
            inp.check_relative_path(str(sub))
            base = os.path.realpath(source)
            wanted = os.path.join(base, str(sub))
            if not os.path.lexists(wanted):
                os.makedirs(wanted, mode=0o755, exist_ok=True)
            resolved = os.path.realpath(wanted)
            if resolved != base and not resolved.startswith(base.rstrip("/") + "/"):
                raise ValueError(f"subPath {sub!r} leaves volume {name!r}")
            source = resolved
        out.append(Mount(source, os.path.normpath(target), bool(m.get("readOnly"))))
    out.sort(key=lambda mo: mo.target.count("/"))
    return out
