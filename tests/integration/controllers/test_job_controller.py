"""The Job and TTL-after-finished controllers against a real, secured server with the
scheduler and a node agent: simulated pods (scripted exits) and real processes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from setpoint.apimachinery import errors
from setpoint.client import Client, load_kubeconfig
from setpoint.controllers import JobConfig, Settings
from setpoint.controllers.jobpods import TRACKING_FINALIZER
from setpoint.controlplane import ControlPlane, ControlPlaneConfig, ServeAgentConfig
from setpoint.server.securing import SecurityConfig
from setpoint.server.server import ServerConfig
from setpoint.storage import StorageConfig
from setpoint.testing import waiting

Obj = dict[str, Any]
POD = ("v1", "Pod")
JOB = ("batch/v1", "Job")
EVENT = ("v1", "Event")

pytestmark = pytest.mark.slow


async def eventually(check: Callable[[], Awaitable[Any]], timeout: float = 90) -> Any:
    """The suite's wait, with the patience pods on a loaded machine need."""
    return await waiting.eventually(check, timeout=timeout)


async def _plane(tmp_path: Path, runtime: str) -> AsyncIterator[Client]:
    kubeconfig = tmp_path / "kubeconfig"
    config = ControlPlaneConfig(
        server=ServerConfig(port=0, storage=StorageConfig(kind="memory"),
                            kubeconfig_path=kubeconfig,
                            security=SecurityConfig(pki_dir=tmp_path / "pki")),
        controllers=frozenset({"job", "ttl-after-finished", "scheduler", "serviceaccount",
                               "root-ca-cert-publisher",
                               "garbagecollector"}),
        controller_settings=Settings(job=JobConfig(backoff=0.2, max_backoff=1.0)),
        agent=ServeAgentConfig(node_name="node-a", root_dir=tmp_path / "agent",
                               pod_runtime=runtime, isolation="none"),
        controllers_mode="inline")
    async with ControlPlane(config), Client(load_kubeconfig(kubeconfig)) as c:
        async def ready() -> bool:
            try:
                await c.get(("v1", "ServiceAccount"), "default", namespace="default")
                node = await c.get(("v1", "Node"), "node-a")
            except errors.NotFound:
                return False
            return any(x.get("type") == "Ready" and x.get("status") == "True"
                       for x in node.get("status", {}).get("conditions", []))
        await eventually(ready)
        yield c


@pytest.fixture
async def simulated(tmp_path: Path) -> AsyncIterator[Client]:
    async for c in _plane(tmp_path, "simulate"):
        yield c


@pytest.fixture
async def processes(tmp_path: Path) -> AsyncIterator[Client]:
    async for c in _plane(tmp_path, "process"):
        yield c


def simulated_job(name: str, *, exit_code: int = 0, after: float = 0.3, **spec: Any) -> Obj:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"template": {
                "metadata": {"annotations": {"simulate.setpoint.dev/start-after": "0",
                                             "simulate.setpoint.dev/ready-after": "0",
                                             "simulate.setpoint.dev/exit-after": str(after),
                                             "simulate.setpoint.dev/exit-code":
                                                 str(exit_code)}},
                "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                         "containers": [{"name": "c", "image": "sim"}]}}, **spec}}


def condition(job: Obj, kind: str) -> Obj | None:
    for c in job.get("status", {}).get("conditions", []):
        if c["type"] == kind and c["status"] == "True":
            return dict(c)
    return None


async def finished(client: Client, name: str, kind: str) -> Obj:
    async def check() -> Obj | None:
        job = await client.get(JOB, name, namespace="default")
        return job if condition(job, kind) else None
    result: Obj = await eventually(check)
    return result


async def pods_of(client: Client, name: str) -> list[Obj]:
    page = await client.list(POD, namespace="default",
                             label_selector=f"batch.kubernetes.io/job-name={name}")
    return list(page["items"])


async def test_completions_and_parallelism(simulated: Client) -> None:
    client = simulated
    await client.create(simulated_job("five", completions=5, parallelism=2))
    seen_active: set[int] = set()

    async def complete() -> Obj | None:
        job = await client.get(JOB, "five", namespace="default")
        seen_active.add(job.get("status", {}).get("active", 0))
        return job if condition(job, "Complete") else None
    job = await eventually(complete)
    status = job["status"]
    assert status["succeeded"] == 5
    assert status.get("failed", 0) == 0
    assert status["active"] == 0
    assert status["startTime"] <= status["completionTime"]
    assert condition(job, "Complete")["reason"] == "CompletionsReached"
    assert condition(job, "SuccessCriteriaMet") is not None
    assert max(seen_active) <= 2
    pods = await pods_of(client, "five")
    # exactly as many pods as completions: none created twice
    assert len(pods) == 5
    assert all(p["status"]["phase"] == "Succeeded" for p in pods)
    assert all(TRACKING_FINALIZER not in p["metadata"].get("finalizers", []) for p in pods)
    assert not status.get("uncountedTerminatedPods")


async def test_failures_reach_the_backoff_limit(simulated: Client) -> None:
    client = simulated
    await client.create(simulated_job("fails", exit_code=1, backoffLimit=2))
    job = await finished(client, "fails", "Failed")
    failed = condition(job, "Failed")
    assert failed is not None
    assert failed["reason"] == "BackoffLimitExceeded"
    assert failed["message"] == "Job has reached the specified backoff limit"

    async def all_counted() -> Obj | None:
        got = await client.get(JOB, "fails", namespace="default")
        return got if got["status"].get("failed") == 3 and not got["status"].get(
            "uncountedTerminatedPods") else None
    job = await eventually(all_counted)
    assert job["status"].get("succeeded", 0) == 0
    assert len(await pods_of(client, "fails")) == 3
    events = await client.list(EVENT, namespace="default",
                               field_selector="involvedObject.name=fails")
    assert "BackoffLimitExceeded" in {e["reason"] for e in events["items"]}


async def test_active_deadline_and_ttl(simulated: Client) -> None:
    client = simulated
    await client.create(simulated_job("slow", after=3600, activeDeadlineSeconds=1,
                                      ttlSecondsAfterFinished=1))
    job = await finished(client, "slow", "Failed")
    assert condition(job, "Failed")["reason"] == "DeadlineExceeded"
    assert condition(job, "Failed")["message"] == \
        "Job was active longer than specified deadline"

    async def gone() -> bool:
        try:
            await client.get(JOB, "slow", namespace="default")
        except errors.NotFound:
            return True
        return False
    await eventually(gone)


async def test_indexed_jobs_complete_every_index(simulated: Client) -> None:
    client = simulated
    await client.create(simulated_job("idx", completions=3, parallelism=3,
                                      completionMode="Indexed"))
    job = await finished(client, "idx", "Complete")
    assert job["status"]["completedIndexes"] == "0-2"
    pods = await pods_of(client, "idx")
    indexes = sorted(p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
                     for p in pods)
    assert indexes == ["0", "1", "2"]
    env = pods[0]["spec"]["containers"][0]["env"]
    assert env[-1]["name"] == "JOB_COMPLETION_INDEX"


async def test_suspended_jobs_run_nothing_until_resumed(simulated: Client) -> None:
    client = simulated
    await client.create(simulated_job("later", suspend=True))
    job = await finished(client, "later", "Suspended")
    assert condition(job, "Suspended")["reason"] == "JobSuspended"
    assert await pods_of(client, "later") == []
    await client.patch(JOB, "later", {"spec": {"suspend": False}}, namespace="default")
    job = await finished(client, "later", "Complete")
    assert job["status"]["succeeded"] == 1


def process_job(name: str, code: int, **spec: Any) -> Obj:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"template": {"spec": {
                "restartPolicy": "Never", "terminationGracePeriodSeconds": 2,
                "containers": [{"name": "c", "image": "python",
                                "command": ["python3", "-c",
                                            f"import sys; print('hi'); sys.exit({code})"]}]}},
                **spec}}


async def test_real_processes_succeed_and_fail(processes: Client) -> None:
    client = processes
    await client.create(process_job("ok", 0, completions=2, parallelism=2))
    await client.create(process_job("bad", 1, backoffLimit=0))
    ok = await finished(client, "ok", "Complete")
    assert ok["status"]["succeeded"] == 2
    bad = await finished(client, "bad", "Failed")
    assert condition(bad, "Failed")["reason"] == "BackoffLimitExceeded"
    pods = await pods_of(client, "bad")
    assert [p["status"]["phase"] for p in pods] == ["Failed"]
    terminated = pods[0]["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 1


async def test_a_deleted_job_leaves_no_pod_held_by_its_finalizer(simulated: Client) -> None:
    client = simulated
    await client.create(simulated_job("gone", after=3600, parallelism=2, completions=4))
    await client.create(simulated_job("fg", after=3600))

    async def running(name: str) -> list[Obj] | None:
        pods = await pods_of(client, name)
        return pods if pods and all(p["status"].get("phase") == "Running"
                                    for p in pods) else None
    assert len(await eventually(lambda: running("gone"))) == 2
    await eventually(lambda: running("fg"))
    await client.delete(JOB, "gone", namespace="default", propagation_policy="Background")
    await client.delete(JOB, "fg", namespace="default", propagation_policy="Foreground")

    async def no_pods() -> bool:
        return not await pods_of(client, "gone") and not await pods_of(client, "fg")
    await eventually(no_pods)

    async def job_gone() -> bool:
        try:
            await client.get(JOB, "fg", namespace="default")
        except errors.NotFound:
            return True
        return False
    await eventually(job_gone)
