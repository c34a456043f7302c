"""A pod's ``/etc/hosts``, ``/etc/resolv.conf`` and ``/etc/hostname``, as the kubelet writes
them for pods with their own network (with namespace isolation; without it, pods share the
host's files).

``resolv.conf`` follows ``dnsPolicy``: ``ClusterFirst`` (the default) searches
``<namespace>.svc.<domain> svc.<domain> <domain>`` with ``ndots:5`` and asks the cluster DNS
servers — or, when none is configured, the pod network's gateway (the host): a lookup then
fails at once unless something serves DNS there, instead of waiting for a server the pod
cannot reach. ``Default`` uses the host's file; ``None`` only ``dnsConfig``. ``dnsConfig``
nameservers, searches and options are added, as Kubernetes merges them.

``hosts`` maps ``localhost`` and the pod's own hostname (and ``hostAliases``) as Kubernetes'
"Kubernetes-managed hosts file" does. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["hostname", "hosts_file", "resolv_conf"]

_MAX_SEARCHES = 32
_MAX_NAMESERVERS = 3


def hostname(pod: Mapping[str, Any]) -> str:
    spec = pod.get("spec") or {}
    name = spec.get("hostname") or (pod.get("metadata") or {}).get("name") or "pod"
    return str(name)[:63]


def hosts_file(pod: Mapping[str, Any], ip: str) -> bytes:
    spec = pod.get("spec") or {}
    host = hostname(pod)
    fqdn = host
    if spec.get("subdomain"):
        ns = (pod.get("metadata") or {}).get("namespace") or "default"
        fqdn = f"{host}.{spec['subdomain']}.{ns}.svc.cluster.local"
    lines = ["# Kubernetes-managed hosts file.", "127.0.0.1\tlocalhost",
             "::1\tlocalhost ip6-localhost ip6-loopback", "fe00::0\tip6-localnet",
             "fe00::0\tip6-mcastprefix", "fe00::1\tip6-allnodes", "fe00::2\tip6-allrouters",
             f"{ip}\t{fqdn}\t{host}" if fqdn != host else f"{ip}\t{host}"]
    aliases = spec.get("hostAliases") or []
    if aliases:
        lines.append("")
        lines.append("# Entries added by HostAliases.")
        for alias in aliases:
            names = [str(n) for n in alias.get("hostnames") or []]
            if alias.get("ip") and names:
                lines.append(f"{alias['ip']}\t" + "\t".join(names))
    return ("\n".join(lines) + "\n").encode()


def resolv_conf(pod: Mapping[str, Any], *, cluster_dns: Sequence[str], cluster_domain: str,
                fallback_nameserver: str, host_file: str) -> bytes:
    spec = pod.get("spec") or {}
    policy = spec.get("dnsPolicy") or "ClusterFirst"
    ns = (pod.get("metadata") or {}).get("namespace") or "default"
    nameservers: list[str] = []
    searches: list[str] = []
    options: list[str] = []
    if policy == "Default":
        for line in host_file.splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[0] == "nameserver":
                nameservers.append(parts[1])
            elif parts and parts[0] in ("search", "domain"):
                searches += parts[1:]
            elif parts and parts[0] == "options":
                options += parts[1:]
    elif policy != "None":
        nameservers = list(cluster_dns) or ([fallback_nameserver] if fallback_nameserver else [])
        searches = [f"{ns}.svc.{cluster_domain}", f"svc.{cluster_domain}", cluster_domain]
        options = ["ndots:5"]
    config = spec.get("dnsConfig") or {}
    nameservers += [str(n) for n in config.get("nameservers") or [] if str(n) not in nameservers]
    searches += [str(s) for s in config.get("searches") or [] if str(s) not in searches]
    for opt in config.get("options") or []:
        name = str(opt.get("name") or "")
        if not name:
            continue
        options = [o for o in options if o.split(":", 1)[0] != name]
        options.append(f"{name}:{opt['value']}" if opt.get("value") is not None else name)
    out = []
    if searches:
        out.append("search " + " ".join(searches[:_MAX_SEARCHES]))
    out += [f"nameserver {n}" for n in nameservers[:_MAX_NAMESERVERS]]
    if options:
        out.append("options " + " ".join(options))
    return ("\n".join(out) + "\n").encode()
