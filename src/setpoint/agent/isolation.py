"""What isolation this machine allows the process runtime, decided once at start.

``namespaces`` (root with ``CAP_SYS_ADMIN`` and ``CAP_NET_ADMIN``, and iproute2's ``ip``):
a network namespace per pod on a host bridge, a UTS namespace named after the pod, a private
mount namespace per container whose root shows the container's volumes at their
``mountPath``, and cgroups for membership and limits.

``none`` (anyone): pods share the host's network (each with its own loopback address), mounts
and hostname; volumes stay in the pod's directory and a container's command line,
environment values and working directory are rewritten to point there (``/etc/config/key``
becomes ``<pod dir>/volumes/config/key``; best effort: only paths that start with a
``mountPath`` at a word boundary). cgroups are still used when running as root.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import Literal

__all__ = ["Isolation", "capabilities", "decide"]

_CAP_NET_ADMIN = 12
_CAP_SYS_ADMIN = 21

Mode = Literal["auto", "namespaces", "none"]


def capabilities() -> int:
    """The effective capability set of this process (0 when it cannot be read)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except (OSError, ValueError):
        pass
    return 0


@dataclass(frozen=True, slots=True)
class Isolation:
    namespaces: bool
    reason: str


def decide(mode: Mode) -> Isolation:
    """The isolation to use for ``mode``; ``namespaces`` raises when it is not possible."""
    caps = capabilities()
    missing = []
    if os.geteuid() != 0:
        missing.append("root")
    if not caps >> _CAP_SYS_ADMIN & 1:
        missing.append("CAP_SYS_ADMIN")
    if not caps >> _CAP_NET_ADMIN & 1:
        missing.append("CAP_NET_ADMIN")
    if shutil.which("ip") is None:
        missing.append("iproute2 (the ip command)")
    if mode == "none":
        return Isolation(False, "isolation: none was asked for")
    if missing:
        if mode == "namespaces":
            raise PermissionError(f"namespace isolation needs {', '.join(missing)}")
        return Isolation(False, f"no namespace isolation: needs {', '.join(missing)}")
    return Isolation(True, "namespaces: network, UTS and mount per pod")
