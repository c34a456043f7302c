"""core/v1 Service and Endpoints, and the ``kubernetes`` Service of the API server.

Service:

* **Defaults** (Kubernetes' ``SetDefaults_Service``): ``type: ClusterIP``,
  ``sessionAffinity: None``, each port's ``protocol: TCP`` and ``targetPort`` = its
  ``port``, ``internalTrafficPolicy: Cluster``, and for NodePort and LoadBalancer Services
  ``externalTrafficPolicy: Cluster``; LoadBalancer ``allocateLoadBalancerNodePorts: true``.
* **Allocation**: a cluster IP (unless headless, ``clusterIP: None``, or ``ExternalName``)
  and, for NodePort and LoadBalancer, a node port per port, reserved in storage (see
  :mod:`setpoint.registry.serviceips`).
* **Validation**: type, ports (required unless headless or ExternalName; numbers, protocol,
  names required and unique when there are several, unique port/protocol, targetPort a
  number or a port name, nodePort only where the type has node ports), clusterIP (an address,
  ``None`` or empty; ``None`` only for ClusterIP Services), externalName (required for
  ExternalName, a DNS subdomain), selector labels, sessionAffinity, traffic policies.
* **Update**: ``spec.clusterIP`` may not change once set (but changing the type to
  ExternalName gives it up, and from ExternalName gets one); a PUT that leaves out the
  clusterIP or a nodePort keeps the allocated one, as Kubernetes does; node ports are dropped
  when the type no longer has them.

Endpoints: ports default to TCP; addresses must be IPs, ports numbers, names unique.

The ``kubernetes`` Service in ``default`` (:func:`ensure_kubernetes_service`) holds the first
address of the service range, port 443 named ``https`` targeting the API server's port, and
its Endpoints and EndpointSlice name the server's advertised address and port; they are
created or corrected at every start.
"""

from __future__ import annotations

import copy
import ipaddress
import logging
from datetime import datetime
from typing import Any

from setpoint.apimachinery import errors, fields, regexp, validation
from setpoint.apimachinery.fields import ErrorType, FieldError, FieldPath
from setpoint.apimachinery.jsonshape import as_dict, as_list
from setpoint.registry import podspec, serviceips, table
from setpoint.registry.options import WriteOptions
from setpoint.registry.resources import ResourceInfo, VersionInfo
from setpoint.registry.store import Store
from setpoint.registry.strategy import meta_of
from setpoint.registry.typedstrategy import TypedStrategy

log = logging.getLogger(__name__)

Obj = dict[str, Any]

TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")
AFFINITIES = ("ClientIP", "None")
TRAFFIC_POLICIES = ("Cluster", "Local")
MANAGER = "kube-apiserver"
DEFAULT_AFFINITY_TIMEOUT = 10800
_IP_MESSAGE = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"


_DNS1035 = regexp.Regexp(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def is_dns1035_label(value: str) -> list[str]:
    """Service names: an RFC 1035 label (starts with a letter), at most 63 characters."""
    errs = []
    if len(value) > 63:
        errs.append(validation.max_len_error(63))
    if not _DNS1035.match(value):
        errs.append(validation.regex_error(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
            "start with an alphabetic character, and end with an alphanumeric character",
            "[a-z]([-a-z0-9]*[a-z0-9])?", "my-name", "abc-123"))
    return errs




def valid_ip(value: Any) -> bool:
    try:
        ipaddress.ip_address(str(value))
    except ValueError:
        return False
    return True


def default_service_spec(spec: Obj) -> None:
    kind = spec.get("type") or "ClusterIP"
    spec["type"] = kind
    ips = spec.get("clusterIPs")
    if not spec.get("clusterIP") and isinstance(ips, list) and ips and isinstance(ips[0], str):
        spec["clusterIP"] = ips[0]  # either names the address; clusterIP is the first
    if not spec.get("sessionAffinity"):
        spec["sessionAffinity"] = "None"
    if spec["sessionAffinity"] == "ClientIP":
        config = spec.get("sessionAffinityConfig")
        if not isinstance(config, dict):
            config = spec["sessionAffinityConfig"] = {}
        client = config.get("clientIP")
        if not isinstance(client, dict):
            client = config["clientIP"] = {}
        if not client.get("timeoutSeconds"):
            client["timeoutSeconds"] = DEFAULT_AFFINITY_TIMEOUT
    for port in as_list(spec.get("ports")):
        if not isinstance(port, dict):
            continue
        if not port.get("protocol"):
            port["protocol"] = "TCP"
        if port.get("targetPort") in (None, 0, "") and isinstance(port.get("port"), int):
            port["targetPort"] = port["port"]
    if kind != "ExternalName" and not spec.get("internalTrafficPolicy"):
        spec["internalTrafficPolicy"] = "Cluster"
    if kind in serviceips.NEEDS_NODE_PORTS and not spec.get("externalTrafficPolicy"):
        spec["externalTrafficPolicy"] = "Cluster"
    if kind == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is None:
        spec["allocateLoadBalancerNodePorts"] = True


def _validate_ports(spec: Obj, path: FieldPath, kind: str) -> list[FieldError]:
    errs: list[FieldError] = []
    ports = as_list(spec.get("ports"))
    headless = spec.get("clusterIP") == "None"
    if not ports and not headless and kind != "ExternalName":
        errs.append(fields.required(path, ""))
    names: set[str] = set()
    pairs: set[tuple[Any, Any]] = set()
    for i, port in enumerate(ports):
        port = as_dict(port)
        where = path.index(i)
        name = port.get("name") or ""
        if len(ports) > 1 and not name:
            errs.append(fields.required(where.child("name"), ""))
        elif name:
            errs.extend(fields.invalid(where.child("name"), name, p)
                        for p in validation.is_dns1123_label(name))
            if name in names:
                errs.append(fields.duplicate(where.child("name"), name))
            names.add(name)
        number = port.get("port")
        if not podspec.valid_port(number):
            errs.append(fields.invalid(where.child("port"), number,
                                       "must be between 1 and 65535, inclusive"))
        protocol = port.get("protocol")
        if protocol not in podspec.PROTOCOLS:
            errs.append(fields.not_supported(where.child("protocol"), protocol,
                                             podspec.PROTOCOLS))
        target = port.get("targetPort")
        if isinstance(target, int) and not podspec.valid_port(target):
            errs.append(fields.invalid(where.child("targetPort"), target,
                                       "must be between 1 and 65535, inclusive"))
        elif isinstance(target, str) and target:
            errs.extend(podspec.port_name_errors(target, where.child("targetPort")))
        node_port = port.get("nodePort")
        if node_port and kind not in serviceips.NEEDS_NODE_PORTS:
            errs.append(fields.forbidden(where.child("nodePort"),
                                         f"may not be used when `type` is '{kind}'"))
        if (number, protocol) in pairs:
            errs.append(FieldError(ErrorType.DUPLICATE, str(where), "", port))
        pairs.add((number, protocol))
    return errs


def validate_service(obj: Obj) -> list[FieldError]:
    spec = as_dict(obj.get("spec"))
    path = FieldPath.root("spec")
    errs: list[FieldError] = []
    kind = spec.get("type")
    if kind not in TYPES:
        errs.append(fields.not_supported(path.child("type"), kind, TYPES))
        return errs
    errs += _validate_ports(spec, path.child("ports"), kind)
    cluster_ip = spec.get("clusterIP") or ""
    if kind == "ExternalName":
        name = spec.get("externalName")
        if not name:
            errs.append(fields.required(path.child("externalName"), ""))
        else:
            errs.extend(fields.invalid(path.child("externalName"), name, p)
                        for p in validation.is_dns1123_subdomain(str(name).rstrip(".")))
        if cluster_ip:
            errs.append(fields.forbidden(path.child("clusterIPs"),
                                         "may not be set for ExternalName services"))
    elif cluster_ip == "None":
        if kind != "ClusterIP":
            errs.append(fields.invalid(path.child("clusterIPs").index(0), "None",
                                       f"may not be set to 'None' for {kind} services"))
    elif cluster_ip and not valid_ip(cluster_ip):
        errs.append(fields.invalid(path.child("clusterIPs").index(0), cluster_ip, _IP_MESSAGE))
    ips = as_list(spec.get("clusterIPs"))
    if ips and cluster_ip and ips[0] != cluster_ip:
        errs.append(fields.invalid(path.child("clusterIPs"), ips,
                                   "first value must match `clusterIP`"))
    for key, value in as_dict(spec.get("selector")).items():
        where = path.child("selector")
        errs.extend(fields.invalid(where, key, p) for p in validation.is_qualified_name(key))
        if isinstance(value, str):
            errs.extend(fields.invalid(where.key(key), value, p)
                        for p in validation.is_valid_label_value(value))
    affinity = spec.get("sessionAffinity")
    if affinity not in AFFINITIES:
        errs.append(fields.not_supported(path.child("sessionAffinity"), affinity, AFFINITIES))
    external = spec.get("externalTrafficPolicy")
    if external and kind not in serviceips.NEEDS_NODE_PORTS:
        errs.append(fields.invalid(path.child("externalTrafficPolicy"), external,
                                   "may only be set when `type` is 'NodePort' or "
                                   "'LoadBalancer'"))
    elif external and external not in TRAFFIC_POLICIES:
        errs.append(fields.not_supported(path.child("externalTrafficPolicy"), external,
                                         TRAFFIC_POLICIES))
    internal = spec.get("internalTrafficPolicy")
    if internal and internal not in TRAFFIC_POLICIES:
        errs.append(fields.not_supported(path.child("internalTrafficPolicy"), internal,
                                         TRAFFIC_POLICIES))
    for i, ip in enumerate(as_list(spec.get("externalIPs"))):
        if not valid_ip(ip):
            errs.append(fields.invalid(path.child("externalIPs").index(i), ip, _IP_MESSAGE))
    return errs


def _needs_ip(spec: Obj) -> bool:
    return spec.get("type") != "ExternalName"


def _keep_allocated(new: Obj, old: Obj) -> None:
    """A write that leaves out what the server allocated keeps it; what the new type does not
    have is dropped (Kubernetes' patchAllocatedValues and dropTypeDependentFields)."""
    new_spec, old_spec = new.get("spec"), as_dict(old.get("spec"))
    if not isinstance(new_spec, dict):
        return
    if _needs_ip(new_spec) and _needs_ip(old_spec):
        if not new_spec.get("clusterIP") and old_spec.get("clusterIP"):
            new_spec["clusterIP"] = old_spec["clusterIP"]
            if old_spec.get("clusterIPs"):
                new_spec["clusterIPs"] = list(old_spec["clusterIPs"])
        if not new_spec.get("clusterIPs") and new_spec.get("clusterIP") == old_spec.get(
                "clusterIP") and old_spec.get("clusterIPs"):
            new_spec["clusterIPs"] = list(old_spec["clusterIPs"])
        for name in ("ipFamilies", "ipFamilyPolicy"):
            if new_spec.get(name) is None and old_spec.get(name) is not None:
                new_spec[name] = copy.deepcopy(old_spec[name])
    elif not _needs_ip(new_spec) and _needs_ip(old_spec):
        for name in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
            if new_spec.get(name) == old_spec.get(name):
                new_spec.pop(name, None)
    old_kind, new_kind = old_spec.get("type"), new_spec.get("type")
    if old_kind in serviceips.NEEDS_NODE_PORTS and new_kind in serviceips.NEEDS_NODE_PORTS:
        old_ports = {(as_dict(p).get("port"), as_dict(p).get("protocol")):
                     as_dict(p).get("nodePort") for p in as_list(old_spec.get("ports"))}
        for port in as_list(new_spec.get("ports")):
            if isinstance(port, dict) and not port.get("nodePort"):
                held = old_ports.get((port.get("port"), port.get("protocol")))
                if held:
                    port["nodePort"] = held
    elif old_kind in serviceips.NEEDS_NODE_PORTS:
        old_ports = {(as_dict(p).get("port"), as_dict(p).get("protocol")):
                     as_dict(p).get("nodePort") for p in as_list(old_spec.get("ports"))}
        for port in as_list(new_spec.get("ports")):
            if isinstance(port, dict) and port.get("nodePort") and port.get(
                    "nodePort") == old_ports.get((port.get("port"), port.get("protocol"))):
                del port["nodePort"]
        if new_spec.get("externalTrafficPolicy") == old_spec.get("externalTrafficPolicy"):
            new_spec.pop("externalTrafficPolicy", None)


class ServiceStrategy(TypedStrategy):
    type_key = ("v1", "Service")
    return_deleted_object = True
    known_fields = frozenset({"spec", "status"})
    selectable_fields = ("spec.clusterIP", "spec.type")
    merge_keys = {"spec.ports": "port", "status.conditions": "type"}

    def default(self, obj: Obj, version: VersionInfo) -> None:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            spec = obj["spec"] = {}
        default_service_spec(spec)

    def prepare_for_create(self, obj: Obj, version: VersionInfo) -> None:
        super().prepare_for_create(obj, version)
        obj["status"] = {"loadBalancer": {}}

    def prepare_for_update(self, new: Obj, old: Obj, version: VersionInfo,
                           subresource: str) -> None:
        super().prepare_for_update(new, old, version, subresource)
        if subresource != "status":
            _keep_allocated(new, old)

    def validate(self, obj: Obj, version: VersionInfo) -> list[FieldError]:
        errs = super().validate(obj, version)
        errs += validate_service(obj)
        return errs

    def check_name(self, name: str) -> list[str]:
        return is_dns1035_label(name)

    def validate_update(self, new: Obj, old: Obj, version: VersionInfo) -> list[FieldError]:
        errs = super().validate_update(new, old, version)
        new_spec, old_spec = as_dict(new.get("spec")), as_dict(old.get("spec"))
        old_ip = old_spec.get("clusterIP")
        if old_ip and _needs_ip(new_spec) and new_spec.get("clusterIP") != old_ip:
            errs.append(fields.invalid("spec.clusterIPs[0]", new_spec.get("clusterIP") or "",
                                       "may not change once set"))
        return errs

    def validate_status_update(self, new: Obj, old: Obj,
                               version: VersionInfo) -> list[FieldError]:
        return super().validate_update(new, old, version)

    def field_labels(self, obj: Obj) -> dict[str, str]:
        labels = super().field_labels(obj)
        spec = as_dict(obj.get("spec"))
        labels["spec.clusterIP"] = str(spec.get("clusterIP") or "")
        labels["spec.type"] = str(spec.get("type") or "")
        return labels

    def columns(self, version: VersionInfo) -> list[table.Column]:
        return service_columns()


# --- tables ----------------------------------------------------------------------------------


def port_string(ports: Any) -> str:
    shown = []
    for port in as_list(ports):
        port = as_dict(port)
        protocol = port.get("protocol") or "TCP"
        if port.get("nodePort"):
            shown.append(f"{port.get('port')}:{port['nodePort']}/{protocol}")
        else:
            shown.append(f"{port.get('port')}/{protocol}")
    return ",".join(shown)


def _load_balancer_ips(status: Obj) -> list[str]:
    found = []
    for ingress in as_list(as_dict(status.get("loadBalancer")).get("ingress")):
        ingress = as_dict(ingress)
        if ingress.get("ip"):
            found.append(str(ingress["ip"]))
        elif ingress.get("hostname"):
            found.append(str(ingress["hostname"]))
    return found


def external_ip(obj: Obj) -> str:
    spec, status = as_dict(obj.get("spec")), as_dict(obj.get("status"))
    kind = spec.get("type")
    external = [str(ip) for ip in as_list(spec.get("externalIPs"))]
    if kind in ("ClusterIP", "NodePort"):
        return ",".join(external) or "<none>"
    if kind == "LoadBalancer":
        found = _load_balancer_ips(status) + external
        return ",".join(found) or "<pending>"
    if kind == "ExternalName":
        return str(spec.get("externalName") or "")
    return "<unknown>"


def format_selector(selector: Any) -> str:
    items = sorted(as_dict(selector).items())
    return ",".join(f"{k}={v}" for k, v in items) or "<none>"


def service_row(obj: Obj, now: datetime) -> dict[str, Any]:
    spec = as_dict(obj.get("spec"))
    ips = as_list(spec.get("clusterIPs"))
    return {"Name": meta_of(obj).get("name"), "Type": spec.get("type") or "",
            "Cluster-IP": str(ips[0]) if ips else "<none>", "External-IP": external_ip(obj),
            "Port(s)": port_string(spec.get("ports")) or "<none>",
            "Age": table.age(meta_of(obj).get("creationTimestamp"), now),
            "Selector": format_selector(spec.get("selector"))}


_SERVICE_COLUMNS = (
    ("Name", 0, "Name must be unique within a namespace."),
    ("Type", 0, "type determines how the Service is exposed."),
    ("Cluster-IP", 0, "clusterIP is the IP address of the service and is usually assigned "
                      "randomly."),
    ("External-IP", 0, "externalIPs is a list of IP addresses for which nodes in the cluster "
                       "will also accept traffic for this service."),
    ("Port(s)", 0, "The list of ports that are exposed by this service."),
    ("Age", 0, "CreationTimestamp is a timestamp representing the server time when this "
               "object was created."),
    ("Selector", 1, "Route service traffic to pods with label keys and values matching this "
                    "selector."),
)


def _columns(spec: tuple[tuple[str, int, str], ...], row: Any) -> list[table.Column]:
    def cell(name: str) -> Any:
        return lambda o, now: row(o, now)[name]

    return [table.Column(name, "string", cell(name), priority=priority, description=doc,
                         format="name" if name == "Name" else "")
            for name, priority, doc in spec]


def service_columns() -> list[table.Column]:
    return _columns(_SERVICE_COLUMNS, service_row)


def format_endpoints(obj: Obj) -> str:
    subsets = as_list(obj.get("subsets"))
    if not subsets:
        return "<none>"
    shown: list[str] = []
    most, more, count = 3, False, 0
    for subset in subsets:
        subset = as_dict(subset)
        addresses = [str(as_dict(a).get("ip") or "") for a in as_list(subset.get("addresses"))]
        ports = as_list(subset.get("ports"))
        pairs = [(ip, None) for ip in addresses] if not ports else [
            (ip, as_dict(port).get("port")) for port in ports for ip in addresses]
        for ip, port in pairs:
            count += 1
            if len(shown) == most:
                more = True
                continue
            if port is None:
                shown.append(ip)
            else:
                shown.append(f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}")
    text = ",".join(shown)
    return f"{text} + {count - most} more..." if more else text


def endpoints_row(obj: Obj, now: datetime) -> dict[str, Any]:
    return {"Name": meta_of(obj).get("name"), "Endpoints": format_endpoints(obj),
            "Age": table.age(meta_of(obj).get("creationTimestamp"), now)}


_ENDPOINTS_COLUMNS = (
    ("Name", 0, "Name must be unique within a namespace."),
    ("Endpoints", 0, "Endpoints of the service"),
    ("Age", 0, "CreationTimestamp is a timestamp representing the server time when this "
               "object was created."),
)


class EndpointsStrategy(TypedStrategy):
    type_key = ("v1", "Endpoints")
    known_fields = frozenset({"subsets"})

    def default(self, obj: Obj, version: VersionInfo) -> None:
        for subset in as_list(obj.get("subsets")):
            for port in as_list(as_dict(subset).get("ports")):
                if isinstance(port, dict) and not port.get("protocol"):
                    port["protocol"] = "TCP"

    def validate(self, obj: Obj, version: VersionInfo) -> list[FieldError]:
        errs = super().validate(obj, version)
        for i, subset in enumerate(as_list(obj.get("subsets"))):
            subset = as_dict(subset)
            where = FieldPath.root("subsets").index(i)
            for group in ("addresses", "notReadyAddresses"):
                for j, address in enumerate(as_list(subset.get(group))):
                    ip = as_dict(address).get("ip")
                    if not valid_ip(ip):
                        errs.append(fields.invalid(where.child(group).index(j).child("ip"),
                                                   ip or "", _IP_MESSAGE))
            ports = as_list(subset.get("ports"))
            names: set[str] = set()
            for j, port in enumerate(ports):
                port = as_dict(port)
                pwhere = where.child("ports").index(j)
                name = port.get("name") or ""
                if len(ports) > 1 and not name:
                    errs.append(fields.required(pwhere.child("name"), ""))
                elif name and name in names:
                    errs.append(fields.duplicate(pwhere.child("name"), name))
                names.add(name)
                if not podspec.valid_port(port.get("port")):
                    errs.append(fields.invalid(pwhere.child("port"), port.get("port"),
                                               "must be between 1 and 65535, inclusive"))
                if port.get("protocol") not in podspec.PROTOCOLS:
                    errs.append(fields.not_supported(pwhere.child("protocol"),
                                                     port.get("protocol"), podspec.PROTOCOLS))
        return errs

    def columns(self, version: VersionInfo) -> list[table.Column]:
        return _columns(_ENDPOINTS_COLUMNS, endpoints_row)


def service_resource() -> tuple[ResourceInfo, type[ServiceStrategy]]:
    return (ResourceInfo(group="", resource="services", kind="Service", singular="service",
                         namespaced=True,
                         versions=(VersionInfo("v1", storage=True, status=True),),
                         short_names=("svc",), categories=("all",)),
            ServiceStrategy)


def endpoints_resource() -> tuple[ResourceInfo, type[EndpointsStrategy]]:
    return (ResourceInfo(group="", resource="endpoints", kind="Endpoints",
                         singular="endpoints", namespaced=True,
                         versions=(VersionInfo("v1", storage=True),), short_names=("ep",)),
            EndpointsStrategy)


# --- the kubernetes Service ------------------------------------------------------------------


async def _put(store: Store, namespace: str, wanted: Obj, same: Any) -> None:
    """Create ``wanted``, or make the stored object agree with it where ``same`` says it
    does not (best effort: another server may be doing the same)."""
    name = wanted["metadata"]["name"]
    opts = WriteOptions(field_manager=MANAGER)
    try:
        current = await store.get(namespace, name, "v1")
    except errors.NotFound:
        try:
            await store.create(namespace, copy.deepcopy(wanted), "v1", opts)
        except errors.AlreadyExists:
            pass
        return
    if same(current):
        return
    updated = copy.deepcopy(current)
    for key, value in wanted.items():
        if key != "metadata":
            updated[key] = copy.deepcopy(value)
    updated["metadata"]["labels"] = {**(current["metadata"].get("labels") or {}),
                                     **(wanted["metadata"].get("labels") or {})}
    try:
        await store.update(namespace, name, updated, "v1", opts)
    except errors.Conflict:
        log.info("the kubernetes %s was changed meanwhile; kept", store.info.kind)


async def ensure_kubernetes_service(services: Store, endpoints: Store, slices: Store | None,
                                    *, cluster_ip: str, address: str, port: int) -> None:
    """Create or correct the ``kubernetes`` Service, Endpoints and EndpointSlice in
    ``default`` for an API server reached at ``address:port``."""
    service_port = {"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}
    service = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "kubernetes", "namespace": "default",
                            "labels": {"component": "apiserver", "provider": "kubernetes"}},
               "spec": {"type": "ClusterIP", "clusterIP": cluster_ip,
                        "ports": [service_port], "sessionAffinity": "None"}}

    def service_same(current: Obj) -> bool:
        ports = as_list(as_dict(current.get("spec")).get("ports"))
        return len(ports) == 1 and all(as_dict(ports[0]).get(k) == v
                                       for k, v in service_port.items())

    try:
        await _put(services, "default", service, service_same)
    except errors.ApiError as e:
        log.warning("could not create the kubernetes Service: %s", e)
    subsets = [{"addresses": [{"ip": address}],
                "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}]
    await _put(endpoints, "default", {
        "apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": "kubernetes", "namespace": "default",
                     "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
        "subsets": subsets}, lambda current: current.get("subsets") == subsets)
    if slices is None:
        return
    family = "IPv6" if ":" in address else "IPv4"
    slice_endpoints = [{"addresses": [address], "conditions": {"ready": True}}]
    slice_ports = [{"name": "https", "port": port, "protocol": "TCP"}]
    await _put(slices, "default", {
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "kubernetes", "namespace": "default",
                     "labels": {"kubernetes.io/service-name": "kubernetes"}},
        "addressType": family, "endpoints": slice_endpoints, "ports": slice_ports},
        lambda current: current.get("endpoints") == slice_endpoints and current.get(
            "ports") == slice_ports)
