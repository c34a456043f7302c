"""A pod's status as the kubelet reports it, from a :class:`~setpoint.agent.records.PodRecord`.

:func:`pod_status` builds the ``status`` of a Pod:

* ``phase`` by the kubelet's rule (:func:`phase`): ``Pending`` while init containers have not
  all succeeded or any container waits for its first start; ``Running`` once every container
  started and one runs, or when all stopped but the restart policy will start them again;
  ``Succeeded``/``Failed`` when all stopped for good (or the pod was killed), by exit codes;
  a failed init container with ``restartPolicy: Never`` fails the pod.
* ``conditions`` in the kubelet's order: ``PodReadyToStartContainers``, ``Initialized``,
  ``Ready``, ``ContainersReady``, ``PodScheduled`` — after any condition the kubelet does not
  own, kept from the pod's current status (``DisruptionTarget``, readiness gates' own), with
  the reasons and messages Kubernetes uses (``ContainersNotReady``,
  ``containers with unready status: [web]``, ``PodCompleted``, ...) and
  ``lastTransitionTime`` kept until the status flips.
* ``initContainerStatuses`` in spec order, ``containerStatuses`` sorted by name; each with
  ``state``, ``lastState``, ``ready``, ``started``, ``restartCount``, ``image``, ``imageID``
  (empty: there is no image), ``containerID`` and ``volumeMounts``.
* ``hostIP(s)``, ``podIP(s)``, ``startTime`` and ``qosClass``.

Pure but for one effect: the record's condition transition times are updated when a
condition's status changes (that is the record's memory of them).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from setpoint.agent.records import ContainerRecord, PodRecord
from setpoint.apimachinery import quantity, timeutil

__all__ = ["KUBELET_CONDITIONS", "phase", "pod_status", "qos_class"]

KUBELET_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady",
                      "PodScheduled")

Obj = Mapping[str, Any]


def _spec(rec: PodRecord) -> Obj:
    return rec.pod.get("spec") or {}


def _is_sidecar(container: Obj) -> bool:
    return container.get("restartPolicy") == "Always"


def phase(rec: PodRecord) -> str:
    """The pod's phase (``getPhase`` of the kubelet)."""
    spec = _spec(rec)
    policy = spec.get("restartPolicy") or "Always"
    pending_init = failed_init = 0
    unknown = running = waiting = stopped = succeeded = 0
    for c in spec.get("initContainers") or []:
        cs = rec.containers.get(c["name"])
        if cs is None:
            pending_init += 1
            continue
        if _is_sidecar(c):
            if cs.state == "running":
                if not cs.started:
                    pending_init += 1
                running += 1
            elif cs.state == "waiting" and cs.last is None:
                pending_init += 1
                waiting += 1
            continue
        if cs.state == "running":
            pending_init += 1
        elif cs.state == "terminated":
            if cs.exit_code != 0:
                failed_init += 1
        elif cs.last is not None:
            if cs.last.get("exitCode") != 0:
                failed_init += 1
        else:
            pending_init += 1
    for c in spec.get("containers") or []:
        cs = rec.containers.get(c["name"])
        if cs is None:
            unknown += 1
        elif cs.state == "running":
            running += 1
        elif cs.state == "terminated":
            stopped += 1
            if cs.exit_code == 0:
                succeeded += 1
        elif cs.last is not None:
            stopped += 1
        else:
            waiting += 1
    if failed_init > 0 and policy == "Never":
        return "Failed"
    if (pending_init > 0 and not _any_regular_started(rec)) or waiting > 0:
        return "Pending"
    if running > 0 and unknown == 0:
        return "Running"
    if running == 0 and stopped > 0 and unknown == 0:
        if rec.terminal:
            return "Succeeded" if stopped == succeeded else "Failed"
        if policy == "Always":
            return "Running"
        if stopped == succeeded:
            return "Succeeded"
        if policy == "Never":
            return "Failed"
        return "Running"
    return "Pending"


def _any_regular_started(rec: PodRecord) -> bool:
    for c in _spec(rec).get("containers") or []:
        cs = rec.containers.get(c["name"])
        if cs is not None and (cs.state != "waiting" or cs.last is not None):
            return True
    return False


def qos_class(pod: Obj) -> str:
    """``Guaranteed``, ``Burstable`` or ``BestEffort`` (``GetPodQOS``)."""
    spec = pod.get("spec") or {}
    containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    any_set = False
    guaranteed = True
    for c in containers:
        res = c.get("resources") or {}
        limits = {k: v for k, v in (res.get("limits") or {}).items() if k in ("cpu", "memory")}
        requests = {k: v for k, v in (res.get("requests") or {}).items()
                    if k in ("cpu", "memory")}
        if limits or requests:
            any_set = True
        if set(limits) != {"cpu", "memory"}:
            guaranteed = False
            continue
        for k, v in requests.items():
            try:
                if quantity.value_of(v) != quantity.value_of(limits[k]):
                    guaranteed = False
            except quantity.QuantityError:
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _names(names: list[str]) -> str:
    return "[" + " ".join(names) + "]"  # Go's %s of a []string


def _conditions(rec: PodRecord, pod_phase: str, now: datetime) -> list[dict[str, Any]]:
    spec = _spec(rec)
    out: list[tuple[str, str, str, str]] = []  # type, status, reason, message
    out.append(("PodReadyToStartContainers", "True" if rec.sandbox_ready else "False", "", ""))

    inits = spec.get("initContainers") or []
    if pod_phase == "Succeeded":
        out.append(("Initialized", "True", "PodCompleted", ""))
    elif _any_regular_started(rec):
        out.append(("Initialized", "True", "", ""))
    else:
        incomplete = []
        for c in inits:
            cs = rec.containers.get(c["name"])
            done = (cs is not None and (cs.started if _is_sidecar(c) else cs.ready))
            if not done:
                incomplete.append(c["name"])
        if incomplete:
            out.append(("Initialized", "False", "ContainersNotInitialized",
                        f"containers with incomplete status: {_names(incomplete)}"))
        else:
            out.append(("Initialized", "True", "", ""))

    if pod_phase in ("Succeeded", "Failed"):
        reason = "PodCompleted" if pod_phase == "Succeeded" else "PodFailed"
        ready = ("ContainersReady", "False", reason, "")
    else:
        unready = [c["name"] for c in [*(x for x in inits if _is_sidecar(x)),
                                       *(spec.get("containers") or [])]
                   if not (cs := rec.containers.get(c["name"])) or not cs.ready]
        if unready:
            ready = ("ContainersReady", "False", "ContainersNotReady",
                     f"containers with unready status: {_names(unready)}")
        else:
            ready = ("ContainersReady", "True", "", "")
    pod_ready = ("Ready", *ready[1:])
    if ready[1] == "True":
        current = {c.get("type"): c for c in (rec.pod.get("status") or {}).get("conditions")
                   or []}
        gate_messages = []
        for gate in spec.get("readinessGates") or []:
            ctype = gate.get("conditionType", "")
            cond = current.get(ctype)
            if cond is None:
                gate_messages.append(
                    f"corresponding condition of pod readiness gate {ctype!r} does not exist.")
            elif cond.get("status") != "True":
                gate_messages.append(f"the status of pod readiness gate {ctype!r} is not "
                                     f'"True", but {cond.get("status")}')
        if gate_messages:
            pod_ready = ("Ready", "False", "ReadinessGatesNotReady", ", ".join(gate_messages))
    out.append(pod_ready)
    out.append(ready)
    out.append(("PodScheduled", "True", "", ""))
    return [_condition(rec, now, *c) for c in out]


def _condition(rec: PodRecord, now: datetime, ctype: str, status: str, reason: str,
               message: str) -> dict[str, Any]:
    previous = rec.transitions.get(ctype)
    if previous is None or previous[0] != status:
        previous = (status, timeutil.format_time(now))
        rec.transitions[ctype] = previous
    cond: dict[str, Any] = {"type": ctype, "status": status, "lastProbeTime": None,
                            "lastTransitionTime": previous[1]}
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


def _container_status(spec_c: Obj, cs: ContainerRecord) -> dict[str, Any]:
    status: dict[str, Any] = {
        "name": cs.name,
        "state": cs.state_dict(),
        "lastState": {"terminated": dict(cs.last)} if cs.last else {},
        "ready": cs.ready,
        "restartCount": cs.restart_count,
        "image": spec_c.get("image") or "",
        "imageID": "",
        "started": cs.started,
    }
    if cs.container_id:
        status["containerID"] = cs.container_id
    mounts = []
    for m in spec_c.get("volumeMounts") or []:
        vm: dict[str, Any] = {"name": m.get("name"), "mountPath": m.get("mountPath")}
        if m.get("readOnly"):
            vm["readOnly"] = True
            vm["recursiveReadOnly"] = "Disabled"
        mounts.append(vm)
    if mounts:
        status["volumeMounts"] = mounts
    return status


def pod_status(rec: PodRecord, *, now: datetime) -> dict[str, Any]:
    """The ``status`` of the record's pod at ``now`` (which stamps condition transitions)."""
    spec = _spec(rec)
    pod_phase = phase(rec)
    kept = [c for c in (rec.pod.get("status") or {}).get("conditions") or []
            if c.get("type") not in KUBELET_CONDITIONS]
    status: dict[str, Any] = {"phase": pod_phase,
                              "conditions": [*kept, *_conditions(rec, pod_phase, now)]}
    if rec.reason:
        status["reason"] = rec.reason
    if rec.message:
        status["message"] = rec.message
    if rec.host_ip:
        status["hostIP"] = rec.host_ip
        status["hostIPs"] = [{"ip": rec.host_ip}]
    if rec.pod_ip:
        status["podIP"] = rec.pod_ip
        status["podIPs"] = [{"ip": rec.pod_ip}]
    status["startTime"] = timeutil.format_time(rec.start_time)
    inits = spec.get("initContainers") or []
    if inits:
        status["initContainerStatuses"] = [
            _container_status(c, rec.containers[c["name"]]) for c in inits
            if c["name"] in rec.containers]
    containers = sorted(spec.get("containers") or [], key=lambda c: str(c.get("name")))
    status["containerStatuses"] = [_container_status(c, rec.containers[c["name"]])
                                   for c in containers if c["name"] in rec.containers]
    status["qosClass"] = qos_class(rec.pod)
    return status
