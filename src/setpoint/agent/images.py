"""What ``image`` means when containers are local processes.

A process runtime pulls nothing and has no image filesystem: a container runs a program that is
already on the machine. Its command line is found as Docker finds it, with an *image table*
standing in for the image's own configuration:

* ``command`` set: ``command + args`` (``command`` replaces the image's entrypoint and
  default arguments, as in Kubernetes);
* otherwise, if the image's repository is in the table (``busybox``, ``python``, ...; tags
  and registries ignored): the table's entrypoint, then ``args`` or else the table's default
  arguments;
* otherwise the container cannot run: :class:`NoCommand`, which the runtime reports as the
  waiting reason ``CreateContainerError`` (what a container runtime reports for an image with
  neither entrypoint nor command: "no command specified") with a message that says why.

The default table maps images whose default command is a shell or an interpreter found on any
Linux machine: ``busybox``, ``alpine``, ``debian``, ``ubuntu`` (``sh``), ``bash`` (``bash``),
``python`` and ``pypy`` (``python3``, which also runs for their ``python``), and the
infrastructure image ``pause`` (``registry.k8s.io/pause``, ``gcr.io/google_containers/pause``),
whose program does nothing until it is stopped: ``sleep infinity``. The agent's configuration
can replace it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["DEFAULT_IMAGES", "ImageEntry", "ImageTable", "NoCommand", "repository"]


@dataclass(frozen=True, slots=True)
class ImageEntry:
    """An image's entrypoint and default arguments (Docker's ENTRYPOINT and CMD)."""

    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    #: programs the image has under a name this machine may lack (the python image's
    #: ``python`` is ``python3``): a command line that starts with one runs the other
    programs: Mapping[str, str] = field(default_factory=dict)


DEFAULT_IMAGES: Final[Mapping[str, ImageEntry]] = {
    "busybox": ImageEntry(cmd=("sh",)),
    "alpine": ImageEntry(cmd=("/bin/sh",)),
    "debian": ImageEntry(cmd=("bash",)),
    "ubuntu": ImageEntry(cmd=("/bin/bash",)),
    "bash": ImageEntry(cmd=("bash",)),
    "python": ImageEntry(cmd=("python3",), programs={"python": "python3"}),
    "pypy": ImageEntry(cmd=("python3",), programs={"python": "python3"}),
    # the pause container's /pause sleeps until a signal; tests use it as "a pod that runs"
    "pause": ImageEntry(cmd=("sleep", "infinity")),
    "google_containers/pause": ImageEntry(cmd=("sleep", "infinity")),
}


class NoCommand(Exception):
    """The container has no command this runtime can run (a ``CreateContainerError``)."""


def repository(image: str) -> str:
    """``busybox`` for ``docker.io/library/busybox:1.36@sha256:...``; lower case."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name = name[: len(name) - len(last)] + last.split(":", 1)[0]
    parts = name.lower().split("/")
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        parts = parts[1:]  # a registry host
    if len(parts) > 1 and parts[0] == "library":
        parts = parts[1:]
    return "/".join(parts)


@dataclass(frozen=True, slots=True)
class ImageTable:
    """Image repositories → :class:`ImageEntry`."""

    entries: Mapping[str, ImageEntry] = field(default_factory=lambda: dict(DEFAULT_IMAGES))

    def argv(self, container: Mapping[str, Any]) -> list[str]:
        """The command line of ``container`` (before ``$(VAR)`` expansion)."""
        command: Sequence[str] = container.get("command") or ()
        args: Sequence[str] = container.get("args") or ()
        image = str(container.get("image") or "")
        entry = self.entries.get(repository(image))
        if command:
            return self._programs(entry, [*map(str, command), *map(str, args)])
        if entry is None:
            known = ", ".join(sorted(self.entries)) or "none"
            raise NoCommand(
                f"no command specified: setpoint runs containers as processes on this machine "
                f"and does not know what image {image!r} runs (images it knows: {known}); "
                f"set the container's command (and args)")
        argv = [*entry.entrypoint, *(map(str, args) if args else entry.cmd)]
        if not argv:
            raise NoCommand(f"no command specified: image {image!r} has no default command; "
                            f"set the container's command (and args)")
        return self._programs(entry, argv)

    @staticmethod
    def _programs(entry: ImageEntry | None, argv: list[str]) -> list[str]:
        if entry is not None and argv and argv[0] in entry.programs:
            return [entry.programs[argv[0]], *argv[1:]]
        return argv
