"""The CronJob controller against a real, secured server, on a clock the test moves: an
"every minute" schedule fires when the test says a minute has passed. Jobs are finished by
the test (writing their status as the Job controller would)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from setpoint.apimachinery import errors
from setpoint.apimachinery.clock import FakeClock
from setpoint.client import Client, load_kubeconfig
from setpoint.controllers import CronJobConfig, Settings
from setpoint.controlplane import ControlPlane, ControlPlaneConfig
from setpoint.server.securing import SecurityConfig
from setpoint.server.server import ServerConfig
from setpoint.storage import StorageConfig
from setpoint.testing import waiting

Obj = dict[str, Any]
JOB = ("batch/v1", "Job")
CRONJOB = ("batch/v1", "CronJob")
EVENT = ("v1", "Event")

pytestmark = pytest.mark.slow


async def eventually(check: Callable[[], Awaitable[Any]], timeout: float = 30) -> Any:
    """The suite's wait, with the patience pods on a loaded machine need."""
    return await waiting.eventually(check, timeout=timeout)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(datetime.now(UTC))


@pytest.fixture
async def client(tmp_path: Path, clock: FakeClock) -> AsyncIterator[Client]:
    kubeconfig = tmp_path / "kubeconfig"
    config = ControlPlaneConfig(
        server=ServerConfig(port=0, storage=StorageConfig(kind="memory"),
                            kubeconfig_path=kubeconfig,
                            security=SecurityConfig(pki_dir=tmp_path / "pki")),
        controllers=frozenset({"cronjob", "serviceaccount", "garbagecollector"}),
        controller_settings=Settings(cronjob=CronJobConfig(max_wait=0.1, clock=clock)),
        controllers_mode="inline")
    async with ControlPlane(config), Client(load_kubeconfig(kubeconfig)) as c:
        await eventually(lambda: exists(c, ("v1", "ServiceAccount"), "default"))
        yield c


async def exists(client: Client, resource: Any, name: str) -> bool:
    try:
        await client.get(resource, name, namespace="default")
    except errors.NotFound:
        return False
    return True


def cronjob(name: str, schedule: str = "* * * * *", **spec: Any) -> Obj:
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name},
            "spec": {"schedule": schedule, "jobTemplate": {
                "metadata": {"labels": {"app": name}},
                "spec": {"template": {"spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox"}]}}}}, **spec}}


async def jobs_of(client: Client, name: str) -> list[Obj]:
    page = await client.list(JOB, namespace="default", label_selector=f"app={name}")
    return sorted(page["items"], key=lambda j: j["metadata"]["name"])


async def count_jobs(client: Client, name: str, n: int) -> list[Obj]:
    async def check() -> list[Obj] | None:
        found = [j for j in await jobs_of(client, name)
                 if not j["metadata"].get("deletionTimestamp")]
        return found if len(found) == n else None
    result: list[Obj] = await eventually(check)
    return result


async def finish(client: Client, job: Obj, kind: str = "Complete") -> None:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    status: Obj = {"startTime": now, "conditions": [
        {"type": kind, "status": "True", "lastTransitionTime": now}]}
    if kind == "Complete":
        status["completionTime"] = now
        status["succeeded"] = 1
    await client.patch_status(JOB, job["metadata"]["name"], {"status": status},
                              namespace="default")


async def test_every_minute_fires_when_a_minute_passes(client: Client,
                                                       clock: FakeClock) -> None:
    created = await client.create(cronjob("tick", timeZone="Asia/Tokyo"))
    clock.advance(61)
    [first] = await count_jobs(client, "tick", 1)
    assert first["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
    assert first["metadata"]["annotations"][
        "batch.kubernetes.io/cronjob-scheduled-timestamp"].endswith("+09:00")
    minutes = int(first["metadata"]["name"].rsplit("-", 1)[1])
    assert minutes * 60 <= clock.now().timestamp()

    async def listed() -> Obj | None:
        got = await client.get(CRONJOB, "tick", namespace="default")
        return got if got.get("status", {}).get("active") else None
    status = (await eventually(listed))["status"]
    assert status["active"][0]["name"] == first["metadata"]["name"]
    assert status["lastScheduleTime"]

    await finish(client, first)

    async def succeeded() -> Obj | None:
        got = await client.get(CRONJOB, "tick", namespace="default")
        s = got.get("status", {})
        return got if s.get("lastSuccessfulTime") and not s.get("active") else None
    await eventually(succeeded)

    # four more minutes, one Job each: the history keeps the last three successes
    for _ in range(4):
        before = {j["metadata"]["name"] for j in await jobs_of(client, "tick")}
        clock.advance(60)

        async def new_job(before: set[str] = before) -> Obj | None:
            for j in await jobs_of(client, "tick"):
                if j["metadata"]["name"] not in before:
                    return j
            return None
        await finish(client, await eventually(new_job))
    await count_jobs(client, "tick", 3)


async def test_forbid_skips_while_a_job_runs_and_replace_replaces(
        client: Client, clock: FakeClock) -> None:
    await client.create(cronjob("lone", concurrencyPolicy="Forbid"))
    await client.create(cronjob("swap", concurrencyPolicy="Replace"))
    clock.advance(61)
    [lone] = await count_jobs(client, "lone", 1)
    [swap] = await count_jobs(client, "swap", 1)
    clock.advance(60)
    # Replace: the running Job goes, a new one comes
    [swapped] = await eventually(lambda: _one_new(client, "swap", swap))
    assert swapped["metadata"]["name"] != swap["metadata"]["name"]
    # Forbid: the CronJob saw the next minute and created nothing beside the running Job

    async def refused() -> bool:
        events = await client.list(EVENT, namespace="default",
                                   field_selector="involvedObject.name=lone")
        return any(e["reason"] == "JobAlreadyActive" for e in events["items"])
    await eventually(refused)
    assert [j["metadata"]["name"] for j in await jobs_of(client, "lone")] == [
        lone["metadata"]["name"]]


async def _one_new(client: Client, name: str, old: Obj) -> list[Obj] | None:
    found = [j for j in await jobs_of(client, name)
             if not j["metadata"].get("deletionTimestamp")]
    if len(found) == 1 and found[0]["metadata"]["uid"] != old["metadata"]["uid"]:
        return found
    return None


async def test_too_many_missed_times(client: Client, clock: FakeClock) -> None:
    await client.create(cronjob("late"))
    clock.advance(200 * 60 + 1)
    [job] = await count_jobs(client, "late", 1)
    minutes = int(job["metadata"]["name"].rsplit("-", 1)[1])
    # the most recent time runs, the missed ones before it do not
    assert minutes == int(clock.now().timestamp()) // 60

    async def warned() -> bool:
        events = await client.list(EVENT, namespace="default",
                                   field_selector="involvedObject.name=late")
        return any(e["reason"] == "TooManyMissedTimes" and e["type"] == "Warning"
                   for e in events["items"])
    await eventually(warned)


async def test_suspended_cronjobs_do_not_fire(client: Client, clock: FakeClock) -> None:
    await client.create(cronjob("held", suspend=True))
    await client.create(cronjob("free"))
    clock.advance(61)
    await count_jobs(client, "free", 1)
    await client.patch(CRONJOB, "held", {"spec": {"suspend": False}}, namespace="default")
    clock.advance(60)
    [held] = await count_jobs(client, "held", 1)
    # the minute that passed while it was suspended did not run
    assert int(held["metadata"]["name"].rsplit("-", 1)[1]) == \
        int(clock.now().timestamp()) // 60
