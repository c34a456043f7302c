"""core/v1 Node: a machine that runs pods (cluster-scoped, with a status subresource).

A node's agent creates its Node with a status (Kubernetes keeps the status of a created
Node, unlike other kinds), then reports through ``/status``. ``spec.podCIDR`` and
``spec.podCIDRs`` are kept in step (the first of the list is the single one) and may be set
once, never changed; ``spec.providerID`` likewise. Taints are checked (qualified key, label
value, effect, unique by key and effect). ``status.allocatable`` defaults to
``status.capacity``.

Columns: NAME STATUS ROLES AGE VERSION, and with ``-o wide`` INTERNAL-IP EXTERNAL-IP
OS-IMAGE KERNEL-VERSION CONTAINER-RUNTIME, computed as Kubernetes' node printer does (STATUS
is ``Ready``/``NotReady``/``Unknown``, plus ``SchedulingDisabled`` when cordoned; ROLES
from the ``node-role.kubernetes.io/<role>`` labels).
"""

from __future__ import annotations

import ipaddress
from datetime import datetime
from typing import Any

from setpoint.apimachinery import fields, validation
from setpoint.apimachinery.fields import ErrorType, FieldError, FieldPath
from setpoint.apimachinery.jsoncopy import deep_copy
from setpoint.apimachinery.jsonshape import as_dict, as_list
from setpoint.registry import podspec, table
from setpoint.registry.resources import ResourceInfo, VersionInfo
from setpoint.registry.strategy import meta_of
from setpoint.registry.typedstrategy import TypedStrategy

Obj = dict[str, Any]

ROLE_PREFIX = "node-role.kubernetes.io/"
ROLE_LABEL = "kubernetes.io/role"
_CIDR_CHANGE = 'node updates may not change podCIDR except from "" to valid'




def validate_taints(taints: Any, path: FieldPath) -> list[FieldError]:
    errs: list[FieldError] = []
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(as_list(taints)):
        taint = as_dict(taint)
        where = path.index(i)
        key = taint.get("key") or ""
        if not key:
            errs.append(fields.required(where.child("key")))
        else:
            errs.extend(fields.invalid(where.child("key"), key, p)
                        for p in validation.is_qualified_name(key))
        value = taint.get("value")
        if value:
            errs.extend(fields.invalid(where.child("value"), value, p)
                        for p in validation.is_valid_label_value(value))
        effect = taint.get("effect") or ""
        if not effect:
            errs.append(fields.required(where.child("effect")))
        elif effect not in podspec.TAINT_EFFECTS:
            errs.append(fields.not_supported(where.child("effect"), effect,
                                             podspec.TAINT_EFFECTS))
        if (key, effect) in seen:
            errs.append(FieldError(ErrorType.DUPLICATE, str(where),
                                   "taints must be unique by key and effect pair", taint))
        seen.add((key, effect))
    return errs


def _validate_cidrs(spec: Obj, path: FieldPath) -> list[FieldError]:
    errs: list[FieldError] = []
    cidrs = as_list(spec.get("podCIDRs"))
    if len(cidrs) > 2:
        errs.append(fields.invalid(path.child("podCIDRs"), cidrs,
                                   "may specify no more than one CIDR for each IP family"))
    families = set()
    for i, cidr in enumerate(cidrs):
        try:
            net = ipaddress.ip_network(str(cidr), strict=False)
        except ValueError:
            errs.append(fields.invalid(path.child("podCIDRs").index(i), cidr,
                                       "must be a valid CIDR value, (e.g. 10.9.8.0/24 or "
                                       "2001:db8::/64)"))
            continue
        if net.version in families:
            errs.append(fields.invalid(path.child("podCIDRs"), cidrs,
                                       "may specify no more than one CIDR for each IP family"))
        families.add(net.version)
    return errs


class NodeStrategy(TypedStrategy):
    type_key = ("v1", "Node")
    known_fields = frozenset({"spec", "status"})
    selectable_fields = ("spec.unschedulable",)
    merge_keys = {"spec.podCIDRs": "", "status.conditions": "type",
                  "status.addresses": "type"}

    def default(self, obj: Obj, version: VersionInfo) -> None:
        spec = obj.get("spec")
        if isinstance(spec, dict):
            cidrs = spec.get("podCIDRs")
            if spec.get("podCIDR") and not cidrs:
                spec["podCIDRs"] = [spec["podCIDR"]]
            elif isinstance(cidrs, list) and cidrs and not spec.get("podCIDR"):
                spec["podCIDR"] = cidrs[0]
        status = obj.get("status")
        if isinstance(status, dict) and status.get("allocatable") is None and \
                isinstance(status.get("capacity"), dict):
            status["allocatable"] = dict(status["capacity"])

    def prepare_for_create(self, obj: Obj, version: VersionInfo) -> None:
        obj.setdefault("spec", {})  # Nodes keep the status they are created with

    def prepare_for_update(self, new: Obj, old: Obj, version: VersionInfo,
                           subresource: str) -> None:
        if subresource == "status":
            status = new.get("status")
            new.clear()
            new.update(deep_copy(old))
            new["status"] = status if status is not None else {}
        else:
            new["status"] = deep_copy(old.get("status", {}))

    def validate(self, obj: Obj, version: VersionInfo) -> list[FieldError]:
        errs = super().validate(obj, version)
        spec = as_dict(obj.get("spec"))
        path = FieldPath.root("spec")
        errs += validate_taints(spec.get("taints"), path.child("taints"))
        errs += _validate_cidrs(spec, path)
        cidrs = as_list(spec.get("podCIDRs"))
        if spec.get("podCIDR") and cidrs and cidrs[0] != spec["podCIDR"]:
            errs.append(fields.invalid(path.child("podCIDR"), spec["podCIDR"],
                                       "must match the first element of podCIDRs"))
        return errs

    def validate_update(self, new: Obj, old: Obj, version: VersionInfo) -> list[FieldError]:
        errs = super().validate_update(new, old, version)
        new_spec, old_spec = as_dict(new.get("spec")), as_dict(old.get("spec"))
        old_cidrs = as_list(old_spec.get("podCIDRs"))
        if old_cidrs and as_list(new_spec.get("podCIDRs")) != old_cidrs:
            errs.append(fields.forbidden("spec.podCIDRs", _CIDR_CHANGE))
        if old_spec.get("providerID") and old_spec.get("providerID") != new_spec.get(
                "providerID"):
            errs.append(fields.forbidden("spec.providerID", 'node updates may not change '
                                         'providerID except from "" to valid'))
        return errs

    def field_labels(self, obj: Obj) -> dict[str, str]:
        labels = super().field_labels(obj)
        labels["spec.unschedulable"] = "true" if as_dict(obj.get("spec")).get(
            "unschedulable") is True else "false"
        return labels

    def columns(self, version: VersionInfo) -> list[table.Column]:
        return node_columns()


def node_roles(obj: Obj) -> list[str]:
    roles: set[str] = set()
    for key, value in as_dict(meta_of(obj).get("labels")).items():
        if key.startswith(ROLE_PREFIX) and key[len(ROLE_PREFIX):]:
            roles.add(key[len(ROLE_PREFIX):])
        elif key == ROLE_LABEL and value:
            roles.add(str(value))
    return sorted(roles)


def node_status(obj: Obj) -> str:
    states = []
    for condition in as_list(as_dict(obj.get("status")).get("conditions")):
        condition = as_dict(condition)
        if condition.get("type") == "Ready":
            states.append("Ready" if condition.get("status") == "True" else "NotReady")
            break
    if not states:
        states.append("Unknown")
    if as_dict(obj.get("spec")).get("unschedulable") is True:
        states.append("SchedulingDisabled")
    return ",".join(states)


def _address(obj: Obj, kind: str) -> str:
    for address in as_list(as_dict(obj.get("status")).get("addresses")):
        if as_dict(address).get("type") == kind and as_dict(address).get("address"):
            return str(address["address"])
    return "<none>"


def _info(obj: Obj, name: str) -> str:
    return str(as_dict(as_dict(obj.get("status")).get("nodeInfo")).get(name) or "")


def node_row(obj: Obj, now: datetime) -> dict[str, Any]:
    return {"Name": meta_of(obj).get("name"), "Status": node_status(obj),
            "Roles": ",".join(node_roles(obj)) or "<none>",
            "Age": table.age(meta_of(obj).get("creationTimestamp"), now),
            "Version": _info(obj, "kubeletVersion"),
            "Internal-IP": _address(obj, "InternalIP"),
            "External-IP": _address(obj, "ExternalIP"),
            "OS-Image": _info(obj, "osImage") or "<unknown>",
            "Kernel-Version": _info(obj, "kernelVersion") or "<unknown>",
            "Container-Runtime": _info(obj, "containerRuntimeVersion") or "<unknown>"}


_COLUMNS = (
    ("Name", 0, "Name must be unique within a namespace."),
    ("Status", 0, "The status of the node"),
    ("Roles", 0, "The roles of the node"),
    ("Age", 0, "CreationTimestamp is a timestamp representing the server time when this "
               "object was created."),
    ("Version", 0, "Kubelet Version reported by the node."),
    ("Internal-IP", 1, "List of addresses reachable to the node."),
    ("External-IP", 1, "List of addresses reachable to the node."),
    ("OS-Image", 1, "OS Image reported by the node from /etc/os-release (e.g. Debian "
                    "GNU/Linux 7 (wheezy))."),
    ("Kernel-Version", 1, "Kernel Version reported by the node from 'uname -r' (e.g. "
                          "3.16.0-0.bpo.4-amd64)."),
    ("Container-Runtime", 1, "ContainerRuntime Version reported by the node through runtime "
                             "remote API (e.g. containerd://1.4.2)."),
)


def node_columns() -> list[table.Column]:
    def cell(name: str) -> Any:
        return lambda o, now: node_row(o, now)[name]

    return [table.Column(name, "string", cell(name), priority=priority, description=doc,
                         format="name" if name == "Name" else "")
            for name, priority, doc in _COLUMNS]


def node_resource() -> tuple[ResourceInfo, type[NodeStrategy]]:
    return (ResourceInfo(group="", resource="nodes", kind="Node", singular="node",
                         namespaced=False,
                         versions=(VersionInfo("v1", storage=True, status=True),),
                         short_names=("no",)),
            NodeStrategy)
