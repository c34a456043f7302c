"""The rows of ``kubectl get pods``, computed as Kubernetes' pod printer computes them.

Columns: NAME READY STATUS RESTARTS AGE, and with ``-o wide`` IP NODE NOMINATED NODE
READINESS GATES. STATUS is the pod's phase unless something says more: the pod's reason
(``Evicted``), the first init container that has not finished (``Init:0/2``,
``Init:CrashLoopBackOff``, ``Init:ExitCode:1``), a container's waiting or terminated reason
(``ContainerCreating``, ``CrashLoopBackOff``, ``Completed``, ``Error``), ``Terminating`` for a
pod marked for deletion that has not finished, ``Unknown`` for one whose node is unreachable.
RESTARTS adds ``(5m ago)`` after the last restart.

Invariants: every function takes a stored Pod as any JSON object and never raises.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from setpoint.apimachinery import timeutil
from setpoint.apimachinery.jsonshape import as_dict, as_list
from setpoint.registry import table

Obj = dict[str, Any]




def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return timeutil.parse_time(value)
    except ValueError:
        return None


def _restartable(container: Any) -> bool:
    return as_dict(container).get("restartPolicy") == "Always"


def _condition_true(status: Obj, kind: str) -> bool:
    return any(as_dict(c).get("type") == kind and as_dict(c).get("status") == "True"
               for c in as_list(status.get("conditions")))


def _later(current: datetime | None, state: Obj) -> datetime | None:
    terminated = as_dict(as_dict(state.get("lastState")).get("terminated"))
    finished = _time(terminated.get("finishedAt"))
    if finished is not None and (current is None or finished > current):
        return finished
    return current


def _terminated_reason(terminated: Obj, prefix: str = "") -> str:
    if terminated.get("reason"):
        return prefix + str(terminated["reason"])
    if _int(terminated.get("signal")):
        return f"{prefix}Signal:{_int(terminated['signal'])}"
    return f"{prefix}ExitCode:{_int(terminated.get('exitCode'))}"


def pod_row(pod: Obj, now: datetime) -> dict[str, Any]:
    """The cells of one pod's row, by column name."""
    spec, status, meta = as_dict(pod.get("spec")), as_dict(pod.get("status")), as_dict(
        pod.get("metadata"))
    containers, init_specs = as_list(spec.get("containers")), as_list(spec.get("initContainers"))
    total = len(containers) + sum(1 for c in init_specs if _restartable(c))
    ready = restarts = sidecar_restarts = 0
    last_restart: datetime | None = None
    last_sidecar_restart: datetime | None = None
    phase = str(status.get("phase") or "")
    reason = str(status.get("reason") or phase)
    for condition in as_list(status.get("conditions")):
        condition = as_dict(condition)
        if condition.get("type") == "PodScheduled" and \
                condition.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    init_by_name = {as_dict(c).get("name"): c for c in init_specs}
    initializing = False
    for i, cs in enumerate(as_list(status.get("initContainerStatuses"))):
        cs = as_dict(cs)
        restarts += _int(cs.get("restartCount"))
        last_restart = _later(last_restart, cs)
        sidecar = _restartable(init_by_name.get(cs.get("name")))
        if sidecar:
            sidecar_restarts += _int(cs.get("restartCount"))
            last_sidecar_restart = _later(last_sidecar_restart, cs)
        state = as_dict(cs.get("state"))
        terminated, waiting = as_dict(state.get("terminated")), as_dict(state.get("waiting"))
        if state.get("terminated") is not None and _int(terminated.get("exitCode")) == 0:
            continue
        if sidecar and cs.get("started") is True:
            if cs.get("ready") is True:
                ready += 1
            continue
        if state.get("terminated") is not None:
            reason = _terminated_reason(terminated, "Init:")
        elif waiting.get("reason") and waiting.get("reason") != "PodInitializing":
            reason = f"Init:{waiting['reason']}"
        else:
            reason = f"Init:{i}/{len(init_specs)}"
        initializing = True
        break
    if not initializing or _condition_true(status, "Initialized"):
        restarts, last_restart = sidecar_restarts, last_sidecar_restart
        running = False
        for cs in reversed(as_list(status.get("containerStatuses"))):
            cs = as_dict(cs)
            restarts += _int(cs.get("restartCount"))
            last_restart = _later(last_restart, cs)
            state = as_dict(cs.get("state"))
            terminated, waiting = as_dict(state.get("terminated")), as_dict(state.get("waiting"))
            if waiting.get("reason"):
                reason = str(waiting["reason"])
            elif state.get("terminated") is not None:
                reason = _terminated_reason(terminated)
            elif cs.get("ready") is True and state.get("running") is not None:
                running = True
                ready += 1
        if reason == "Completed" and running:
            reason = "Running" if _condition_true(status, "Ready") else "NotReady"
    if meta.get("deletionTimestamp") and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif meta.get("deletionTimestamp") and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"
    shown_restarts = str(restarts)
    if restarts and last_restart is not None:
        since = timeutil.human_duration((now - last_restart).total_seconds())
        shown_restarts = f"{restarts} ({since} ago)"
    ips = as_list(status.get("podIPs"))
    ip = str(as_dict(ips[0]).get("ip") or "") if ips else ""
    gates = as_list(spec.get("readinessGates"))
    gates_cell = "<none>"
    if gates:
        true = 0
        for gate in gates:
            wanted = as_dict(gate).get("conditionType")
            for condition in as_list(status.get("conditions")):
                if as_dict(condition).get("type") == wanted:
                    true += as_dict(condition).get("status") == "True"
                    break
        gates_cell = f"{true}/{len(gates)}"
    return {"Name": meta.get("name"), "Ready": f"{ready}/{total}", "Status": reason,
            "Restarts": shown_restarts, "Age": table.age(meta.get("creationTimestamp"), now),
            "IP": ip or "<none>", "Node": spec.get("nodeName") or "<none>",
            "Nominated Node": status.get("nominatedNodeName") or "<none>",
            "Readiness Gates": gates_cell}


#: (name, priority, description): the columns of Kubernetes' pod printer
_COLUMNS = (
    ("Name", 0, "Name must be unique within a namespace."),
    ("Ready", 0, "The aggregate readiness state of this pod for accepting traffic."),
    ("Status", 0, "The aggregate status of the containers in this pod."),
    ("Restarts", 0, "The number of times the containers in this pod have been restarted and "
                    "when the last container in this pod has restarted."),
    ("Age", 0, "CreationTimestamp is a timestamp representing the server time when this "
               "object was created."),
    ("IP", 1, "podIP address allocated to the pod. Routable at least within the cluster."),
    ("Node", 1, "NodeName indicates in which node this pod is scheduled."),
    ("Nominated Node", 1, "nominatedNodeName is set only when this pod preempts other pods "
                          "on the node."),
    ("Readiness Gates", 1, "If specified, all readiness gates will be evaluated for pod "
                           "readiness."),
)


def pod_columns() -> list[table.Column]:
    def cell(name: str) -> Any:
        return lambda o, now: pod_row(o, now)[name]

    return [table.Column(name, "string", cell(name), priority=priority, description=doc,
                         format="name" if name == "Name" else "")
            for name, priority, doc in _COLUMNS]
