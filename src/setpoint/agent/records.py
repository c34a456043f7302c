"""What a runtime knows about a pod and its containers, in the shape status is made from.

Both runtimes keep one :class:`PodRecord` per pod and one :class:`ContainerRecord` per
container (init containers included); :mod:`setpoint.agent.status` turns them into the API's
``PodStatus``. Records are small (``__slots__``), so a simulated node holds 100,000 pods, and
serialise to JSON so a process runtime's state survives the agent.

A container is always in exactly one state, as in the API: ``waiting`` (with a reason such
as ``ContainerCreating`` or ``CrashLoopBackOff``), ``running`` (since ``started_at``) or
``terminated`` (exit code, reason, start and finish). ``last`` is the previous instance's
terminated state (``lastState.terminated``), and ``restart_count`` counts instances started
after the first.

Times are aware UTC datetimes from the runtime's clock; ``exited_mono`` is the monotonic time
of the last exit, for :class:`~setpoint.agent.backoff.Backoff`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from setpoint.agent import backoff as bo
from setpoint.apimachinery import timeutil

__all__ = ["ContainerRecord", "PodRecord", "container_id"]

State = Literal["waiting", "running", "terminated"]


def container_id(pod_uid: str, name: str, instance: int) -> str:
    """A stable, unique id for one instance of a container, as ``containerID`` shows it."""
    digest = hashlib.sha256(f"{pod_uid}/{name}/{instance}".encode()).hexdigest()
    return f"setpoint://{digest}"


def _time(value: datetime | None) -> str | None:
    return None if value is None else timeutil.format_time(value)


def _parse(value: Any) -> datetime | None:
    return timeutil.parse_time(value) if isinstance(value, str) else None


class ContainerRecord:
    __slots__ = ("backoff", "container_id", "exit_code", "exited_mono", "finished_at", "init",
                 "last", "message", "name", "ready", "reason", "restart_count", "signal",
                 "started", "started_at", "state")

    def __init__(self, name: str, *, init: bool = False, reason: str = "ContainerCreating"
                 ) -> None:
        self.name = name
        self.init = init
        self.state: State = "waiting"
        self.reason = reason
        self.message = ""
        self.started_at: datetime | None = None
        self.finished_at: datetime | None = None
        self.exit_code: int | None = None
        self.signal: int | None = None
        self.container_id = ""
        self.restart_count = 0
        self.last: dict[str, Any] | None = None
        self.ready = False
        self.started = False
        self.exited_mono = 0.0
        self.backoff = bo.Backoff()

    # -- transitions ---------------------------------------------------------------------

    def wait(self, reason: str, message: str = "") -> None:
        """Waiting; a terminated state becomes ``last`` (as when a restart is pending)."""
        if self.state == "terminated":
            self.last = self.terminated_dict()
        self.state, self.reason, self.message = "waiting", reason, message
        self.ready = self.started = False

    def run(self, at: datetime, cid: str) -> None:
        if self.state == "terminated":
            self.last = self.terminated_dict()
        self.state, self.reason, self.message = "running", "", ""
        self.started_at, self.finished_at, self.exit_code, self.signal = at, None, None, None
        self.container_id = cid
        self.ready = self.started = False

    def terminate(self, at: datetime, exit_code: int, reason: str, message: str = "",
                  mono: float = 0.0) -> None:
        self.state, self.exit_code, self.reason, self.message = ("terminated", exit_code,
                                                                  reason, message)
        self.finished_at = at
        if self.started_at is None:
            self.started_at = at
        self.exited_mono = mono
        self.ready = self.started = False

    # -- views ---------------------------------------------------------------------------

    def terminated_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"exitCode": self.exit_code if self.exit_code is not None else 0,
                               "reason": self.reason}
        if self.message:
            out["message"] = self.message
        if self.signal:
            out["signal"] = self.signal
        out["startedAt"] = _time(self.started_at)
        out["finishedAt"] = _time(self.finished_at)
        if self.container_id:
            out["containerID"] = self.container_id
        return out

    def state_dict(self) -> dict[str, Any]:
        if self.state == "running":
            return {"running": {"startedAt": _time(self.started_at)}}
        if self.state == "terminated":
            return {"terminated": self.terminated_dict()}
        waiting: dict[str, Any] = {"reason": self.reason}
        if self.message:
            waiting["message"] = self.message
        return {"waiting": waiting}

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "init": self.init, "state": self.state,
                "reason": self.reason, "message": self.message,
                "startedAt": _time(self.started_at), "finishedAt": _time(self.finished_at),
                "exitCode": self.exit_code, "signal": self.signal,
                "containerID": self.container_id, "restartCount": self.restart_count,
                "last": self.last, "ready": self.ready, "started": self.started,
                "exitedMono": self.exited_mono, "backoff": self.backoff.to_json()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ContainerRecord:
        rec = cls(str(data["name"]), init=bool(data.get("init")))
        state = data.get("state")
        rec.state = state if state in ("waiting", "running", "terminated") else "waiting"
        rec.reason = str(data.get("reason") or "")
        rec.message = str(data.get("message") or "")
        rec.started_at = _parse(data.get("startedAt"))
        rec.finished_at = _parse(data.get("finishedAt"))
        exit_code = data.get("exitCode")
        rec.exit_code = int(exit_code) if isinstance(exit_code, int) else None
        sig = data.get("signal")
        rec.signal = int(sig) if isinstance(sig, int) else None
        rec.container_id = str(data.get("containerID") or "")
        rec.restart_count = int(data.get("restartCount") or 0)
        last = data.get("last")
        rec.last = dict(last) if isinstance(last, Mapping) else None
        rec.ready = bool(data.get("ready"))
        rec.started = bool(data.get("started"))
        rec.exited_mono = float(data.get("exitedMono") or 0.0)
        backoff = data.get("backoff")
        rec.backoff = bo.Backoff.from_json(dict(backoff) if isinstance(backoff, Mapping) else None)
        return rec


class PodRecord:
    """A pod as a runtime runs it: its object, where it runs, and its containers."""

    __slots__ = ("containers", "host_ip", "message", "pod", "pod_ip", "reason",
                 "sandbox_ready", "start_time", "terminal", "transitions", "uid")

    def __init__(self, pod: Mapping[str, Any], *, start_time: datetime) -> None:
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        self.uid = str(meta.get("uid") or "")
        self.pod: Mapping[str, Any] = pod
        self.pod_ip = ""
        self.host_ip = ""
        self.start_time = start_time
        self.sandbox_ready = False
        #: The pod is being (or was) killed: its phase becomes terminal whatever its policy.
        self.terminal = False
        self.reason = ""
        self.message = ""
        #: Condition type → (status, lastTransitionTime), kept between status builds.
        self.transitions: dict[str, tuple[str, str]] = {}
        has_init = bool(spec.get("initContainers"))
        self.containers: dict[str, ContainerRecord] = {}
        for c in spec.get("initContainers") or []:
            self.containers[c["name"]] = ContainerRecord(c["name"], init=True,
                                                         reason="PodInitializing")
        for c in spec.get("containers") or []:
            self.containers[c["name"]] = ContainerRecord(
                c["name"], reason="PodInitializing" if has_init else "ContainerCreating")

    @property
    def namespace(self) -> str:
        return str((self.pod.get("metadata") or {}).get("namespace") or "")

    @property
    def name(self) -> str:
        return str((self.pod.get("metadata") or {}).get("name") or "")

    def full_name(self) -> str:
        """``name_namespace(uid)``, as the kubelet names a pod in messages."""
        return f"{self.name}_{self.namespace}({self.uid})"

    def to_json(self, *, with_pod: bool = True) -> dict[str, Any]:
        """The record as JSON; without the pod object (kept apart, it rarely changes) if
        ``with_pod`` is false."""
        out = {"pod": self.pod} if with_pod else {}
        return {**out, "podIP": self.pod_ip, "hostIP": self.host_ip,
                "startTime": _time(self.start_time), "sandboxReady": self.sandbox_ready,
                "terminal": self.terminal, "reason": self.reason, "message": self.message,
                "transitions": {k: list(v) for k, v in self.transitions.items()},
                "containers": [c.to_json() for c in self.containers.values()]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, pod: Mapping[str, Any] | None = None
                  ) -> PodRecord:
        start = _parse(data.get("startTime"))
        if start is None:
            raise ValueError("a pod record without a start time")
        rec = cls(pod if pod is not None else data["pod"], start_time=start)
        rec.pod_ip = str(data.get("podIP") or "")
        rec.host_ip = str(data.get("hostIP") or "")
        rec.sandbox_ready = bool(data.get("sandboxReady"))
        rec.terminal = bool(data.get("terminal"))
        rec.reason = str(data.get("reason") or "")
        rec.message = str(data.get("message") or "")
        rec.transitions = {str(k): (str(v[0]), str(v[1]))
                           for k, v in (data.get("transitions") or {}).items()}
        for c in data.get("containers") or []:
            loaded = ContainerRecord.from_json(c)
            if loaded.name in rec.containers:
                rec.containers[loaded.name] = loaded
        return rec
