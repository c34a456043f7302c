"""Probes, hooks, termination, networking and process hygiene, with real processes."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from setpoint.agent import procs
from setpoint.agent.process import ProcessRuntime
from setpoint.testing.waiting import eventually
from tests.integration.agent.conftest import (
    condition,
    container,
    logs_of,
    pod,
    running_ready,
    sh,
    start,
    wait_for,
    wait_logs,
    wait_path,
)

HTTP = [sys.executable, "-m", "http.server"]


async def http_get(host: str, port: int, path: str = "/") -> bytes:
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 30)
    try:
        writer.write(f"GET {path} HTTP/1.0\r\nHost: x\r\n\r\n".encode())
        await writer.drain()
        return await asyncio.wait_for(reader.readline(), 30)
    finally:
        writer.close()
        await writer.wait_closed()


def volume_dir(rt: ProcessRuntime, uid: str, name: str) -> Path:
    return rt.pods_dir / uid / "volumes" / name


@pytest.mark.slow
async def test_readiness_startup_and_liveness_probes(runtime: ProcessRuntime) -> None:
    mount = [{"name": "state", "mountPath": "/state"}]
    bind = [] if runtime.namespaces else ["--bind", "$(POD_IP)"]
    c = {"name": "c", "image": "python", "command": [*HTTP, "8080", *bind],
         "workingDir": "/state", "volumeMounts": mount,
         "ports": [{"name": "http", "containerPort": 8080}],
         "startupProbe": {"tcpSocket": {"port": "http"}, "periodSeconds": 1,
                          "failureThreshold": 30},
         "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 1},
         # alive until the test says otherwise: the probe runs as soon as the startup
         # probe succeeds, before the test could create a file it would look for
         "livenessProbe": {"exec": {"command": ["test", "!", "-f", "/state/dead"]},
                           "periodSeconds": 1, "failureThreshold": 1}}
    p = pod(c, volumes=({"name": "state", "emptyDir": {}},), grace=1)
    uid = p["metadata"]["uid"]
    state = volume_dir(runtime, uid, "state")
    await start(runtime, p)
    status = await wait_for(runtime, uid, lambda s: container(s)["started"])
    assert container(status)["ready"] is False  # /ready is a 404 so far
    (state / "ready").write_text("yes")
    status = await wait_for(runtime, uid, lambda s: container(s)["ready"])
    assert condition(status, "Ready")["status"] == "True"
    assert condition(status, "ContainersReady")["status"] == "True"
    # not ready again when the probe fails
    (state / "ready").unlink()
    status = await wait_for(runtime, uid, lambda s: not container(s)["ready"])
    assert condition(status, "Ready")["reason"] == "ContainersNotReady"
    # liveness: the container is killed and restarted
    assert container(status)["restartCount"] == 0
    (state / "dead").touch()
    status = await wait_for(runtime, uid, lambda s: container(s)["restartCount"] >= 1)
    assert container(status)["lastState"]["terminated"]["exitCode"] in (0, 143, 137)
    events = [(e.reason, e.message) for e in runtime.pending_events()]
    assert ("Killing", "Container c failed liveness probe, will be restarted") in events
    assert any(r == "Unhealthy" and m.startswith("Readiness probe failed: HTTP probe failed "
                                                 "with statuscode: 404") for r, m in events)
    assert any(r == "Unhealthy" and m.startswith("Liveness probe failed") for r, m in events)


async def test_lifecycle_hooks(runtime: ProcessRuntime) -> None:
    mount = [{"name": "out", "mountPath": "/out"}]
    c = sh("c", "exec sleep 1000", volumeMounts=mount, lifecycle={
        "postStart": {"exec": {"command": ["sh", "-c", "echo started > /out/post"]}},
        "preStop": {"exec": {"command": ["sh", "-c", "echo stopping > /out/pre"]}}})
    p = pod(c, volumes=({"name": "out", "emptyDir": {}},), grace=2)
    uid = await start(runtime, p)
    out = volume_dir(runtime, uid, "out")
    await wait_for(runtime, uid, lambda s: s["phase"] == "Running")
    await wait_path(out / "post")
    assert (out / "post").read_text() == "started\n"
    await runtime.kill_pod(uid)
    assert (out / "pre").read_text() == "stopping\n"
    status = runtime.pod_status(uid)
    assert status is not None
    assert container(status)["state"]["terminated"]["exitCode"] == 143  # sleep got SIGTERM
    assert status["phase"] == "Failed"


@pytest.mark.parametrize(("script", "code", "phase"), [
    ("trap 'echo bye; exit 0' TERM; echo up; while true; do sleep 0.1; done", 0, "Succeeded"),
    ("trap '' TERM; echo up; while true; do sleep 0.1; done", 137, "Failed"),
], ids=["graceful", "stubborn"])
async def test_graceful_termination(runtime: ProcessRuntime, script: str, code: int,
                                    phase: str) -> None:
    uid = await start(runtime, pod(sh("c", script), grace=1))  # "up" once the trap is set
    await wait_logs(runtime, uid, "up")
    await runtime.kill_pod(uid)
    status = runtime.pod_status(uid)
    assert status is not None
    terminated = container(status)["state"]["terminated"]
    assert terminated["exitCode"] == code
    assert status["phase"] == phase
    assert condition(status, "PodReadyToStartContainers")["status"] == "False"
    assert not procs.marked(runtime.marker(uid))
    if code == 0:
        assert (await logs_of(runtime, uid)).endswith("bye\n")


async def test_descendants_that_daemonize_are_killed(runtime: ProcessRuntime) -> None:
    # A daemon leaves the session and its parent (double fork), and its parent exits.
    script = ("setsid sh -c 'sleep 1001 & sleep 1002 & echo daemon' & "
              "(sleep 1003 &) ; echo spawned; exec sleep 1000")
    uid = await start(runtime, pod(sh("c", script)))
    await wait_logs(runtime, uid, "daemon")
    members = await asyncio.to_thread(procs.marked, runtime.marker(uid))
    table = await asyncio.to_thread(procs.table)
    sleeps = {pid for pid in members if pid in table}
    assert len(sleeps) >= 5  # supervisor, sleep 1000..1003
    starts = {pid: table[pid].start_ticks for pid in sleeps}
    await runtime.remove_pod(uid)
    assert not any(procs.alive(pid, ticks) for pid, ticks in starts.items())
    assert not procs.marked(runtime.marker(uid))
    assert not (runtime.pods_dir / uid).exists()


async def test_a_container_that_exits_takes_its_processes_with_it(
        runtime: ProcessRuntime) -> None:
    uid = await start(runtime, pod(sh("c", "sleep 1000 & echo left; exit 1"), policy="Never"))
    status = await wait_for(runtime, uid, lambda s: s["phase"] == "Failed")
    assert container(status)["state"]["terminated"]["exitCode"] == 1
    assert not procs.marked(runtime.marker(uid))


async def test_three_servers_on_one_port(runtime: ProcessRuntime) -> None:
    # With a network namespace per pod they bind 0.0.0.0:8080 each; without, each its own
    # loopback address.
    bind = [] if runtime.namespaces else ["--bind", "$(POD_IP)"]
    uids = []
    for i in range(3):
        c = {"name": "c", "image": "python", "command": [*HTTP, "8080", *bind],
             "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 1}}
        uids.append(await start(runtime, pod(c, name=f"web-{i}")))
    ips = set()
    for uid in uids:
        status = await wait_for(runtime, uid, lambda s: s["phase"] == "Running" and
                                container(s)["ready"])
        ips.add(status["podIP"])
        assert (await http_get(status["podIP"], 8080)).startswith(b"HTTP/1.0 200")
        assert container(status)["restartCount"] == 0
    assert len(ips) == 3


async def test_port_forward(runtime: ProcessRuntime) -> None:
    # In a namespace the server listens on the pod's localhost only, which port-forward
    # reaches (as Kubernetes does); without namespaces, on the pod's address.
    host = "127.0.0.1" if runtime.namespaces else "$(POD_IP)"
    probe = "import os, socket; socket.create_connection((os.environ['HOST'], 8080))"
    c = {"name": "c", "image": "python", "command": [*HTTP, "8080", "--bind", host],
         "env": [{"name": "HOST", "value": "127.0.0.1"} if runtime.namespaces else
                 {"name": "HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
         # (a probe's command is not $(VAR)-expanded: it reads the variable itself)
         "readinessProbe": {"exec": {"command": [sys.executable, "-c", probe]},
                            "periodSeconds": 1}}
    uid = await start(runtime, pod(c))
    await wait_for(runtime, uid, lambda s: container(s)["ready"])
    reader, writer = await runtime.port_forward(uid, 8080)
    try:
        writer.write(b"GET / HTTP/1.0\r\n\r\n")
        await writer.drain()
        assert (await reader.readline()).startswith(b"HTTP/1.0 200")
    finally:
        writer.close()
        await writer.wait_closed()
    with pytest.raises(ConnectionRefusedError):
        await runtime.port_forward(uid, 8081)


async def test_logs_of_the_previous_instance(runtime: ProcessRuntime) -> None:
    mount = [{"name": "n", "mountPath": "/n"}]
    script = ("n=$(cat /n/count 2>/dev/null || echo 0); echo instance $n; "
              "echo $((n+1)) > /n/count; [ $n -ge 1 ] && exec sleep 1000; exit 1")
    uid = await start(runtime, pod(sh("c", script, volumeMounts=mount),
                                   volumes=({"name": "n", "emptyDir": {}},)))
    await wait_for(runtime, uid, lambda s: container(s)["restartCount"] == 1 and
                   "running" in container(s)["state"])
    assert await wait_logs(runtime, uid, "instance 1") == "instance 1\n"
    assert await logs_of(runtime, uid, previous=True) == "instance 0\n"


async def test_cgroup_limits(runtime: ProcessRuntime) -> None:
    if runtime.cgroups is None:
        pytest.skip("cgroups need root and a writable cgroup hierarchy")
    # the CPU limit is a quota of 50 ms per 100 ms
    quiet = await start(runtime, pod(sh("c", "exec sleep 1000", resources={
        "limits": {"cpu": "500m"}}), name="quiet"))
    await wait_for(runtime, quiet, lambda s: s["phase"] == "Running")
    cg = runtime.cgroups.container(quiet, "c")
    if cg.v2 is not None and cg.v2_cpu:
        assert (cg.v2 / "cpu.max").read_text().split() == ["50000", "100000"]
    elif cg.cpu is not None:
        assert int((cg.cpu / "cpu.cfs_quota_us").read_text()) == 50000
    assert set(procs.marked(runtime.marker(quiet))) <= cg.pids()  # every process is a member
    if "memory" in runtime.cgroups.warning:
        pytest.skip(runtime.cgroups.warning)
    hog = ("b = []\nprint('allocating', flush=True)\n"
           "while True: b.append(bytearray(1 << 20))")
    c = {"name": "c", "image": "python", "command": [sys.executable, "-c", hog],
         "resources": {"limits": {"memory": "48Mi"}}}
    uid = await start(runtime, pod(c, policy="Never"))
    status = await wait_for(runtime, uid, lambda s: s["phase"] == "Failed")
    terminated = container(status)["state"]["terminated"]
    assert terminated["reason"] == "OOMKilled"
    assert terminated["exitCode"] == 137


async def test_adopting_after_the_agent_is_killed(tmp_path: Path, isolation: str) -> None:
    """A real agent process, killed with -9: its pods keep running, and what they write
    meanwhile waits in their pipes; the next agent adopts them without starting anything
    twice, logs what they wrote while no agent was there, notices the one that died
    meanwhile, and cleans up what it did not know about."""
    import json

    from tests.integration.agent.conftest import make_config, running

    config = make_config(tmp_path / "agent", isolation)
    go, written = tmp_path / "go", tmp_path / "written"
    os.mkfifo(go, 0o600)
    # Shell built-ins only after the start, so the container's processes stay the same.
    keep = pod(sh("c", f"echo up; read x < {go}; echo while-away; : > {written}; "
                       "exec sleep 1000"), name="keep")
    dies = pod(sh("c", "echo up; exec sleep 1000"), name="dies", policy="Always")
    keep_uid, dies_uid = keep["metadata"]["uid"], dies["metadata"]["uid"]
    spec = {"root": str(config.root_dir), "isolation": isolation, "bridge": config.bridge,
            "cidr": config.pod_cidr, "cgroups": config.cgroups, "pods": [keep, dies]}
    script = Path(__file__).with_name("agent_main.py")
    agent = await asyncio.create_subprocess_exec(
        sys.executable, str(script), json.dumps(spec), stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    adopted = False  # whether the second runtime took the pods over (it removes them at its end)
    try:
        try:
            assert agent.stdout is not None
            line = await asyncio.wait_for(agent.stdout.readline(), 60)
            assert line.strip() == b"running", line
            agent_id = json.loads((config.root_dir / "agent.json").read_text())["id"]
            # The first agent has logged "up": a line read from the pipe but not yet written
            # when the agent is killed would be lost with it.
            log = config.root_dir / "pods" / keep_uid / "logs" / "c" / "0.log"
            await eventually(lambda: log.exists() and b" up\n" in log.read_bytes(), timeout=60)
            before = {uid: procs.marked(f"{agent_id}/{uid}/") for uid in (keep_uid, dies_uid)}
            assert all(before.values())
        finally:
            agent.send_signal(signal.SIGKILL)
            await agent.communicate()
        # The pods outlived their agent; one writes a line while no agent reads its pipe ...
        assert set(procs.marked(f"{agent_id}/{keep_uid}/")) == set(before[keep_uid])
        await eventually(lambda: _write_fifo(go, b"go\n"), timeout=30)
        await eventually(written.exists, timeout=30)
        # ... another dies while no agent watches ...
        for pid in before[dies_uid]:
            os.kill(pid, signal.SIGKILL)
        # ... and a process this agent never recorded carries its marker.
        stray = await asyncio.create_subprocess_exec(
            "sleep", "1000", env={**os.environ, procs.MARKER_VAR: f"{agent_id}/ghost/c"})
        try:
            async with running(config) as rt:
                adopted = True
                assert rt.agent_id == agent_id
                assert sorted(rt.pods()) == sorted([keep_uid, dies_uid])
                status = await wait_for(rt, keep_uid, lambda s: s["phase"] == "Running")
                # adopted, not started again: the same processes, and only them
                assert set(procs.marked(rt.marker(keep_uid))) == set(before[keep_uid])
                assert container(status)["restartCount"] == 0
                assert await wait_logs(rt, keep_uid, "while-away") == "up\nwhile-away\n"
                # the one that died is restarted, and says how it ended
                status = await wait_for(rt, dies_uid, lambda s: container(s)["restartCount"] == 1
                                        and "running" in container(s)["state"])
                assert container(status)["lastState"]["terminated"]["exitCode"] == 137
                assert await asyncio.wait_for(stray.wait(), 30) == -signal.SIGKILL
                # exec and logs work on an adopted container
                session = await rt.exec(keep_uid, "c", ["echo", "adopted"])
                try:
                    assert await session.stdout.read() == b"adopted\n"
                finally:
                    await session.close()
        finally:
            if stray.returncode is None:
                stray.kill()
                await stray.wait()
    finally:
        if not adopted:  # failed before that: adopt what the killed agent left, and remove it
            async with running(config):
                pass


def _write_fifo(path: Path, data: bytes) -> bool:
    """Write ``data`` to the FIFO at ``path`` if a reader has it open (False if none yet)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:  # ENXIO: nobody reads it yet
        return False
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    return True


async def test_removing_pods_as_they_finish(runtime: ProcessRuntime) -> None:
    # The worker releases a finished pod's sandbox while the removal wants to: once, whole.
    changes = runtime.changes()
    for i in range(5):
        uid = await start(runtime, pod(sh("c", "exit 0"), name=f"job-{i}", policy="Never"))
        while True:  # react to the phase at once, while the worker is still tearing down
            changed = await asyncio.wait_for(anext(changes), 60)
            status = runtime.pod_status(changed)
            if changed == uid and status is not None and status["phase"] == "Succeeded":
                break
        await runtime.remove_pod(uid)
        netns = f"/run/netns/setpoint-{runtime.agent_id}-{uid}"
        assert not await asyncio.to_thread(os.path.exists, netns)
        assert not procs.marked(runtime.marker(uid))


async def test_adopting_after_the_agent_left_gracefully(tmp_path: Path, isolation: str) -> None:
    """Leaving ``async with`` leaves the pods running; the next runtime on the directory
    adopts them: the same processes, nothing started twice."""
    from setpoint.agent.process import ProcessRuntime as Runtime
    from tests.integration.agent.conftest import make_config, running

    config = make_config(tmp_path / "agent", isolation)
    keep = pod(sh("c", "echo up; exec sleep 1000"), name="keep")
    uid = keep["metadata"]["uid"]
    async with Runtime(config) as rt:
        await start(rt, keep)
        await wait_for(rt, uid, running_ready)
        before = set(procs.marked(rt.marker(uid)))
        assert before
    assert set(procs.marked(f"{rt.agent_id}/{uid}/")) == before
    async with running(config) as again:
        await start(again, keep)  # the driver syncs the pods it wants, as after any restart
        status = await wait_for(again, uid, lambda s: s["phase"] == "Running")
        assert container(status)["restartCount"] == 0
        # exec needs an instance the runtime watches: the adopted one, not a second start
        session = await again.exec(uid, "c", ["echo", "adopted"])
        try:
            assert await session.stdout.read() == b"adopted\n"
            assert await session.wait() == 0
        finally:
            await session.close()
        assert set(procs.marked(again.marker(uid))) == before
