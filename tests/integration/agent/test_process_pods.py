"""Pods as real processes: env, volumes, logs, exec, images, restarts, init containers."""

from __future__ import annotations

import asyncio
import base64
import os
from pathlib import Path

import pytest

from setpoint.agent import procs
from setpoint.agent import runtime as rtmod
from setpoint.agent.process import ProcessRuntime, RootDirInUse
from setpoint.agent.resolve import resolve_inputs
from setpoint.runtime.clock import FakeAsyncClock
from tests.integration.agent.conftest import (
    condition,
    container,
    logs_of,
    make_config,
    pod,
    running,
    running_ready,
    sh,
    start,
    wait_for,
    wait_logs,
)

CONFIG = {"cm": {"data": {"key": "v1", "greeting": "hello"}}}
SECRETS = {"creds": {"data": {"pw": base64.b64encode(b"s3cret").decode()}}}


def web_pod() -> dict:  # type: ignore[type-arg]
    c = sh("c", 'echo "$GREETING $(NAME) from $(MY_POD) at $MY_IP"; cat /etc/secret/pw; echo; '
                "cat /etc/config/key; echo; pwd; echo cpu=$CPU; exec sleep 1000",
           env=[{"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "cm",
                                                                       "key": "greeting"}}},
                {"name": "NAME", "value": "world"},
                {"name": "MY_POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "MY_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu",
                                                                    "divisor": "1m"}}}],
           volumeMounts=[{"name": "config", "mountPath": "/etc/config"},
                         {"name": "secret", "mountPath": "/etc/secret", "readOnly": True},
                         {"name": "work", "mountPath": "/srv/work"}],
           workingDir="/srv/work", resources={"limits": {"cpu": "250m", "memory": "256Mi"}})
    return pod(c, volumes=({"name": "config", "configMap": {"name": "cm"}},
                           {"name": "secret", "secret": {"secretName": "creds"}},
                           {"name": "work", "emptyDir": {}}))


async def test_env_volumes_and_logs(runtime: ProcessRuntime) -> None:
    p = web_pod()
    uid = await start(runtime, p, config_maps=CONFIG, secrets=SECRETS)
    status = await wait_for(runtime, uid, lambda s: s["phase"] == "Running")
    ip = status["podIP"]
    text = await wait_logs(runtime, uid, "cpu=")
    workdir = "/srv/work" if runtime.namespaces else str(runtime.pods_dir / uid /
                                                           "volumes" / "work")
    assert text == f"hello world from web at {ip}\ns3cret\nv1\n{workdir}\ncpu=250\n"
    assert condition(status, "PodReadyToStartContainers")["status"] == "True"
    assert status["qosClass"] == "Guaranteed"
    c = container(await wait_for(runtime, uid, lambda s: container(s)["ready"]))
    assert c["started"] is True
    assert c["containerID"].startswith("setpoint://")
    events = [(e.reason, e.message) for e in runtime.pending_events()]
    assert ("Created", "Created container: c") in events
    assert ("Started", "Started container c") in events
    assert ('Pulled', 'Container image "busybox" already present on machine') in events
    # secrets are the owner's only, and so is the pod's directory
    pod_dir = runtime.pods_dir / uid
    assert os.stat(pod_dir).st_mode & 0o777 == 0o700
    secret_file = (pod_dir / "volumes" / "secret" / "pw").resolve()
    assert os.stat(secret_file).st_mode & 0o777 == 0o600


async def test_exec_in_the_container(runtime: ProcessRuntime) -> None:
    uid = await start(runtime, web_pod(), config_maps=CONFIG, secrets=SECRETS)
    await wait_for(runtime, uid, lambda s: s["phase"] == "Running")
    await wait_logs(runtime, uid, "cpu=")

    async def run(*argv: str, stdin: bytes | None = None) -> tuple[int, bytes, bytes]:
        session = await runtime.exec(uid, "c", list(argv), stdin=stdin is not None)
        try:
            if stdin is not None:
                assert session.stdin is not None
                session.stdin.write(stdin)
                await session.stdin.drain()
                session.stdin.close()
            assert session.stderr is not None
            out, err = await asyncio.gather(session.stdout.read(), session.stderr.read())
            return await session.wait(), out, err
        finally:
            await session.close()

    assert await run("cat", "/etc/config/key") == (0, b"v1", b"")
    code, out, _ = await run("sh", "-c", "echo $NAME; pwd")
    assert code == 0
    assert out.decode().split("\n")[0] == "world"
    assert await run("sh", "-c", "exit 7") == (7, b"", b"")
    assert (await run("cat", stdin=b"piped"))[1] == b"piped"
    code, _, err = await run("no-such-program")
    assert code == 126
    assert b'exec: "no-such-program": executable file not found in $PATH' in err
    if runtime.namespaces:
        assert (await run("hostname"))[1] == b"web\n"
        code, _, err = await run("sh", "-c", "echo x > /etc/secret/new")
        assert code != 0
        assert b"Read-only file system" in err
    with pytest.raises(rtmod.ContainerNotFound):
        await runtime.exec(uid, "nope", ["true"])


async def test_exec_with_a_terminal(runtime: ProcessRuntime) -> None:
    uid = await start(runtime, pod(sh("c", "exec sleep 1000")))
    await wait_for(runtime, uid, lambda s: s["phase"] == "Running")
    # The command waits for a line on its terminal, so the resize surely comes first.
    session = await runtime.exec(uid, "c", ["sh", "-c", "test -t 0 && echo tty; read x; "
                                            "stty size"], tty=True, stdin=True)
    try:
        session.resize(100, 40)
        assert session.stderr is None
        assert session.stdin is not None
        session.stdin.write(b"go\n")
        await session.stdin.drain()
        out = await session.stdout.read()
        assert await session.wait() == 0
    finally:
        await session.close()
    # the terminal echoes what was typed (maybe before the shell says anything)
    lines = out.replace(b"\r", b"").split(b"\n")
    assert sorted(lines[:2]) == [b"go", b"tty"]
    assert lines[2:] == [b"40 100", b""]


def test_exec_with_a_terminal_under_uvloop(tmp_path: Path) -> None:
    """The agent runs on uvloop: what is typed goes in, and the command's output, which
    shares the terminal's descriptor with the input, all comes out."""
    uvloop = pytest.importorskip("uvloop")

    async def scenario() -> tuple[bytes, bytes, int]:
        async with running(make_config(tmp_path / "agent", "none")) as runtime:
            uid = await start(runtime, pod(sh("c", "exec sleep 1000")))
            await wait_for(runtime, uid, lambda s: s["phase"] == "Running")
            quick = await runtime.exec(uid, "c", ["sh", "-c", "tty; echo hi"], tty=True,
                                       stdin=True)
            try:
                printed = await quick.stdout.read()
                assert await quick.wait() == 0
            finally:
                await quick.close()
            typed = await runtime.exec(uid, "c", ["sh", "-c", "read x; echo got:$x"],
                                       tty=True, stdin=True)
            try:
                assert typed.stdin is not None
                typed.stdin.write(b"typed\n")
                await typed.stdin.drain()
                echoed = await typed.stdout.read()
                code = await typed.wait()
            finally:
                await typed.close()
            return printed, echoed, code

    printed, echoed, code = uvloop.run(scenario())
    assert printed.replace(b"\r", b"").split(b"\n")[1:] == [b"hi", b""]
    assert printed.startswith(b"/dev/pts/")
    assert b"got:typed" in echoed
    assert code == 0


async def test_an_image_without_a_command_cannot_run(runtime: ProcessRuntime) -> None:
    uid = await start(runtime, pod({"name": "c", "image": "nginx:1.27"}))
    status = await wait_for(runtime, uid, lambda s: "waiting" in container(s)["state"] and
                            container(s)["state"]["waiting"]["reason"] != "ContainerCreating")
    waiting = container(status)["state"]["waiting"]
    assert waiting["reason"] == "CreateContainerError"
    assert waiting["message"].startswith("no command specified: setpoint runs containers as "
                                         "processes on this machine")
    assert status["phase"] == "Pending"
    events = runtime.pending_events()
    assert any(e.reason == "Failed" and e.type == "Warning" and
               e.message.startswith("Error: no command specified") and
               e.field_path == "spec.containers{c}" for e in events)


async def test_a_missing_key_is_a_config_error_until_inputs_arrive(
        runtime: ProcessRuntime) -> None:
    p = pod(sh("c", "echo $V; exec sleep 1000",
               env=[{"name": "V", "valueFrom": {"configMapKeyRef": {"name": "cm",
                                                                    "key": "later"}}}]))
    uid = await start(runtime, p, config_maps=CONFIG)
    status = await wait_for(runtime, uid, lambda s: container(s)["state"].get(
        "waiting", {}).get("reason") == "CreateContainerConfigError")
    assert container(status)["state"]["waiting"]["message"] == (
        "couldn't find key later in ConfigMap default/cm")
    await runtime.sync_pod(p, resolve_inputs(
        p, config_maps={"cm": {"data": {"later": "arrived"}}}))
    assert await wait_logs(runtime, uid, "arrived") == "arrived\n"


async def test_a_missing_program_is_a_start_error(tmp_path: Path) -> None:
    clock = FakeAsyncClock()
    async with running(make_config(tmp_path / "a", "none"), clock=clock) as rt:
        uid = await start(rt, pod({"name": "c", "image": "busybox",
                                   "command": ["no-such-program"]}))
        status = await wait_for(rt, uid, lambda s: container(s)["restartCount"] == 1 and
                                "waiting" in container(s)["state"])
        c = container(status)
        assert c["state"]["waiting"]["reason"] == "CrashLoopBackOff"
        last = c["lastState"]["terminated"]
        assert last["exitCode"] == 128
        assert last["reason"] == "StartError"
        assert 'exec: "no-such-program": executable file not found in $PATH' in last["message"]


async def test_the_pause_image_runs_until_its_pod_is_removed(tmp_path: Path) -> None:
    # the infrastructure image the clients' e2e tests run as "a pod that stays Ready"
    async with running(make_config(tmp_path / "a", "none")) as rt:
        uid = await start(rt, pod({"name": "c", "image": "gcr.io/google_containers/pause"}))
        status = await wait_for(rt, uid, running_ready)
        assert container(status)["restartCount"] == 0
        assert "running" in container(status)["state"]
        assert procs.marked(rt.marker(uid))
        await rt.remove_pod(uid)
        assert not procs.marked(rt.marker(uid))


async def test_restarts_and_crash_loop_back_off(tmp_path: Path) -> None:
    clock = FakeAsyncClock()
    async with running(make_config(tmp_path / "a", "none"), clock=clock) as rt:
        uid = await start(rt, pod(sh("c", "echo ran; exit 3")))

        def backing_off(restarts: int) -> dict:  # type: ignore[type-arg]
            def check(s: dict) -> bool:  # type: ignore[type-arg]
                c = container(s)
                return (c["restartCount"] == restarts and
                        c["state"].get("waiting", {}).get("reason") == "CrashLoopBackOff")
            return check

        # The first exit restarts at once; the second waits 10 s of the runtime's clock.
        status = await wait_for(rt, uid, backing_off(1))
        c = container(status)
        assert c["state"]["waiting"]["message"] == (
            f"back-off 10s restarting failed container=c pod=web_default({uid})")
        assert c["lastState"]["terminated"]["exitCode"] == 3
        assert c["lastState"]["terminated"]["reason"] == "Error"
        assert status["phase"] == "Running"
        assert clock.next_deadline() == pytest.approx(10.0)
        await clock.tick(10)
        status = await wait_for(rt, uid, backing_off(2))
        assert container(status)["state"]["waiting"]["message"].startswith("back-off 20s ")
        assert clock.next_deadline() == pytest.approx(30.0)
        events = rt.pending_events()
        assert any(e.reason == "BackOff" and e.message ==
                   f"Back-off restarting failed container c in pod web_default({uid})"
                   for e in events)
        assert await logs_of(rt, uid) == "ran\n"
        assert await logs_of(rt, uid, previous=True) == "ran\n"


@pytest.mark.parametrize(("policy", "script", "phase", "reason", "code"), [
    ("OnFailure", "exit 0", "Succeeded", "Completed", 0),
    ("Never", "exit 1", "Failed", "Error", 1),
    ("Never", "kill -9 $$$$", "Failed", "Error", 137),  # $$ is $(VAR) expansion's escape
], ids=["onfailure-succeeds", "never-fails", "killed"])
async def test_restart_policies(runtime: ProcessRuntime, policy: str, script: str, phase: str,
                                reason: str, code: int) -> None:
    uid = await start(runtime, pod(sh("c", script), policy=policy))
    # a finished pod gives its address back (once its phase is terminal)
    status = await wait_for(runtime, uid, lambda s: s["phase"] == phase and condition(
        s, "PodReadyToStartContainers")["status"] == "False")
    terminated = container(status)["state"]["terminated"]
    assert (terminated["reason"], terminated["exitCode"]) == (reason, code)
    assert container(status)["restartCount"] == 0
    assert condition(status, "Ready")["reason"] == ("PodCompleted" if phase == "Succeeded"
                                                    else "PodFailed")


async def test_init_containers_run_in_order(runtime: ProcessRuntime) -> None:
    mount = [{"name": "shared", "mountPath": "/shared"}]
    p = pod(sh("c", "cat /shared/log; exec sleep 1000", volumeMounts=mount),
            inits=(sh("first", "echo one >> /shared/log", volumeMounts=mount),
                   sh("second", "echo two >> /shared/log", volumeMounts=mount)),
            volumes=({"name": "shared", "emptyDir": {}},))
    uid = await start(runtime, p)
    assert await wait_logs(runtime, uid, "two") == "one\ntwo\n"
    status = await wait_for(runtime, uid, lambda s: s["phase"] == "Running")
    assert condition(status, "Initialized")["status"] == "True"
    assert [(c["name"], c["state"]["terminated"]["reason"], c["ready"])
            for c in status["initContainerStatuses"]] == [("first", "Completed", True),
                                                          ("second", "Completed", True)]


async def test_a_failed_init_container_fails_a_never_pod(runtime: ProcessRuntime) -> None:
    p = pod(sh("c", "exec sleep 1000"), policy="Never", inits=(sh("init", "exit 2"),))
    uid = await start(runtime, p)
    status = await wait_for(runtime, uid, lambda s: s["phase"] == "Failed")
    assert container(status, "init")["state"]["terminated"]["exitCode"] == 2
    assert container(status)["state"] == {"waiting": {"reason": "PodInitializing"}}
    assert condition(status, "Initialized")["reason"] == "ContainersNotInitialized"


async def test_volume_updates_reach_the_container(runtime: ProcessRuntime) -> None:
    p = pod(sh("c", "exec sleep 1000", volumeMounts=[{"name": "cfg", "mountPath": "/cfg"}]),
            volumes=({"name": "cfg", "configMap": {"name": "cm"}},))
    uid = await start(runtime, p, config_maps=CONFIG)
    await wait_for(runtime, uid, lambda s: s["phase"] == "Running")

    async def cat() -> bytes:
        session = await runtime.exec(uid, "c", ["cat", "/cfg/key"])
        try:
            return await session.stdout.read()
        finally:
            await session.close()

    await wait_for(runtime, uid, lambda s: container(s)["ready"])
    assert await cat() == b"v1"
    await runtime.sync_pod(p, resolve_inputs(p, config_maps={"cm": {"data": {"key": "v2"}}}))
    assert await cat() == b"v2"


async def test_the_root_directory_is_one_agents(tmp_path: Path) -> None:
    config = make_config(tmp_path / "a", "none")
    async with running(config):
        with pytest.raises(RootDirInUse):
            async with ProcessRuntime(config):
                pass


async def test_metrics(runtime: ProcessRuntime) -> None:
    uid = await start(runtime, pod(sh("c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; "
                                          "echo spun; exec sleep 1000")))
    await wait_logs(runtime, uid, "spun")
    metrics = await runtime.metrics(uid)
    assert [m.name for m in metrics.containers] == ["c"]
    assert metrics.containers[0].cpu_seconds > 0
    assert metrics.containers[0].memory_bytes > 0


async def test_pod_ips_differ_and_are_given_back(runtime: ProcessRuntime) -> None:
    a = await start(runtime, pod(sh("c", "exec sleep 1000"), name="a"))
    b = await start(runtime, pod(sh("c", "exec sleep 1000"), name="b"))
    sa = await wait_for(runtime, a, lambda s: s["phase"] == "Running")
    sb = await wait_for(runtime, b, lambda s: s["phase"] == "Running")
    assert sa["podIP"] != sb["podIP"]
    await runtime.remove_pod(a)
    assert runtime.pod_status(a) is None
    c = await start(runtime, pod(sh("c", "exec sleep 1000"), name="c"))
    sc = await wait_for(runtime, c, lambda s: s["phase"] == "Running")
    assert sc["podIP"] == sa["podIP"]  # the lowest free address again
    assert not procs.marked(runtime.marker(a))


async def test_bounded_pods(tmp_path: Path) -> None:
    async with running(make_config(tmp_path / "a", "none", max_pods=1)) as rt:
        await start(rt, pod(sh("c", "exec sleep 1000")))
        with pytest.raises(rtmod.AgentError, match="1 pods already"):
            await start(rt, pod(sh("c", "exec sleep 1000")))


async def test_logs_tail_and_follow(runtime: ProcessRuntime) -> None:
    uid = await start(runtime, pod(sh("c", "for i in 1 2 3 4 5; do echo line $i; done; "
                                          "sleep 0.3; echo after; exit 0"), policy="Never"))
    from setpoint.agent.runtime import LogOptions

    with pytest.raises(rtmod.ContainerNotRunning, match="is waiting to start"):
        await logs_of(runtime, uid)  # as kubectl logs says before the container starts
    await wait_for(runtime, uid, lambda s: "waiting" not in container(s)["state"])
    got = b""
    async for chunk in runtime.logs(uid, "c", LogOptions(follow=True)):
        got += chunk
    # following ends when the container does
    assert got == b"line 1\nline 2\nline 3\nline 4\nline 5\nafter\n"
    assert await logs_of(runtime, uid, tail_lines=2) == "line 5\nafter\n"
    stamped = await logs_of(runtime, uid, timestamps=True, tail_lines=1)
    assert stamped.endswith("Z after\n")
    assert await logs_of(runtime, uid, limit_bytes=6) == "line 1"
    with pytest.raises(rtmod.ContainerNotFound):
        await logs_of(runtime, uid, previous=True)


async def test_downward_projected_and_host_path_volumes(runtime: ProcessRuntime,
                                                        tmp_path: Path) -> None:
    host = tmp_path / "host-data"
    c = sh("c", "echo from-pod > /host/out; cat /info/labels /info/name; echo; cat /sa/token; "
                "echo; cat /sa/ns; echo; exec sleep 1000",
           volumeMounts=[{"name": "info", "mountPath": "/info"},
                         {"name": "sa", "mountPath": "/sa", "readOnly": True},
                         {"name": "host", "mountPath": "/host"}])
    p = pod(c, volumes=(
        {"name": "info", "downwardAPI": {"items": [
            {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
            {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}},
        {"name": "sa", "projected": {"sources": [
            {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}},
            {"downwardAPI": {"items": [{"path": "ns", "fieldRef": {
                "fieldPath": "metadata.namespace"}}]}}]}},
        {"name": "host", "hostPath": {"path": str(host), "type": "DirectoryOrCreate"}}))
    uid = await start(runtime, p, tokens={("sa", "token"): "eyJ.token"})
    text = await wait_logs(runtime, uid, "default")
    assert text == 'app="web"\nweb\neyJ.token\ndefault\n'
    assert (host / "out").read_text() == "from-pod\n"  # written before the logs above


async def test_leaving_the_runtime_leaves_the_pods_running(tmp_path: Path,
                                                           isolation: str) -> None:
    config = make_config(tmp_path / "a", isolation)
    c = sh("c", "exec sleep 1000", readinessProbe={"exec": {"command": ["true"]},
                                                    "periodSeconds": 1})
    async with ProcessRuntime(config) as rt:
        uid = await start(rt, pod(c))
        await wait_for(rt, uid, lambda s: container(s)["ready"])
        members = procs.marked(rt.marker(uid))
    # the agent stopped (probes and all); its pod did not
    assert members
    assert procs.marked(rt.marker(uid)) == members
    async with running(config) as again:
        status = await wait_for(again, uid, lambda s: container(s)["ready"])
        assert container(status)["restartCount"] == 0
        assert procs.marked(again.marker(uid)) == members


async def test_starting_without_the_spawner(tmp_path: Path) -> None:
    # Configured off, or gone: the launcher is started directly, exit codes reaped by the agent.
    async with running(make_config(tmp_path / "a", "none", spawner=False)) as rt:
        uid = await start(rt, pod(sh("c", "exit 5"), policy="Never"))
        status = await wait_for(rt, uid, lambda s: s["phase"] == "Failed")
        assert container(status)["state"]["terminated"]["exitCode"] == 5
    async with running(make_config(tmp_path / "b", "none")) as rt:
        first = await start(rt, pod(sh("c", "exit 6"), policy="Never"))
        status = await wait_for(rt, first, lambda s: s["phase"] == "Failed")
        assert container(status)["state"]["terminated"]["exitCode"] == 6
        assert rt.spawner is not None
        os.kill(rt.spawner._pid, 9)
        second = await start(rt, pod(sh("c", "exit 7"), policy="Never"))
        status = await wait_for(rt, second, lambda s: s["phase"] == "Failed")
        assert container(status)["state"]["terminated"]["exitCode"] == 7


async def test_a_sidecar_runs_beside_the_containers_and_stops_after_them(
        runtime: ProcessRuntime) -> None:
    mount = [{"name": "shared", "mountPath": "/shared"}]
    sidecar = sh("side", "echo side > /shared/side; exec sleep 1000", volumeMounts=mount,
                 restartPolicy="Always")
    main = sh("c", "cat /shared/side; sleep 0.5; exit 0", volumeMounts=mount)
    p = pod(main, policy="Never", inits=(sidecar,), volumes=({"name": "shared",
                                                              "emptyDir": {}},))
    uid = await start(runtime, p)
    status = await wait_for(runtime, uid, lambda s: "running" in container(s, "side")["state"]
                            and "running" in container(s)["state"])
    assert condition(status, "Initialized")["status"] == "True"
    # the main container is done: so is the pod, and its sidecar is stopped
    status = await wait_for(runtime, uid, lambda s: s["phase"] == "Succeeded" and
                            "terminated" in container(s, "side")["state"])
    assert container(status)["state"]["terminated"]["reason"] == "Completed"
    assert not procs.marked(runtime.marker(uid))
