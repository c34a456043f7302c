"""Service environment variables, as the kubelet sets them in every container.

:func:`service_env` takes the Services the agent knows when a container starts and returns
the variables for a pod in ``namespace``:

* the Services considered: those of the pod's namespace when ``enableServiceLinks`` is true
  (the default), and always the ``kubernetes`` Service of ``default`` (a Service of that name
  in the pod's own namespace wins when links are enabled). Services without a cluster IP
  (headless ``None``, ``ExternalName``, not yet allocated) give no variables.
* for a Service ``my-svc`` (the name upper-cased, ``-`` becoming ``_``), with ports
  ``[{name: http, port: 80, protocol: TCP}, ...]``:
  ``MY_SVC_SERVICE_HOST`` (the cluster IP), ``MY_SVC_SERVICE_PORT`` (the first port),
  ``MY_SVC_SERVICE_PORT_HTTP`` (each named port), and Docker-link style
  ``MY_SVC_PORT=tcp://IP:80`` (the first port), ``MY_SVC_PORT_80_TCP=tcp://IP:80``,
  ``MY_SVC_PORT_80_TCP_PROTO=tcp``, ``MY_SVC_PORT_80_TCP_PORT=80``,
  ``MY_SVC_PORT_80_TCP_ADDR=IP`` (each port). IPv6 addresses are bracketed in URLs.

Pure: the Services are arguments. Variables the container defines itself win (see
:func:`setpoint.agent.environment.container_env`). Bounded by ``max_services``: a namespace
with more Services gets the variables of the first that many by name (Kubernetes sets them
all; thousands of Services make an environment no program reads).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

__all__ = ["MASTER_SERVICE", "MAX_SERVICES", "env_name", "has_cluster_ip", "service_env",
           "service_vars"]

#: the Service whose variables every pod gets (namespace, name)
MASTER_SERVICE: Final = ("default", "kubernetes")
MAX_SERVICES: Final = 1000

Obj = Mapping[str, Any]


def env_name(name: str) -> str:
    """``my-svc`` -> ``MY_SVC`` (Kubernetes' ``makeEnvVariableName``)."""
    return name.replace("-", "_").upper()


def has_cluster_ip(service: Obj) -> bool:
    ip = (service.get("spec") or {}).get("clusterIP")
    return isinstance(ip, str) and ip not in ("", "None")


def _host_port(ip: str, port: int) -> str:
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def service_vars(service: Obj) -> list[tuple[str, str]]:
    """The variables of one Service (none without a cluster IP or ports)."""
    spec = service.get("spec") or {}
    ports = [p for p in spec.get("ports") or [] if isinstance(p, Mapping)]
    if not has_cluster_ip(service) or not ports:
        return []
    ip = str(spec["clusterIP"])
    prefix = env_name(str((service.get("metadata") or {}).get("name") or ""))
    out = [(f"{prefix}_SERVICE_HOST", ip),
           (f"{prefix}_SERVICE_PORT", str(int(ports[0].get("port") or 0)))]
    for p in ports:
        if p.get("name"):
            out.append((f"{prefix}_SERVICE_PORT_{env_name(str(p['name']))}",
                        str(int(p.get("port") or 0))))
    for i, p in enumerate(ports):
        port = int(p.get("port") or 0)
        proto = str(p.get("protocol") or "TCP")
        url = f"{proto.lower()}://{_host_port(ip, port)}"
        if i == 0:
            out.append((f"{prefix}_PORT", url))
        base = f"{prefix}_PORT_{port}_{proto.upper()}"
        out += [(base, url), (f"{base}_PROTO", proto.lower()), (f"{base}_PORT", str(port)),
                (f"{base}_ADDR", ip)]
    return out


def service_env(services: Iterable[Obj], namespace: str, enable_links: bool = True, *,
                max_services: int = MAX_SERVICES) -> dict[str, str]:
    """The service variables of a pod in ``namespace`` (see the module docstring)."""
    chosen: dict[str, Obj] = {}
    master: Obj | None = None
    for svc in services:
        meta = svc.get("metadata") or {}
        ns, name = meta.get("namespace"), str(meta.get("name") or "")
        if not name or not has_cluster_ip(svc):
            continue
        if (ns, name) == MASTER_SERVICE:
            master = svc
        elif ns == namespace and enable_links:
            chosen[name] = svc
    names = sorted(chosen)[:max_services]
    selected = [chosen[n] for n in names]
    if master is not None and MASTER_SERVICE[1] not in chosen:
        selected.append(master)
    env: dict[str, str] = {}
    for svc in selected:
        env.update(service_vars(svc))
    return env
