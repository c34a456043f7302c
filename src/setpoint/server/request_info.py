"""Turn a request path into what it addresses, as kube-apiserver's RequestInfoFactory does.

Resource paths::

    /api/v1[/namespaces/{ns}]/{resource}[/{name}[/{subresource}]]
    /apis/{group}/{version}[/namespaces/{ns}]/{resource}[/{name}[/{subresource}]]

``/api/v1/namespaces/{name}`` addresses a namespace itself, and ``status`` / ``finalize``
after it are the namespace's subresources. Trailing slashes are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass

NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})


@dataclass(frozen=True, slots=True)
class RequestInfo:
    group: str
    version: str
    resource: str
    namespace: str | None = None
    name: str = ""
    subresource: str = ""

    @property
    def is_collection(self) -> bool:
        return not self.name


def parse(path: str) -> RequestInfo | None:
    """A resource request, or ``None`` for anything else (discovery, health, unknown)."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    if not rest:
        return None
    namespace: str | None = None
    if rest[0] == "namespaces" and len(rest) >= 2:
        if len(rest) == 2 or rest[2] in NAMESPACE_SUBRESOURCES:
            # the namespace object itself (and its subresources)
            subresource = rest[2] if len(rest) >= 3 else ""
            if len(rest) > 3:
                return None
            return RequestInfo(group, version, "namespaces", None, rest[1], subresource)
        namespace = rest[1]
        rest = rest[2:]
    if len(rest) > 3:
        return None
    resource = rest[0]
    name = rest[1] if len(rest) >= 2 else ""
    subresource = rest[2] if len(rest) >= 3 else ""
    return RequestInfo(group, version, resource, namespace, name, subresource)
