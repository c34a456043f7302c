"""discovery.k8s.io/v1 EndpointSlice: storage, validation and columns.

Validated as Kubernetes does what matters to a proxy: ``addressType`` (IPv4, IPv6 or FQDN,
immutable), at most 1000 endpoints of 1 to 100 addresses each, addresses of the slice's type,
at most 100 ports with unique DNS-1123 label names (or none), numbers 1-65535 (or unset: all
ports), protocols. Ports default to TCP. The controllers that fill slices are not here.

Columns: NAME ADDRESSTYPE PORTS ENDPOINTS AGE, as kubectl's printer shows them (three values
at most, then ``+ N more...``; ``<unset>`` when empty).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from setpoint.apimachinery import fields, validation
from setpoint.apimachinery.fields import FieldError, FieldPath
from setpoint.apimachinery.jsonshape import as_dict, as_list
from setpoint.registry import podspec, services, table
from setpoint.registry.resources import ResourceInfo, VersionInfo
from setpoint.registry.strategy import meta_of
from setpoint.registry.typedstrategy import TypedStrategy

Obj = dict[str, Any]

ADDRESS_TYPES = ("FQDN", "IPv4", "IPv6")
MAX_ENDPOINTS = 1000
MAX_ADDRESSES = 100
MAX_PORTS = 100
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"




def _address_errors(kind: str, address: Any, path: FieldPath) -> list[FieldError]:
    if kind == "FQDN":
        return [fields.invalid(path, address, p)
                for p in validation.is_dns1123_subdomain(str(address))]
    wanted = 4 if kind == "IPv4" else 6
    if not services.valid_ip(address) or (":" in str(address)) != (wanted == 6):
        return [fields.invalid(path, address, f"must be a valid IP{'v4' if wanted == 4 else 'v6'}"
                               " address")]
    return []


def validate_slice(obj: Obj) -> list[FieldError]:
    errs: list[FieldError] = []
    kind = obj.get("addressType")
    if not kind:
        errs.append(fields.required("addressType", ""))
    elif kind not in ADDRESS_TYPES:
        errs.append(fields.not_supported("addressType", kind, ADDRESS_TYPES))
    endpoints = as_list(obj.get("endpoints"))
    if len(endpoints) > MAX_ENDPOINTS:
        errs.append(fields.too_many("endpoints", len(endpoints), MAX_ENDPOINTS))
    for i, endpoint in enumerate(endpoints[:MAX_ENDPOINTS]):
        where = FieldPath.root("endpoints").index(i)
        addresses = as_list(as_dict(endpoint).get("addresses"))
        if not addresses:
            errs.append(fields.required(where.child("addresses"), "must contain at least 1 "
                                        "address"))
        elif len(addresses) > MAX_ADDRESSES:
            errs.append(fields.too_many(where.child("addresses"), len(addresses),
                                        MAX_ADDRESSES))
        elif kind in ADDRESS_TYPES:
            for j, address in enumerate(addresses):
                errs += _address_errors(str(kind), address, where.child("addresses").index(j))
        hostname = as_dict(endpoint).get("hostname")
        if hostname:
            errs.extend(fields.invalid(where.child("hostname"), hostname, p)
                        for p in validation.is_dns1123_label(hostname))
    ports = as_list(obj.get("ports"))
    if len(ports) > MAX_PORTS:
        errs.append(fields.too_many("ports", len(ports), MAX_PORTS))
    names: set[str] = set()
    for i, port in enumerate(ports[:MAX_PORTS]):
        port = as_dict(port)
        where = FieldPath.root("ports").index(i)
        name = port.get("name") or ""
        if name:
            errs.extend(fields.invalid(where.child("name"), name, p)
                        for p in validation.is_dns1123_label(name))
        if name in names:
            errs.append(fields.duplicate(where.child("name"), name))
        names.add(name)
        number = port.get("port")
        if number is not None and not podspec.valid_port(number):
            errs.append(fields.invalid(where.child("port"), number,
                                       "must be between 1 and 65535, inclusive"))
        protocol = port.get("protocol")
        if protocol not in podspec.PROTOCOLS:
            errs.append(fields.not_supported(where.child("protocol"), protocol,
                                             podspec.PROTOCOLS))
    return errs


def _with_more(shown: list[str], count: int, most: int = 3) -> str:
    text = ",".join(shown)
    if count > most:
        return f"{text} + {count - most} more..."
    return text or "<unset>"


def format_ports(ports: Any) -> str:
    shown = []
    for port in as_list(ports):
        port = as_dict(port)
        number = port.get("port")
        shown.append(str(number) if number is not None else str(port.get("name") or "*"))
    return _with_more(shown[:3], len(shown))


def format_endpoints(endpoints: Any) -> str:
    shown = [str(a) for e in as_list(endpoints) for a in as_list(as_dict(e).get("addresses"))]
    return _with_more(shown[:3], len(shown))


def slice_row(obj: Obj, now: datetime) -> dict[str, Any]:
    return {"Name": meta_of(obj).get("name"), "AddressType": obj.get("addressType") or "",
            "Ports": format_ports(obj.get("ports")),
            "Endpoints": format_endpoints(obj.get("endpoints")),
            "Age": table.age(meta_of(obj).get("creationTimestamp"), now)}


_COLUMNS = (
    ("Name", 0, "Name must be unique within a namespace."),
    ("AddressType", 0, "Type of address carried by this EndpointSlice."),
    ("Ports", 0, "Ports advertised by this EndpointSlice."),
    ("Endpoints", 0, "Endpoints included in this EndpointSlice."),
    ("Age", 0, "CreationTimestamp is a timestamp representing the server time when this "
               "object was created."),
)


class EndpointSliceStrategy(TypedStrategy):
    type_key = ("discovery.k8s.io/v1", "EndpointSlice")
    known_fields = frozenset({"addressType", "endpoints", "ports"})

    def default(self, obj: Obj, version: VersionInfo) -> None:
        for port in as_list(obj.get("ports")):
            if isinstance(port, dict) and not port.get("protocol"):
                port["protocol"] = "TCP"

    def validate(self, obj: Obj, version: VersionInfo) -> list[FieldError]:
        return super().validate(obj, version) + validate_slice(obj)

    def validate_update(self, new: Obj, old: Obj, version: VersionInfo) -> list[FieldError]:
        errs = super().validate_update(new, old, version)
        if new.get("addressType") != old.get("addressType"):
            errs.append(fields.invalid("addressType", new.get("addressType"),
                                       validation.FIELD_IMMUTABLE))
        return errs

    def columns(self, version: VersionInfo) -> list[table.Column]:
        def cell(name: str) -> Any:
            return lambda o, now: slice_row(o, now)[name]

        return [table.Column(name, "string", cell(name), priority=priority, description=doc,
                             format="name" if name == "Name" else "")
                for name, priority, doc in _COLUMNS]


def endpoint_slice_resource() -> tuple[ResourceInfo, type[EndpointSliceStrategy]]:
    return (ResourceInfo(group="discovery.k8s.io", resource="endpointslices",
                         kind="EndpointSlice", singular="endpointslice", namespaced=True,
                         versions=(VersionInfo("v1", storage=True),)),
            EndpointSliceStrategy)
