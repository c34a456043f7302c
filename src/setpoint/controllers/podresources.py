"""What a pod asks of a node, and what a node offers: resources as integers.

Resources are ``{name: int}`` in the units the scheduler compares: ``cpu`` in millicores,
everything else (``memory``, ``ephemeral-storage``, extended resources) in whole units
(bytes, items), each rounded up as Kubernetes rounds quantities.

A pod's requests (Kubernetes' ``resource.PodRequests``): the sum over its containers and
its sidecars (init containers with ``restartPolicy: Always``), or, when larger, what an init
container needs while it runs (its own requests plus the sidecars started before it), per
resource; plus ``spec.overhead``. A container's ``limits`` stand for its missing
``requests`` (the API server defaults them so; this reads pods that may predate that).

For scoring, :func:`non_zero_requests` counts a container that requests no cpu as 100m and
no memory as 200Mi (Kubernetes' ``DefaultMilliCPURequest`` / ``DefaultMemoryRequest``), so
that pods without requests still spread.

A node offers ``status.allocatable`` (``status.capacity`` when a node reports no
allocatable at all); ``pods`` is how many pods it takes.

Invariants: never raises on malformed quantities (they count as 0); never mutates.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, Final

from setpoint.apimachinery.quantity import QuantityError, value_of
from setpoint.controllers.taints import items

Obj = Mapping[str, Any]
Resources = dict[str, int]

CPU: Final = "cpu"
MEMORY: Final = "memory"
PODS: Final = "pods"
#: what scoring counts for a container that requests no cpu (millicores) or memory (bytes)
DEFAULT_MILLI_CPU: Final = 100
DEFAULT_MEMORY: Final = 200 * 1024 * 1024
#: resource names considered per pod or node (more are ignored: validated objects have few)
MAX_RESOURCES: Final = 64


def amount(name: str, quantity: Any) -> int:
    """``quantity`` of resource ``name`` as an int (cpu in millicores), rounded up; 0 when
    it is not a quantity."""
    try:
        value = value_of(quantity)
    except QuantityError:
        return 0
    if name == CPU:
        value *= 1000
    return max(0, math.ceil(value))


def parse(resources: Any) -> Resources:
    """A ``{name: quantity}`` mapping (requests, limits, allocatable) as :data:`Resources`."""
    if not isinstance(resources, Mapping):
        return {}
    out: Resources = {}
    for name, quantity in list(resources.items())[:MAX_RESOURCES]:
        if isinstance(name, str):
            out[name] = amount(name, quantity)
    return out


def add(total: Resources, more: Mapping[str, int], sign: int = 1) -> None:
    for name, value in more.items():
        total[name] = total.get(name, 0) + sign * value
        if total[name] == 0:
            del total[name]


def _max(a: Resources, b: Mapping[str, int]) -> Resources:
    out = dict(a)
    for name, value in b.items():
        out[name] = max(out.get(name, 0), value)
    return out


def container_requests(container: Obj) -> Resources:
    spec = container.get("resources")
    if not isinstance(spec, Mapping):
        return {}
    requests = parse(spec.get("requests"))
    for name, value in parse(spec.get("limits")).items():
        requests.setdefault(name, value)
    return requests


def _spec(pod: Obj) -> Mapping[str, Any]:
    spec = pod.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _requests(pod: Obj, per_container: Any) -> Resources:
    spec = _spec(pod)
    total: Resources = {}
    for container in items(spec.get("containers")):
        add(total, per_container(container))
    init_peak: Resources = {}
    sidecars: Resources = {}
    for container in items(spec.get("initContainers")):
        own = per_container(container)
        if container.get("restartPolicy") == "Always":
            add(sidecars, own)
            init_peak = _max(init_peak, sidecars)
        else:
            running = dict(sidecars)
            add(running, own)
            init_peak = _max(init_peak, running)
    add(total, sidecars)
    total = _max(total, init_peak)
    add(total, parse(spec.get("overhead")))
    return {k: v for k, v in total.items() if v > 0}


def pod_requests(pod: Obj) -> Resources:
    """What the NodeResourcesFit filter compares with a node's free resources."""
    return _requests(pod, container_requests)


def _non_zero(container: Obj) -> Resources:
    requests = container_requests(container)
    return {CPU: requests.get(CPU) or DEFAULT_MILLI_CPU,
            MEMORY: requests.get(MEMORY) or DEFAULT_MEMORY}


def non_zero_requests(pod: Obj) -> Resources:
    """cpu and memory as scoring counts them (see the module docstring)."""
    requests = _requests(pod, _non_zero)
    return {CPU: requests.get(CPU, 0), MEMORY: requests.get(MEMORY, 0)}


def allocatable(node: Obj) -> Resources:
    status = node.get("status")
    if not isinstance(status, Mapping):
        return {}
    offered = status.get("allocatable")
    if not isinstance(offered, Mapping) or not offered:
        offered = status.get("capacity")
    return parse(offered)


def total(resources: Iterable[Mapping[str, int]]) -> Resources:
    out: Resources = {}
    for r in resources:
        add(out, r)
    return out

