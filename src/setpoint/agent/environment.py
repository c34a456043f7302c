"""A container's environment and command line, as the kubelet computes them.

* :func:`expand` is Kubernetes' ``$(VAR)`` expansion: ``$(NAME)`` becomes the variable's value
  when it is defined and stays as written when it is not; ``$$`` is a literal ``$``; a ``$``
  followed by anything else, or an unclosed ``$(``, is kept.
* :func:`container_env` builds the variables in the kubelet's order: ``envFrom`` (later
  sources win), then ``env`` entries in order (each ``value`` expanded against what is defined
  so far and the service variables), then the service variables not already set.
* :func:`field_ref` and :func:`resource_field_ref` are the downward API: ``metadata.name``,
  ``metadata.namespace``, ``metadata.uid``, ``metadata.labels['k']``,
  ``metadata.annotations['k']``, ``spec.nodeName``, ``spec.serviceAccountName``,
  ``status.hostIP(s)``, ``status.podIP(s)``; ``limits.cpu``/``requests.memory``/... divided by
  ``divisor`` and rounded up, a missing limit reading as the node's allocatable amount.
* :func:`downward_files` renders a ``downwardAPI`` volume's items (labels and annotations as
  sorted ``key="value"`` lines).

Pure: the pod's IPs and the node's allocatable resources are arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from setpoint.agent import inputs as inp
from setpoint.apimachinery import quantity

__all__ = ["PodFacts", "container_env", "downward_files", "expand", "field_ref",
           "resource_field_ref"]

Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class PodFacts:
    """What the downward API reads that is not in the pod's spec: where it runs."""

    pod_ip: str = ""
    host_ip: str = ""
    node_name: str = ""
    allocatable_cpu: Fraction = Fraction(1)
    allocatable_memory: Fraction = Fraction(1 << 30)


def expand(text: str, lookup: Callable[[str], str | None]) -> str:
    """``$(VAR)`` expansion; ``lookup`` returns None for an undefined variable."""
    out: list[str] = []
    checkpoint = 0
    cursor = 0
    n = len(text)
    while cursor < n:
        if text[cursor] == "$" and cursor + 1 < n:
            out.append(text[checkpoint:cursor])
            nxt = text[cursor + 1]
            advance = 1
            if nxt == "$":
                out.append("$")
            elif nxt == "(":
                close = text.find(")", cursor + 2)
                if close < 0:
                    out.append("$(")
                else:
                    name = text[cursor + 2:close]
                    value = lookup(name)
                    out.append(f"$({name})" if value is None else value)
                    advance = close - cursor
            else:
                out.append("$" + nxt)
            cursor += advance
            checkpoint = cursor + 1
        cursor += 1
    out.append(text[checkpoint:])
    return "".join(out)


def _subscript(path: str, prefix: str) -> str | None:
    """``k`` of ``prefix['k']`` (or ``prefix["k"]``), else None."""
    if not path.startswith(prefix + "[") or not path.endswith("]"):
        return None
    inner = path[len(prefix) + 1:-1]
    if len(inner) >= 2 and inner[0] == inner[-1] and inner[0] in "'\"":
        return inner[1:-1]
    return None


def field_ref(pod: Obj, path: str, facts: PodFacts) -> str:
    """The value of a ``fieldRef.fieldPath``; raises ValueError for an unsupported path."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    simple: dict[str, str] = {
        "metadata.name": meta.get("name", ""),
        "metadata.namespace": meta.get("namespace", ""),
        "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": spec.get("nodeName") or facts.node_name,
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.hostIP": facts.host_ip,
        "status.hostIPs": facts.host_ip,
        "status.podIP": facts.pod_ip,
        "status.podIPs": facts.pod_ip,
    }
    if path in simple:
        return simple[path]
    if (key := _subscript(path, "metadata.labels")) is not None:
        return str((meta.get("labels") or {}).get(key, ""))
    if (key := _subscript(path, "metadata.annotations")) is not None:
        return str((meta.get("annotations") or {}).get(key, ""))
    if path == "metadata.labels":
        return format_map(meta.get("labels") or {})
    if path == "metadata.annotations":
        return format_map(meta.get("annotations") or {})
    raise ValueError(f"unsupported fieldPath: {path}")


def resource_field_ref(container: Obj, resource: str, divisor: object, facts: PodFacts) -> str:
    """A ``resourceFieldRef`` value: the container's limit or request over ``divisor``."""
    kind, _, name = resource.partition(".")
    if kind not in ("limits", "requests") or not name:
        raise ValueError(f"unsupported resource: {resource}")
    res = container.get("resources") or {}
    given = (res.get(kind) or {}).get(name)
    if given is None and kind == "requests":
        given = (res.get("limits") or {}).get(name)  # requests default to limits
    if given is not None:
        value = quantity.value_of(given)
    elif kind == "limits" and name == "cpu":
        value = facts.allocatable_cpu
    elif kind == "limits" and name == "memory":
        value = facts.allocatable_memory
    else:
        value = Fraction(0)
    div = quantity.value_of(divisor if divisor not in (None, "") else "1")
    return str(quantity.ceil_div(value, div))


def container_env(pod: Obj, container: Obj, inputs: inp.ContainerInputs,
                  service_env: tuple[tuple[str, str], ...], facts: PodFacts
                  ) -> list[tuple[str, str]]:
    """The container's variables, in the order they were defined (no duplicates)."""
    env: dict[str, str] = {}
    services = dict(service_env)
    for name, value in inputs.env_from:
        env[name] = value

    def lookup(name: str) -> str | None:
        if name in env:
            return env[name]
        return services.get(name)

    for var in container.get("env") or []:
        name = var.get("name", "")
        if "value" in var or not var.get("valueFrom"):
            env[name] = expand(str(var.get("value") or ""), lookup)
            continue
        vf = var["valueFrom"]
        if (ref := vf.get("fieldRef")) is not None:
            env[name] = field_ref(pod, ref.get("fieldPath", ""), facts)
        elif (ref := vf.get("resourceFieldRef")) is not None:
            target = container
            if ref.get("containerName"):
                target = next((c for c in _all_containers(pod)
                               if c.get("name") == ref["containerName"]), container)
            env[name] = resource_field_ref(target, ref.get("resource", ""), ref.get("divisor"),
                                           facts)
        elif name in inputs.env:
            env[name] = inputs.env[name]
        # an optional reference that resolved to nothing leaves the variable unset
    for name, value in service_env:
        env.setdefault(name, value)
    return list(env.items())


def _all_containers(pod: Obj) -> list[Obj]:
    spec = pod.get("spec") or {}
    return [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]


def go_quote(text: str) -> str:
    """Go's ``%q`` of a string (``strconv.Quote``)."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch in "\a\b\f\n\r\t\v":
            out.append({"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
                        "\t": "\\t", "\v": "\\v"}[ch])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif not ch.isprintable():
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def format_map(values: Mapping[str, Any]) -> str:
    """Labels or annotations as a downward API file shows them."""
    return "".join(f"{k}={go_quote(str(values[k]))}\n" for k in sorted(values))


def downward_files(pod: Obj, items: list[Obj], default_mode: int, facts: PodFacts
                   ) -> list[inp.VolumeFile]:
    """The files of a ``downwardAPI`` volume or projected source."""
    files: list[inp.VolumeFile] = []
    containers = {c.get("name"): c for c in _all_containers(pod)}
    for item in items:
        mode = item.get("mode")
        mode = default_mode if mode is None else int(mode)
        if (ref := item.get("fieldRef")) is not None:
            value = field_ref(pod, ref.get("fieldPath", ""), facts)
        elif (ref := item.get("resourceFieldRef")) is not None:
            container = containers.get(ref.get("containerName"), {})
            value = resource_field_ref(container, ref.get("resource", ""), ref.get("divisor"),
                                       facts)
        else:
            continue
        files.append(inp.VolumeFile(path=item.get("path", ""), data=value.encode(), mode=mode))
    return files
