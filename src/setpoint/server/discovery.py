"""Discovery documents, legacy and aggregated, built from the catalog on each request."""

from __future__ import annotations

from typing import Any

from setpoint.registry.catalog import Catalog
from setpoint.registry.resources import ResourceInfo, VersionInfo

Obj = dict[str, Any]

STATUS_VERBS = ["get", "patch", "update"]


def version_doc(git_version: str) -> Obj:
    return {"major": "1", "minor": "32", "gitVersion": git_version,
            "gitCommit": "0000000000000000000000000000000000000000",
            "gitTreeState": "clean", "buildDate": "2026-11-01T00:00:00Z",
            "goVersion": "go1.23.0", "compiler": "gc", "platform": "linux/amd64"}


def api_versions(server_address: str) -> Obj:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0",
                                            "serverAddress": server_address}]}


def _group_entry(group: str, versions: list[str]) -> Obj:
    listed = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": listed, "preferredVersion": listed[0]}


def api_group_list(catalog: Catalog) -> Obj:
    groups = [_group_entry(g, vs) for g, vs in catalog.groups() if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(catalog: Catalog, group: str) -> Obj | None:
    for g, vs in catalog.groups():
        if g == group and g:
            return {"kind": "APIGroup", "apiVersion": "v1", **_group_entry(g, vs)}
    return None


def _resource_entries(info: ResourceInfo, version: VersionInfo) -> list[Obj]:
    entry: Obj = {"name": info.resource, "singularName": info.singular,
                  "namespaced": info.namespaced, "kind": info.kind, "verbs": list(info.verbs)}
    if info.short_names:
        entry["shortNames"] = list(info.short_names)
    if info.categories:
        entry["categories"] = list(info.categories)
    entries = [entry]
    if version.status:
        entries.append({"name": f"{info.resource}/status", "singularName": "",
                        "namespaced": info.namespaced, "kind": info.kind,
                        "verbs": STATUS_VERBS})
    if version.scale is not None:
        entries.append({"name": f"{info.resource}/scale", "singularName": "",
                        "namespaced": info.namespaced, "group": "autoscaling",
                        "version": "v1", "kind": "Scale", "verbs": STATUS_VERBS})
    for sub in info.extra_subresources:
        sub_entry: Obj = {"name": f"{info.resource}/{sub.name}", "singularName": "",
                          "namespaced": info.namespaced, "kind": sub.kind or info.kind,
                          "verbs": list(sub.verbs)}
        if sub.group is not None:
            sub_entry["group"] = sub.group
            sub_entry["version"] = sub.version or "v1"
        entries.append(sub_entry)
    return entries


def _infos_in(catalog: Catalog, group: str, version: str) -> list[ResourceInfo]:
    """Every resource served in a group version, stored and virtual, by name."""
    infos = [s.info for s in catalog.resources_in(group, version)]
    infos.extend(v.info for v in catalog.virtual_in(group, version))
    return sorted(infos, key=lambda info: info.resource)


def api_resource_list(catalog: Catalog, group: str, version: str) -> Obj | None:
    infos = _infos_in(catalog, group, version)
    if not infos:
        return None
    resources: list[Obj] = []
    for info in infos:
        v = info.version(version)
        if v is not None:
            resources.extend(_resource_entries(info, v))
    return {"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": resources}


def _aggregated_resource(info: ResourceInfo, version: VersionInfo, doc_version: str) -> Obj:
    entry: Obj = {
        "resource": info.resource,
        "responseKind": {"group": info.group, "version": version.name, "kind": info.kind},
        "scope": "Namespaced" if info.namespaced else "Cluster",
        "singularResource": info.singular,
        "verbs": list(info.verbs),
    }
    if info.short_names:
        entry["shortNames"] = list(info.short_names)
    if info.categories:
        entry["categories"] = list(info.categories)
    subs: list[Obj] = []
    if version.status:
        subs.append({"subresource": "status", "responseKind": {
            "group": info.group, "version": version.name, "kind": info.kind},
            "verbs": STATUS_VERBS})
    if version.scale is not None:
        subs.append({"subresource": "scale", "responseKind": {
            "group": "autoscaling", "version": "v1", "kind": "Scale"}, "verbs": STATUS_VERBS})
    for sub in info.extra_subresources:
        subs.append({"subresource": sub.name, "responseKind": {
            "group": info.group if sub.group is None else sub.group,
            "version": sub.version or version.name, "kind": sub.kind or info.kind},
            "verbs": list(sub.verbs)})
    if subs:
        entry["subresources"] = subs
    return entry


def aggregated(catalog: Catalog, *, core: bool, doc_version: str) -> Obj:
    """``APIGroupDiscoveryList`` for ``/api`` (core) or ``/apis`` (every named group)."""
    items: list[Obj] = []
    for group, versions in catalog.groups():
        if (group == "") != core:
            continue
        vdocs = []
        for v in versions:
            resources = []
            for info in _infos_in(catalog, group, v):
                vi = info.version(v)
                if vi is not None:
                    resources.append(_aggregated_resource(info, vi, doc_version))
            vdocs.append({"version": v, "resources": resources, "freshness": "Current"})
        item: Obj = {"metadata": {"creationTimestamp": None}, "versions": vdocs}
        if group:
            item["metadata"]["name"] = group
        items.append(item)
    return {"kind": "APIGroupDiscoveryList", "apiVersion": f"apidiscovery.k8s.io/{doc_version}",
            "metadata": {}, "items": items}
