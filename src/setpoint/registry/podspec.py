"""Defaulting and validation of a pod spec, as kube-apiserver does them for core/v1.

Shared by the Pod kind and (later) every kind with a pod template: :func:`default_pod_spec`
fills what ``SetDefaults_PodSpec`` and friends fill, :func:`validate_pod_spec` checks what
``ValidatePodSpec`` checks that matters to a node agent, with Kubernetes' field paths and
messages.

What is validated: containers (required; names DNS-1123 labels unique across init and
regular containers; image required; ports 1-65535, protocol, unique port names; env names,
one source per env var; volume mounts naming a declared volume, unique mount paths; resource
quantities non-negative and requests not above limits; enums: imagePullPolicy,
terminationMessagePolicy, restartPolicy of init containers), volumes (names DNS-1123 labels,
unique, exactly one source), restartPolicy, dnsPolicy, terminationGracePeriodSeconds,
activeDeadlineSeconds, nodeName, tolerations, readinessGates, schedulingGates, hostname.

What is not (accepted as sent): the details of each volume source, probes' handlers beyond
their shape, affinity terms, security contexts, topology spread constraints, DNS config,
overhead, resource claims, ephemeral containers.

Invariants: the functions take objects that decoded into the Go types (lists are lists,
strings are strings, any value may be absent or null) and never raise for such input.
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction
from typing import Any

from setpoint.apimachinery import fields, quantity, regexp, validation
from setpoint.apimachinery.fields import ErrorType, FieldError, FieldPath
from setpoint.apimachinery.jsonshape import as_dict, as_list

Obj = dict[str, Any]

DEFAULT_TERMINATION_GRACE_PERIOD = 30
DEFAULT_SCHEDULER = "default-scheduler"
TERMINATION_MESSAGE_PATH = "/dev/termination-log"
RESTART_POLICIES = ("Always", "OnFailure", "Never")
DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
PROTOCOLS = ("SCTP", "TCP", "UDP")
MESSAGE_POLICIES = ("File", "FallbackToLogsOnError")
TOLERATION_OPERATORS = ("Equal", "Exists")
TAINT_EFFECTS = ("NoExecute", "NoSchedule", "PreferNoSchedule")
#: the volume sources of core/v1 (exactly one per volume)
VOLUME_SOURCES = (
    "hostPath", "emptyDir", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "secret",
    "nfs", "iscsi", "glusterfs", "persistentVolumeClaim", "rbd", "flexVolume", "cinder",
    "cephfs", "flocker", "downwardAPI", "fc", "azureFile", "configMap", "vsphereVolume",
    "quobyte", "azureDisk", "photonPersistentDisk", "projected", "portworxVolume", "scaleIO",
    "storageos", "csi", "ephemeral", "image",
)
#: volume sources whose files get a defaultMode of 0644
_MODE_SOURCES = ("secret", "configMap", "downwardAPI", "projected")
DEFAULT_MODE = 0o644

_ENV_NAME_MSG = ("a valid environment variable name must consist only of printable ASCII "
                 "characters other than '='")
_PORT_NAME = regexp.Regexp(r"^[-a-z0-9]+$")
_HAS_LETTER = regexp.Regexp(r"[a-z]")




def _not_found(path: FieldPath | str, value: Any) -> FieldError:
    return FieldError(ErrorType.NOT_FOUND, str(path), "", value)


# --- defaulting ------------------------------------------------------------------------------


def pull_policy(image: str) -> str:
    """Kubernetes' default imagePullPolicy: Always for ``:latest`` or no tag, else
    IfNotPresent (a digest counts as a tag)."""
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    if ":" not in last:
        return "Always"
    return "Always" if last.rsplit(":", 1)[1] == "latest" else "IfNotPresent"


def _default_probe(probe: Any) -> None:
    if not isinstance(probe, dict):
        return
    for name, value in (("timeoutSeconds", 1), ("periodSeconds", 10), ("successThreshold", 1),
                        ("failureThreshold", 3)):
        if not probe.get(name):
            probe[name] = value
    http = probe.get("httpGet")
    if isinstance(http, dict):
        if not http.get("path"):
            http["path"] = "/"
        if not http.get("scheme"):
            http["scheme"] = "HTTP"
    grpc = probe.get("grpc")
    if isinstance(grpc, dict) and grpc.get("service") is None:
        grpc["service"] = ""


def _default_field_ref(ref: Any) -> None:
    if isinstance(ref, dict) and not ref.get("apiVersion"):
        ref["apiVersion"] = "v1"


def _default_container(container: Any, host_network: bool) -> None:
    if not isinstance(container, dict):
        return
    if not container.get("terminationMessagePath"):
        container["terminationMessagePath"] = TERMINATION_MESSAGE_PATH
    if not container.get("terminationMessagePolicy"):
        container["terminationMessagePolicy"] = "File"
    image = container.get("image")
    if not container.get("imagePullPolicy") and isinstance(image, str) and image:
        container["imagePullPolicy"] = pull_policy(image)
    if container.get("resources") is None:
        container["resources"] = {}
    resources = as_dict(container.get("resources"))
    limits = as_dict(resources.get("limits"))
    if limits:
        requests = resources.get("requests")
        if not isinstance(requests, dict):
            requests = resources["requests"] = {}
        for name, value in limits.items():
            requests.setdefault(name, value)
    for port in as_list(container.get("ports")):
        if isinstance(port, dict):
            if not port.get("protocol"):
                port["protocol"] = "TCP"
            if host_network and not port.get("hostPort") and port.get("containerPort"):
                port["hostPort"] = port["containerPort"]
    for env in as_list(container.get("env")):
        source = as_dict(as_dict(env).get("valueFrom"))
        _default_field_ref(source.get("fieldRef"))
    for name in ("livenessProbe", "readinessProbe", "startupProbe"):
        _default_probe(container.get(name))


def _default_items(items: Any) -> None:
    for item in as_list(items):
        _default_field_ref(as_dict(item).get("fieldRef"))


def _default_volume(volume: Any) -> None:
    if not isinstance(volume, dict):
        return
    if not any(volume.get(source) is not None for source in VOLUME_SOURCES):
        volume["emptyDir"] = {}
    for source in _MODE_SOURCES:
        spec = volume.get(source)
        if isinstance(spec, dict) and spec.get("defaultMode") is None:
            spec["defaultMode"] = DEFAULT_MODE
    _default_items(as_dict(volume.get("downwardAPI")).get("items"))
    for projection in as_list(as_dict(volume.get("projected")).get("sources")):
        projection = as_dict(projection)
        _default_items(as_dict(projection.get("downwardAPI")).get("items"))
        token = projection.get("serviceAccountToken")
        if isinstance(token, dict) and not token.get("expirationSeconds"):
            token["expirationSeconds"] = 3600
    host_path = volume.get("hostPath")
    if isinstance(host_path, dict) and host_path.get("type") is None:
        host_path["type"] = ""


def default_pod_spec(spec: Obj) -> None:
    """Fill ``spec`` (in place) with Kubernetes' defaults for a core/v1 PodSpec."""
    if not spec.get("restartPolicy"):
        spec["restartPolicy"] = "Always"
    if not spec.get("dnsPolicy"):
        spec["dnsPolicy"] = "ClusterFirst"
    if spec.get("terminationGracePeriodSeconds") is None:
        spec["terminationGracePeriodSeconds"] = DEFAULT_TERMINATION_GRACE_PERIOD
    if not spec.get("schedulerName"):
        spec["schedulerName"] = DEFAULT_SCHEDULER
    if spec.get("securityContext") is None:
        spec["securityContext"] = {}
    if spec.get("enableServiceLinks") is None:
        spec["enableServiceLinks"] = True
    account = spec.get("serviceAccountName") or spec.get("serviceAccount")
    if account:  # the deprecated alias mirrors the name, both ways
        spec["serviceAccountName"] = spec["serviceAccount"] = account
    host_network = spec.get("hostNetwork") is True
    for name in ("initContainers", "containers"):
        for container in as_list(spec.get(name)):
            _default_container(container, host_network)
    for volume in as_list(spec.get("volumes")):
        _default_volume(volume)


# --- validation ------------------------------------------------------------------------------


def _parse_quantity(value: Any) -> Fraction | None:
    try:
        return quantity.parse_quantity(str(value))
    except (quantity.QuantityError, ValueError):
        return None


def _format(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    return str(float(value))


def _validate_resources(resources: Any, path: FieldPath) -> list[FieldError]:
    errs: list[FieldError] = []
    resources = as_dict(resources)
    parsed: dict[str, dict[str, Fraction]] = {}
    for part in ("limits", "requests"):
        values = parsed[part] = {}
        for name, raw in as_dict(resources.get(part)).items():
            where = path.child(part).key(name)
            problems = validation.is_qualified_name(name)
            if problems:
                errs.append(fields.invalid(where, name, "; ".join(problems)))
            value = _parse_quantity(raw)
            if value is None:
                errs.append(fields.invalid(where, raw, quantity.ERR_FORMAT))
                continue
            if value < 0:
                errs.append(fields.invalid(where, raw, "must be greater than or equal to 0"))
            values[name] = value
    for name, request in parsed["requests"].items():
        limit = parsed["limits"].get(name)
        if limit is not None and request > limit:
            raw = as_dict(resources.get("requests")).get(name)
            errs.append(fields.invalid(
                path.child("requests").key(name), raw,
                f"must be less than or equal to {name} limit of "
                f"{as_dict(resources.get('limits')).get(name)}"))
    return errs


def port_name_errors(name: str, path: FieldPath) -> list[FieldError]:
    """What is wrong with a port name (an IANA service name)."""
    problems: list[str] = []
    if len(name) > 15:
        problems.append("must be no more than 15 characters")
    if not _PORT_NAME.match(name):
        problems.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if "--" in name:
        problems.append("must not contain consecutive hyphens")
    if name and (name[0] == "-" or name[-1] == "-"):
        problems.append("must not begin or end with a hyphen")
    if not _HAS_LETTER.search(name):
        problems.append("must contain at least one letter (a-z)")
    return [fields.invalid(path, name, p) for p in problems]


def valid_port(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535


def _validate_ports(ports: Any, path: FieldPath) -> list[FieldError]:
    errs: list[FieldError] = []
    names: set[str] = set()
    for i, port in enumerate(as_list(ports)):
        port = as_dict(port)
        where = path.index(i)
        name = port.get("name")
        if name:
            errs.extend(port_name_errors(name, where.child("name")))
            if name in names:
                errs.append(fields.duplicate(where.child("name"), name))
            names.add(name)
        container_port = port.get("containerPort")
        if container_port is None:
            errs.append(fields.required(where.child("containerPort")))
        elif not valid_port(container_port):
            errs.append(fields.invalid(where.child("containerPort"), container_port,
                                       "must be between 1 and 65535, inclusive"))
        host_port = port.get("hostPort")
        if host_port and not valid_port(host_port):
            errs.append(fields.invalid(where.child("hostPort"), host_port,
                                       "must be between 1 and 65535, inclusive"))
        protocol = port.get("protocol")
        if protocol is None or protocol == "":
            errs.append(fields.required(where.child("protocol")))
        elif protocol not in PROTOCOLS:
            errs.append(fields.not_supported(where.child("protocol"), protocol, PROTOCOLS))
    return errs


def _validate_env(env: Any, path: FieldPath) -> list[FieldError]:
    errs: list[FieldError] = []
    for i, var in enumerate(as_list(env)):
        var = as_dict(var)
        where = path.index(i)
        name = var.get("name")
        if not name:
            errs.append(fields.required(where.child("name")))
        elif "=" in name or not all(" " <= c <= "~" for c in name):
            errs.append(fields.invalid(where.child("name"), name, _ENV_NAME_MSG))
        source = var.get("valueFrom")
        if source is not None:
            if var.get("value"):
                errs.append(fields.invalid(where.child("valueFrom"), "",
                                           "may not be specified when `value` is not empty"))
            count = sum(1 for k in ("fieldRef", "resourceFieldRef", "configMapKeyRef",
                                    "secretKeyRef") if as_dict(source).get(k) is not None)
            if count == 0:
                errs.append(fields.invalid(where.child("valueFrom"), "",
                                           "must specify one of: `fieldRef`, "
                                           "`resourceFieldRef`, `configMapKeyRef` or "
                                           "`secretKeyRef`"))
            elif count > 1:
                errs.append(fields.invalid(where.child("valueFrom"), "",
                                           "may not have more than one field specified at a "
                                           "time"))
            for ref in ("configMapKeyRef", "secretKeyRef"):
                key_ref = as_dict(source).get(ref)
                if isinstance(key_ref, dict) and not key_ref.get("key"):
                    errs.append(fields.required(where.child("valueFrom").child(ref).child("key")))
            field_ref = as_dict(source).get("fieldRef")
            if isinstance(field_ref, dict) and not field_ref.get("fieldPath"):
                errs.append(fields.required(where.child("valueFrom").child("fieldRef")
                                            .child("fieldPath")))
    return errs


def _validate_mounts(mounts: Any, volumes: set[str], path: FieldPath) -> list[FieldError]:
    errs: list[FieldError] = []
    paths: set[str] = set()
    for i, mount in enumerate(as_list(mounts)):
        mount = as_dict(mount)
        where = path.index(i)
        name = mount.get("name")
        if not name:
            errs.append(fields.required(where.child("name")))
        elif name not in volumes:
            errs.append(_not_found(where.child("name"), name))
        mount_path = mount.get("mountPath")
        if not mount_path:
            errs.append(fields.required(where.child("mountPath")))
        elif mount_path in paths:
            errs.append(fields.invalid(where.child("mountPath"), mount_path, "must be unique"))
        else:
            paths.add(mount_path)
        sub_path = mount.get("subPath")
        if isinstance(sub_path, str) and (sub_path.startswith("/") or ".." in
                                          sub_path.split("/")):
            errs.append(fields.invalid(where.child("subPath"), sub_path,
                                       "must be a relative path without '..'"))
    return errs


def _validate_probe(probe: Any, path: FieldPath) -> list[FieldError]:
    if probe is None:
        return []
    probe = as_dict(probe)
    errs: list[FieldError] = []
    handlers = [k for k in ("exec", "httpGet", "tcpSocket", "grpc") if probe.get(k) is not None]
    if not handlers:
        errs.append(fields.required(path, "must specify a handler type"))
    elif len(handlers) > 1:
        errs.append(fields.forbidden(path.child(handlers[1]),
                                     "may not specify more than 1 handler type"))
    for name in ("initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold",
                 "failureThreshold"):
        value = probe.get(name)
        if isinstance(value, int) and value < 0:
            errs.append(fields.invalid(path.child(name), value,
                                       "must be greater than or equal to 0"))
    return errs


def _validate_container(container: Any, path: FieldPath, volumes: set[str], *,
                        init: bool) -> list[FieldError]:
    container = as_dict(container)
    errs: list[FieldError] = []
    image = container.get("image")
    if not image:
        errs.append(fields.required(path.child("image")))
    elif image.strip() != image:
        errs.append(fields.invalid(path.child("image"), image,
                                   "must not have leading or trailing whitespace"))
    policy = container.get("imagePullPolicy")
    if policy and policy not in PULL_POLICIES:
        errs.append(fields.not_supported(path.child("imagePullPolicy"), policy, PULL_POLICIES))
    message_policy = container.get("terminationMessagePolicy")
    if message_policy and message_policy not in MESSAGE_POLICIES:
        errs.append(fields.not_supported(path.child("terminationMessagePolicy"),
                                         message_policy, MESSAGE_POLICIES))
    errs += _validate_ports(container.get("ports"), path.child("ports"))
    errs += _validate_env(container.get("env"), path.child("env"))
    errs += _validate_mounts(container.get("volumeMounts"), volumes, path.child("volumeMounts"))
    errs += _validate_resources(container.get("resources"), path.child("resources"))
    restart = container.get("restartPolicy")
    if restart is not None:
        if not init:
            errs.append(fields.forbidden(path.child("restartPolicy"),
                                         "may not be set for non-init containers"))
        elif restart != "Always":
            errs.append(fields.not_supported(path.child("restartPolicy"), restart, ["Always"]))
    probes = ("livenessProbe", "readinessProbe", "startupProbe")
    for name in probes:
        if init and restart != "Always" and container.get(name) is not None:
            errs.append(fields.forbidden(path.child(name),
                                         "may not be set for init containers without "
                                         "restartPolicy=Always"))
        else:
            errs += _validate_probe(container.get(name), path.child(name))
    return errs


def _validate_volumes(volumes: Any, path: FieldPath) -> tuple[list[FieldError], set[str]]:
    errs: list[FieldError] = []
    names: set[str] = set()
    for i, volume in enumerate(as_list(volumes)):
        volume = as_dict(volume)
        where = path.index(i)
        name = volume.get("name")
        if not name:
            errs.append(fields.required(where.child("name")))
        else:
            errs.extend(fields.invalid(where.child("name"), name, p)
                        for p in validation.is_dns1123_label(name))
            if name in names:
                errs.append(fields.duplicate(where.child("name"), name))
            names.add(name)
        sources = [s for s in VOLUME_SOURCES if volume.get(s) is not None]
        if not sources:
            errs.append(fields.required(where, "must specify a volume type"))
        elif len(sources) > 1:
            errs.append(fields.forbidden(where.child(sources[1]),
                                         "may not specify more than 1 volume type"))
        host_path = as_dict(volume.get("hostPath"))
        if "hostPath" in sources and not host_path.get("path"):
            errs.append(fields.required(where.child("hostPath").child("path")))
    return errs, names


def _validate_tolerations(tolerations: Any, path: FieldPath) -> list[FieldError]:
    errs: list[FieldError] = []
    for i, toleration in enumerate(as_list(tolerations)):
        toleration = as_dict(toleration)
        where = path.index(i)
        key = toleration.get("key") or ""
        operator = toleration.get("operator") or "Equal"
        if key:
            errs.extend(fields.invalid(where.child("key"), key, p)
                        for p in validation.is_qualified_name(key))
        if operator not in TOLERATION_OPERATORS:
            errs.append(fields.not_supported(where.child("operator"), operator,
                                             TOLERATION_OPERATORS))
        elif operator == "Exists" and toleration.get("value"):
            errs.append(fields.invalid(where.child("operator"), toleration.get("value"),
                                       "value must be empty when `operator` is 'Exists'"))
        elif not key and operator != "Exists":
            errs.append(fields.invalid(where.child("operator"), operator,
                                       "operator must be Exists when `key` is empty, which "
                                       "means \"match all values and all keys\""))
        effect = toleration.get("effect")
        if effect and effect not in TAINT_EFFECTS:
            errs.append(fields.not_supported(where.child("effect"), effect, TAINT_EFFECTS))
        seconds = toleration.get("tolerationSeconds")
        if seconds is not None and effect != "NoExecute":
            errs.append(fields.invalid(where.child("effect"), effect,
                                       "effect must be 'NoExecute' when `tolerationSeconds` "
                                       "is set"))
    return errs


def _names_unique(items: Iterable[Any], key: str, path: FieldPath,
                  check: Any = validation.is_qualified_name) -> list[FieldError]:
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        value = as_dict(item).get(key)
        where = path.index(i).child(key)
        if not value:
            errs.append(fields.required(where))
            continue
        errs.extend(fields.invalid(where, value, p) for p in check(value))
        if value in seen:
            errs.append(fields.duplicate(where, value))
        seen.add(value)
    return errs


def validate_pod_spec(spec: Any, path: FieldPath) -> list[FieldError]:
    """What is wrong with a (defaulted) pod spec at ``path``."""
    if not isinstance(spec, dict):
        return [fields.required(path)]
    errs, volumes = _validate_volumes(spec.get("volumes"), path.child("volumes"))
    containers = as_list(spec.get("containers"))
    init_containers = as_list(spec.get("initContainers"))
    if not containers:
        errs.append(fields.required(path.child("containers")))
    names: set[str] = set()
    for group, items in (("initContainers", init_containers), ("containers", containers)):
        for i, container in enumerate(items):
            where = path.child(group).index(i)
            name = as_dict(container).get("name")
            if not name:
                errs.append(fields.required(where.child("name")))
            else:
                errs.extend(fields.invalid(where.child("name"), name, p)
                            for p in validation.is_dns1123_label(name))
                if name in names:
                    errs.append(fields.duplicate(where.child("name"), name))
                names.add(name)
            errs += _validate_container(container, where, volumes,
                                        init=group == "initContainers")
    restart = spec.get("restartPolicy")
    if restart not in RESTART_POLICIES:
        errs.append(fields.not_supported(path.child("restartPolicy"), restart,
                                         RESTART_POLICIES))
    dns = spec.get("dnsPolicy")
    if dns not in DNS_POLICIES:
        errs.append(fields.not_supported(path.child("dnsPolicy"), dns, DNS_POLICIES))
    grace = spec.get("terminationGracePeriodSeconds")
    if isinstance(grace, int) and grace < 0:
        errs.append(fields.invalid(path.child("terminationGracePeriodSeconds"), grace,
                                   "must be greater than or equal to 0"))
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and not 1 <= deadline <= 2147483647:
        errs.append(fields.invalid(path.child("activeDeadlineSeconds"), deadline,
                                   "must be between 1 and 2147483647, inclusive"))
    node = spec.get("nodeName")
    if node:
        errs.extend(fields.invalid(path.child("nodeName"), node, p)
                    for p in validation.is_dns1123_subdomain(node))
    for name in ("hostname", "subdomain"):
        value = spec.get(name)
        if value:
            errs.extend(fields.invalid(path.child(name), value, p)
                        for p in validation.is_dns1123_label(value))
    account = spec.get("serviceAccountName")
    if account:
        errs.extend(fields.invalid(path.child("serviceAccountName"), account, p)
                    for p in validation.is_dns1123_subdomain(account))
    errs += _validate_tolerations(spec.get("tolerations"), path.child("tolerations"))
    errs += _names_unique(as_list(spec.get("readinessGates")), "conditionType",
                          path.child("readinessGates"))
    errs += _names_unique(as_list(spec.get("schedulingGates")), "name",
                          path.child("schedulingGates"))
    for key, value in as_dict(spec.get("nodeSelector")).items():
        where = path.child("nodeSelector")
        errs.extend(fields.invalid(where, key, p) for p in validation.is_qualified_name(key))
        if isinstance(value, str):
            errs.extend(fields.invalid(where.key(key), value, p)
                        for p in validation.is_valid_label_value(value))
    return errs
