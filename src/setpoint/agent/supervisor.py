"""A pod's life in the process runtime: what the kubelet's pod worker does, for one pod.

:func:`run_pod` (one task per pod):

1. the sandbox: the pod's address (and network namespace) — ``PodReadyToStartContainers``;
2. the volumes, materialised; a missing ConfigMap or Secret is a ``FailedMount`` event and the
   pod waits (``ContainerCreating``) for new inputs;
3. init containers one after the other, each to successful completion (a sidecar — an init
   container with ``restartPolicy: Always`` — is started and the next one waits only for it
   to have *started*);
4. the containers, each supervised by its own task until it is done for good.

Supervising a container (:func:`supervise`): start an instance, run its probes and its
``postStart`` hook, wait for it to end, record how (``lastState``, ``restartCount``), and
restart it if the policy says so (``Always``; ``OnFailure`` and init containers on a non-zero
exit; ``Never`` not at all) after the CrashLoopBackOff delay of
:class:`~setpoint.agent.backoff.Backoff` — every delay on the runtime's injected clock.
A container that cannot be configured (``CreateContainerConfigError``: a missing key;
``CreateContainerError``: no command for its image) waits for new inputs.

Probes (:func:`_probes`): the startup probe first (liveness and readiness wait for it), then
liveness and readiness concurrently, each on its own period. A container is ``started`` once
its startup probe succeeded (at once without one) and ``ready`` when its readiness probe
succeeds (at once without one). A failed liveness or startup probe stops the instance like a
deletion would (``preStop``, SIGTERM, grace, SIGKILL), then the restart policy applies.

Killing a pod (:func:`kill_pod`) cancels the worker, stops every running instance at once
with the grace period, kills what is left of the pod's processes, then releases its sandbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from setpoint.agent import backoff as bo
from setpoint.agent import dns, images, instances, probes, procs, volumes
from setpoint.agent import environment as envs
from setpoint.agent import network as net
from setpoint.agent import records as rc
from setpoint.runtime import clock as rtclock

if TYPE_CHECKING:
    from setpoint.agent.process import ProcessRuntime, _Pod

__all__ = ["kill_pod", "rewrite_paths", "run_pod", "supervise"]

logger = logging.getLogger(__name__)

Obj = Mapping[str, Any]

_DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_SANDBOX_RETRY = 10.0


def _is_sidecar(c: Obj) -> bool:
    return c.get("restartPolicy") == "Always"


async def _wait_until(rt: ProcessRuntime, fut: asyncio.Future[Any], deadline: float) -> bool:
    """Wait for ``fut`` until ``deadline`` on the runtime's clock; True when it is done."""
    if fut.done():
        return True
    sleeper = asyncio.ensure_future(rtclock.sleep_until(rt.clock, deadline))
    try:
        await asyncio.wait({fut, sleeper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        sleeper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sleeper
    return fut.done()


# -- the pod --------------------------------------------------------------------------------


async def run_pod(rt: ProcessRuntime, p: _Pod) -> None:
    """The pod's worker (see the module docstring)."""
    try:
        await _run(rt, p)
    except asyncio.CancelledError:
        raise
    except Exception as e:
        logger.exception("pod %s/%s failed", p.rec.namespace, p.rec.name)
        rt.emit(p, "Warning", "FailedSync", f"error syncing pod: {e}")


async def _sandbox(rt: ProcessRuntime, p: _Pod) -> None:
    while True:
        try:
            p.address = await rt.network.setup(p.uid)
            break
        except net.NetworkError as e:
            rt.emit(p, "Warning", "FailedCreatePodSandBox",
                    f"Failed to create pod sandbox: {e}")
            rt.changed(p)
            await rtclock.sleep(rt.clock, _SANDBOX_RETRY)
    p.rec.pod_ip = p.address.ip
    if rt.namespaces:
        await asyncio.to_thread(_pod_files, rt, p)
    p.rec.sandbox_ready = True
    rt.changed(p)


def _pod_files(rt: ProcessRuntime, p: _Pod) -> None:
    """``/etc/hosts``, ``/etc/resolv.conf`` and ``/etc/hostname`` of a pod with its own
    network (the containers get them mounted)."""
    etc = p.dir / "etc"
    etc.mkdir(exist_ok=True, mode=0o755)
    try:
        host_resolv = Path("/etc/resolv.conf").read_text()
    except OSError:
        host_resolv = ""
    files = {"hosts": dns.hosts_file(p.rec.pod, p.rec.pod_ip),
             "resolv.conf": dns.resolv_conf(p.rec.pod, cluster_dns=rt.config.cluster_dns,
                                            cluster_domain=rt.config.cluster_domain,
                                            fallback_nameserver=rt.gateway(),
                                            host_file=host_resolv),
             "hostname": (dns.hostname(p.rec.pod) + "\n").encode()}
    for name, data in files.items():
        (etc / name).write_bytes(data)
        os.chmod(etc / name, 0o644)


async def _volumes(rt: ProcessRuntime, p: _Pod) -> volumes.VolumeSet:
    while True:
        p.inputs_changed.clear()
        if p.inputs is not None:
            vs = await asyncio.to_thread(volumes.materialise, p.rec.pod, p.dir, p.inputs,
                                         rt.facts(p))
            p.volumes = vs
            if not vs.errors:
                return vs
            for _, message in sorted(vs.errors.items()):
                rt.emit(p, "Warning", "FailedMount", message)
            rt.changed(p)
        await p.inputs_changed.wait()


async def _deadline(rt: ProcessRuntime, p: _Pod, seconds: float) -> None:
    started = p.rec.start_time.timestamp()
    elapsed = rt.now().timestamp() - started
    await rtclock.sleep(rt.clock, max(0.0, seconds - elapsed))
    p.rec.reason = "DeadlineExceeded"
    p.rec.message = "Pod was active on the node longer than the specified deadline"
    rt.emit(p, "Warning", "DeadlineExceeded", p.rec.message)
    # Killing cancels this worker, so it runs on its own.
    rt.spawn(rt.kill_pod(p.uid), f"deadline-{p.uid}")


async def _run(rt: ProcessRuntime, p: _Pod) -> None:
    spec: Obj = p.rec.pod.get("spec") or {}
    if not p.rec.sandbox_ready:
        await _sandbox(rt, p)
    await _volumes(rt, p)
    async with asyncio.TaskGroup() as group:
        deadline = spec.get("activeDeadlineSeconds")
        deadline_task = None
        if isinstance(deadline, int) and deadline > 0:
            deadline_task = group.create_task(_deadline(rt, p, float(deadline)))
        sidecars: list[asyncio.Task[bool]] = []
        for c in spec.get("initContainers") or []:
            rec = p.rec.containers[c["name"]]
            if _is_sidecar(c):
                sidecars.append(group.create_task(supervise(rt, p, c)))
                while not rec.started and not sidecars[-1].done():
                    await p.wait_progress()
                continue
            if not await supervise(rt, p, c):
                break  # restartPolicy Never: the pod has failed
        else:
            regular = [group.create_task(supervise(rt, p, c))
                       for c in spec.get("containers") or []]
            if regular:
                await asyncio.wait(regular)
        # Every regular container is done for good: so are the sidecars.
        for name, inst in list(p.instances.items()):
            c = p.container_spec(name) or {}
            if _is_sidecar(c) and not inst.exited.done():
                await stop_instance(rt, p, c, inst, _grace(rt, p, None))
        for task in sidecars:
            task.cancel()
        if deadline_task is not None:
            deadline_task.cancel()
    p.rec.terminal = True
    await rt.teardown_sandbox(p)
    rt.changed(p)


def _grace(rt: ProcessRuntime, p: _Pod, override: float | None) -> float:
    if override is not None:
        return max(0.0, override)
    value = (p.rec.pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return rt.config.default_grace_period


# -- one container --------------------------------------------------------------------------


def _restarts(policy: str, exit_code: int | None) -> bool:
    if policy == "Always":
        return True
    if policy == "OnFailure":
        return exit_code != 0
    return False


async def supervise(rt: ProcessRuntime, p: _Pod, c: Obj) -> bool:
    """Run container ``c`` until it is done for good; True when it ended successfully."""
    name = c["name"]
    rec = p.rec.containers[name]
    pod_policy = (p.rec.pod.get("spec") or {}).get("restartPolicy") or "Always"
    if _is_sidecar(c):
        policy = "Always"
    elif rec.init:
        policy = "Never" if pod_policy == "Never" else "OnFailure"
    else:
        policy = pod_policy
    while True:
        inst = p.instances.get(name)
        if inst is None or inst.handled:
            restarting = rec.state == "terminated" or (rec.state == "waiting" and
                                                       rec.last is not None)
            if restarting:
                exit_code = rec.exit_code if rec.state == "terminated" else (
                    rec.last or {}).get("exitCode")
                if not _restarts(policy, exit_code):
                    return exit_code == 0
                await _backoff(rt, p, rec)
            number = rec.restart_count + (1 if restarting else 0)
            while (inst := await _start(rt, p, c, rec, number)) is None:
                pass
        probe_task = rt.spawn(_probes(rt, p, c, rec, inst, rt.clock.monotonic()),
                              f"probes-{p.uid}-{name}")
        try:
            result = await asyncio.shield(inst.exited)
        finally:
            probe_task.cancel()
        inst.handled = True
        if rec.state == "running":
            rec.terminate(rt.now(), result.exit_code, result.reason, result.message,
                          rt.clock.monotonic())
        rt.changed(p)
        if rec.init and result.exit_code == 0 and not _is_sidecar(c):
            rec.ready = True
            rt.changed(p)
        if not _restarts(policy, result.exit_code):
            return result.exit_code == 0


async def _backoff(rt: ProcessRuntime, p: _Pod, rec: rc.ContainerRecord) -> None:
    exited = rec.exited_mono
    if rec.backoff.in_backoff(exited_at=exited, now=rt.clock.monotonic()):
        delay = bo.format_duration(rec.backoff.delay)
        rec.wait("CrashLoopBackOff", f"back-off {delay} restarting failed container="
                                     f"{rec.name} pod={p.rec.full_name()}")
        rt.emit(p, "Warning", "BackOff", f"Back-off restarting failed container {rec.name} in "
                                         f"pod {p.rec.full_name()}", rec.name)
        rt.changed(p)
        await rtclock.sleep_until(rt.clock, rec.backoff.ready_at(exited_at=exited))
    rec.backoff.restarted(exited_at=exited, now=rt.clock.monotonic())


async def _cannot_start(rt: ProcessRuntime, p: _Pod, rec: rc.ContainerRecord, reason: str,
                        message: str) -> None:
    """Report why the container cannot start, then wait for new inputs."""
    p.inputs_changed.clear()
    if rec.state != "waiting" or rec.reason != reason or rec.message != message:
        rec.wait(reason, message)
        rt.emit(p, "Warning", "Failed", f"Error: {message}", rec.name)
        rt.changed(p)
    await p.inputs_changed.wait()


#: What may come right before and right after a path that is rewritten (a word boundary).
_BEFORE = frozenset(" \t\n=:'\"(,")
_AFTER = frozenset("/ \t\n'\";:,)")


def rewrite_paths(values: list[str], rewrites: list[list[str]]) -> list[str]:
    """Without a mount namespace: paths under a ``mountPath`` point at the volume instead.

    A path is rewritten where a target starts a word (the text's start, or after a space,
    ``=``, ``:``, a quote, ``(`` or ``,``) and is a whole path component (followed by the
    end, ``/``, a space, a quote or ``;:,)``); the longest target wins.
    """
    if not rewrites:
        return list(values)
    ordered = sorted(rewrites, key=lambda r: -len(r[0]))
    return [_rewrite(v, ordered) for v in values]


def _rewrite(text: str, ordered: list[list[str]]) -> str:
    out: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        if i == 0 or text[i - 1] in _BEFORE:
            for target, source in ordered:
                end = i + len(target)
                if text.startswith(target, i) and (end == n or text[end] in _AFTER):
                    out.append(source)
                    i = end
                    break
            else:
                out.append(text[i])
                i += 1
            continue
        out.append(text[i])
        i += 1
    return "".join(out)


def _launch_spec(rt: ProcessRuntime, p: _Pod, c: Obj, env: dict[str, str], argv: list[str],
                 mounts: list[volumes.Mount], inst: instances.Instance) -> dict[str, Any]:
    cwd = str(c.get("workingDir") or "/")
    spec: dict[str, Any] = {
        "mode": "run", "argv": argv, "env": env, "cwd": cwd,
        "cgroups": inst.cgroup.procs_files() if inst.cgroup is not None else [],
        "netns": p.address.netns if p.address is not None else None,
        "shell": rt.config.shell,
    }
    if rt.namespaces:
        own = {m.target for m in mounts}
        pod_files = [volumes.Mount(str(p.dir / "etc" / name), f"/etc/{name}", False)
                     for name in ("hosts", "resolv.conf", "hostname")
                     if f"/etc/{name}" not in own and (p.dir / "etc" / name).exists()]
        spec.update(mount_ns=True, root=str(inst.directory / "root"),
                    mounts=[m.to_json() for m in [*pod_files, *mounts]],
                    hostname=dns.hostname(p.rec.pod))
        (inst.directory / "root").mkdir(parents=True, exist_ok=True, mode=0o700)
        p.launch[c["name"]] = {"env": env, "cwd": cwd, "namespaces": True}
    else:
        rewrites = [[m.target, m.source] for m in mounts]
        spec["argv"] = rewrite_paths(argv, rewrites)
        spec["env"] = dict(zip(env, rewrite_paths(list(env.values()), rewrites), strict=True))
        spec["cwd"] = rewrite_paths([cwd], rewrites)[0]
        spec["rewrites"] = rewrites  # for an exec after an agent restart
        p.launch[c["name"]] = {"env": spec["env"], "cwd": spec["cwd"], "namespaces": False,
                               "rewrites": rewrites}
    return spec


def _environment(rt: ProcessRuntime, p: _Pod, c: Obj) -> dict[str, str]:
    assert p.inputs is not None
    pairs = envs.container_env(p.rec.pod, c, p.inputs.container(c["name"]),
                               p.inputs.service_env, rt.facts(p))
    env = dict(pairs)
    env.setdefault("PATH", _DEFAULT_PATH)
    env.setdefault("HOSTNAME", dns.hostname(p.rec.pod))
    env.setdefault("HOME", "/root" if os.geteuid() == 0 else os.environ.get("HOME", "/"))
    env.setdefault("POD_IP", p.rec.pod_ip)
    env[procs.MARKER_VAR] = rt.marker(p.uid, c["name"])
    return env


async def _start(rt: ProcessRuntime, p: _Pod, c: Obj, rec: rc.ContainerRecord, number: int
                 ) -> instances.Instance | None:
    """Start instance ``number`` of ``c``; None when it cannot start yet (after waiting).

    ``restartCount`` becomes ``number`` as the instance starts, not before.
    """
    name = c["name"]
    if p.inputs is None or p.volumes is None:
        await p.inputs_changed.wait()
        return None
    error = p.inputs.container(name).error
    if error:
        await _cannot_start(rt, p, rec, "CreateContainerConfigError", error)
        return None
    try:
        argv = rt.config.images.argv(c)
    except images.NoCommand as e:
        await _cannot_start(rt, p, rec, "CreateContainerError", str(e))
        return None
    try:
        env = _environment(rt, p, c)
        argv = [envs.expand(a, env.get) for a in argv]
        mounts = await asyncio.to_thread(volumes.mounts, c, p.volumes, env)
    except (ValueError, OSError) as e:
        await _cannot_start(rt, p, rec, "CreateContainerConfigError", str(e))
        return None
    inst = await rt.new_instance(p, name, number)
    spec = _launch_spec(rt, p, c, env, argv, mounts, inst)
    rt.emit(p, "Normal", "Pulled",
            f'Container image "{c.get("image", "")}" already present on machine', name)
    try:
        await inst.spawn(spec, python=rt.config.python, spawner=rt.spawner)
    except OSError as e:
        inst.log.close()
        rec.wait("RunContainerError", f"failed to start container: {e}")
        rt.emit(p, "Warning", "Failed", f"Error: {e}", name)
        rt.changed(p)
        await rtclock.sleep(rt.clock, rt.config.backoff_initial)
        return None
    inst.set_exit_callback(lambda i: rt.instance_exited(p, name, i))
    p.instances[name] = inst
    rt.persist(p)  # the pid is recorded before anything else can happen
    # Running once the launcher has executed the program: its namespaces exist then.
    started: set[asyncio.Future[Any]] = {inst.launched, inst.exited}
    await asyncio.wait(started, return_when=asyncio.FIRST_COMPLETED)
    rec.restart_count = number
    rec.run(rt.now(), rc.container_id(p.uid, name, number))
    rt.emit(p, "Normal", "Created", f"Created container: {name}", name)
    rt.emit(p, "Normal", "Started", f"Started container {name}", name)
    rt.changed(p)
    await asyncio.to_thread(_forget_old_instances, p.dir, name, number)
    hook = (c.get("lifecycle") or {}).get("postStart")
    if hook:
        outcome = await probes.run_action(
            hook, container=c, pod_ip=p.rec.pod_ip, timeout=_grace(rt, p, None),
            exec_fn=_exec_fn(rt, p, name), sleep=lambda s: rtclock.sleep(rt.clock, s))
        if not outcome.ok and not inst.exited.done():
            rt.emit(p, "Warning", "FailedPostStartHook", outcome.message or "PostStartHook failed",
                    name)
            await stop_instance(rt, p, c, inst, _grace(rt, p, None), pre_stop=False)
    return inst


def _forget_old_instances(pod_dir: Path, name: str, number: int) -> None:
    """Keep the current instance and the previous one (``--previous``), as the kubelet does."""
    for d in (pod_dir / "containers" / name).glob("*"):
        if d.name.isdigit() and int(d.name) < number - 1:
            shutil.rmtree(d, ignore_errors=True)
    for f in (pod_dir / "logs" / name).glob("*.log*"):
        head = f.name.split(".", 1)[0]
        if head.isdigit() and int(head) < number - 1:
            f.unlink(missing_ok=True)


def _exec_fn(rt: ProcessRuntime, p: _Pod, name: str) -> probes.ExecFn:
    async def run(argv: list[str], timeout: float) -> tuple[int, bytes]:
        return await rt.exec_capture(p, name, argv, timeout)

    return run


# -- probes ---------------------------------------------------------------------------------


async def _probes(rt: ProcessRuntime, p: _Pod, c: Obj, rec: rc.ContainerRecord,
                  inst: instances.Instance, started: float) -> None:
    try:
        await _run_probes(rt, p, c, rec, inst, started)
    except asyncio.CancelledError:
        raise
    except Exception:
        logger.exception("probes of %s/%s", p.uid, c.get("name"))


async def _probe_once(rt: ProcessRuntime, p: _Pod, c: Obj, spec: probes.ProbeSpec
                      ) -> probes.Outcome:
    return await probes.run_action(spec.action, container=c, pod_ip=p.rec.pod_ip,
                                   timeout=spec.timeout, exec_fn=_exec_fn(rt, p, c["name"]))


async def _run_probes(rt: ProcessRuntime, p: _Pod, c: Obj, rec: rc.ContainerRecord,
                      inst: instances.Instance, started: float) -> None:
    name = c["name"]
    startup = probes.ProbeSpec.parse(c.get("startupProbe"))
    liveness = probes.ProbeSpec.parse(c.get("livenessProbe"))
    readiness = probes.ProbeSpec.parse(c.get("readinessProbe"))
    if rec.init and not _is_sidecar(c):
        return
    if startup is not None:
        state = probes.ProbeState("startup", startup)
        await rtclock.sleep_until(rt.clock, started + startup.initial_delay)
        while True:
            outcome = await _probe_once(rt, p, c, startup)
            state.observe(outcome.ok)
            if not outcome.ok:
                rt.emit(p, "Warning", "Unhealthy", f"Startup probe failed: {outcome.message}",
                        name)
            if state.result is True:
                break
            if state.result is False:
                rt.emit(p, "Normal", "Killing",
                        f"Container {name} failed startup probe, will be restarted", name)
                await stop_instance(rt, p, c, inst, _probe_grace(rt, p, startup))
                return
            await rtclock.sleep(rt.clock, startup.period)
    if inst.exited.done():
        return
    rec.started = True
    if readiness is None:
        rec.ready = True
    rt.changed(p)
    async with asyncio.TaskGroup() as group:
        if liveness is not None:
            group.create_task(_liveness(rt, p, c, inst, liveness, started))
        if readiness is not None:
            group.create_task(_readiness(rt, p, c, rec, readiness, started))


def _probe_grace(rt: ProcessRuntime, p: _Pod, spec: probes.ProbeSpec) -> float:
    return spec.termination_grace if spec.termination_grace is not None else _grace(rt, p, None)


async def _liveness(rt: ProcessRuntime, p: _Pod, c: Obj, inst: instances.Instance,
                    spec: probes.ProbeSpec, started: float) -> None:
    name = c["name"]
    state = probes.ProbeState("liveness", spec)
    await rtclock.sleep_until(rt.clock, started + spec.initial_delay)
    while not inst.exited.done():
        outcome = await _probe_once(rt, p, c, spec)
        state.observe(outcome.ok)
        if not outcome.ok:
            rt.emit(p, "Warning", "Unhealthy", f"Liveness probe failed: {outcome.message}", name)
        if state.result is False:
            rt.emit(p, "Normal", "Killing",
                    f"Container {name} failed liveness probe, will be restarted", name)
            await stop_instance(rt, p, c, inst, _probe_grace(rt, p, spec))
            return
        await rtclock.sleep(rt.clock, spec.period)


async def _readiness(rt: ProcessRuntime, p: _Pod, c: Obj, rec: rc.ContainerRecord,
                     spec: probes.ProbeSpec, started: float) -> None:
    state = probes.ProbeState("readiness", spec)
    await rtclock.sleep_until(rt.clock, started + spec.initial_delay)
    while rec.state == "running":
        outcome = await _probe_once(rt, p, c, spec)
        if state.observe(outcome.ok) or rec.ready != bool(state.result):
            rec.ready = bool(state.result)
            rt.changed(p)
        if not outcome.ok:
            rt.emit(p, "Warning", "Unhealthy", f"Readiness probe failed: {outcome.message}",
                    c["name"])
        await rtclock.sleep(rt.clock, spec.period)


# -- stopping -------------------------------------------------------------------------------


async def stop_instance(rt: ProcessRuntime, p: _Pod, c: Obj, inst: instances.Instance,
                        grace: float, *, pre_stop: bool = True) -> None:
    """``preStop``, SIGTERM, up to ``grace`` seconds, then SIGKILL of every process."""
    if inst.exited.done():
        return
    deadline = rt.clock.monotonic() + grace
    hook = (c.get("lifecycle") or {}).get("preStop")
    if pre_stop and hook and not inst.pre_stopped:
        inst.pre_stopped = True
        outcome = await probes.run_action(
            hook, container=c, pod_ip=p.rec.pod_ip, timeout=max(grace, 1.0),
            exec_fn=_exec_fn(rt, p, c["name"]), sleep=lambda s: rtclock.sleep(rt.clock, s))
        if not outcome.ok:
            rt.emit(p, "Warning", "FailedPreStopHook",
                    f"PreStopHook failed: {outcome.message}", c["name"])
        # The kubelet leaves the container at least 2 seconds after its preStop hook.
        deadline = max(deadline, rt.clock.monotonic() + min(2.0, grace))
    inst.signal_main(signal.SIGTERM)
    if not await _wait_until(rt, inst.exited, deadline):
        await asyncio.to_thread(inst.kill_all)
        await asyncio.shield(inst.exited)


async def kill_pod(rt: ProcessRuntime, p: _Pod, grace_period: float | None) -> None:
    """Terminate every container of ``p`` and release its sandbox (see the docstring)."""
    p.killing = True
    worker, p.worker = p.worker, None
    if worker is not None and not worker.done():
        worker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await worker
    grace = _grace(rt, p, grace_period)
    running = [(name, inst) for name, inst in p.instances.items() if not inst.exited.done()]
    for name, _ in running:
        rt.emit(p, "Normal", "Killing", f"Stopping container {name}", name)
    await asyncio.gather(*(stop_instance(rt, p, p.container_spec(name) or {}, inst, grace)
                           for name, inst in running))
    await asyncio.to_thread(_kill_leftovers, rt, p)
    p.rec.terminal = True
    await rt.teardown_sandbox(p)
    rt.changed(p)


def _kill_leftovers(rt: ProcessRuntime, p: _Pod, attempts: int = 200) -> None:
    """SIGKILL every process of the pod until none is left (blocking)."""
    import time

    prefix = rt.marker(p.uid)
    for _ in range(attempts):
        pids = set(procs.marked(prefix))
        if rt.cgroups is not None:
            pids |= rt.cgroups.pod(p.uid).pids()
            for name in p.rec.containers:
                pids |= rt.cgroups.container(p.uid, name).pids()
        pids.discard(os.getpid())
        if not pids:
            return
        procs.kill_all(pids)
        time.sleep(0.005)  # let the kernel finish them before looking again
    logger.error("processes of pod %s survive SIGKILL", p.uid)
