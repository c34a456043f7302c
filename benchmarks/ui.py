"""The web UI with many objects: page load and live-update latency in headless chromium,
beside the API requests the page makes, from the same run.

One ``setpoint serve`` process (secure, token users), one custom kind, N objects (half of
them with a False Ready condition) in one namespace. Measured, each R times (median, max):

1. ``API: Table list``: the request the table page makes (``as=Table``, ``includeObject=
   Object``) from Python, the baseline of the page's load;
2. ``page: table of N``: from navigating to ``/ui/#/r/...`` in a fresh document to the
   table showing N rows (discovery, the Table request, building N rows);
3. ``page: object``: one object's page until its health, owner tree and events show (the
   owner tree lists every kind of the namespace, N widgets among them, 500 at most);
4. ``live: create -> row``: with the table open, from a create acknowledged by the API to
   its row in the page (the watch event, the UI's 150 ms debounce, the Table re-read);
5. ``live: status -> health``: with an object's page open, from a status write
   acknowledged to the page showing the new health;
6. with ``--burst M``: with the table open, M status writes spread over the whole kind (16
   at a time), then one more to the first object: from that last write acknowledged to the
   page showing it (the burst's events are drawn before it), the rows the table holds then
   (at most what it read, when N is more than its 10,000-row limit, plus creates among
   those), and the page's longest main-thread task meanwhile (once).

    python benchmarks/ui.py [--n 5000] [--repeat 5] [--burst 0]

Needs selenium, chromium and chromedriver (``apt-get install chromium chromium-driver``).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.integration.ui.cluster import ADMIN_TOKEN, WIDGETS_CRD, UiCluster, start  # noqa: E402

NS = "bench"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
TABLE_LIMIT = 10000  # the rows a table page reads at most (app.js)


def condition(ready: bool) -> dict[str, Any]:
    return {"type": "Ready", "status": "True" if ready else "False",
            "reason": "Ok" if ready else "NoCapacity",
            "message": "fine" if ready else "no capacity left",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}


async def populate(cluster: UiCluster, n: int, concurrency: int = 16) -> None:
    base = f"/apis/example.com/v1/namespaces/{NS}/widgets"
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}", "Content-Type": "application/json"}
    connector = aiohttp.TCPConnector(ssl=cluster.anonymous_context(), limit=concurrency)
    async with aiohttp.ClientSession(base_url=cluster.url, connector=connector) as session:
        queue: asyncio.Queue[int] = asyncio.Queue()
        for i in range(n):
            queue.put_nowait(i)

        async def worker() -> None:
            while not queue.empty():
                i = queue.get_nowait()
                name = f"w-{i:05d}"
                async with session.post(base, data=orjson.dumps({
                        "apiVersion": "example.com/v1", "kind": "Widget",
                        "metadata": {"name": name}, "spec": {"size": i}}),
                        headers=headers) as r:
                    assert r.status == 201, await r.text()
                async with session.patch(f"{base}/{name}/status", data=orjson.dumps(
                        {"status": {"conditions": [condition(i % 2 == 0)]}}),
                        headers={**headers,
                                 "Content-Type": "application/merge-patch+json"}) as r:
                    assert r.status == 200, await r.text()

        await asyncio.gather(*(worker() for _ in range(concurrency)))


def timed(action: Callable[[], Any]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def wait(driver: Any, script: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not driver.execute_script(script):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the page never satisfied: {script}")


def browser() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    if chromium is None or not Path(driver_path).exists():
        raise SystemExit("needs chromium and chromedriver")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,1000", "--no-first-run"):
        options.add_argument(arg)
    options.accept_insecure_certs = True
    return webdriver.Chrome(options=options, service=Service(driver_path))


async def write_statuses(cluster: UiCluster, names: list[str], message: str,
                         concurrency: int = 16) -> None:
    base = f"/apis/example.com/v1/namespaces/{NS}/widgets"
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}",
               "Content-Type": "application/merge-patch+json"}
    connector = aiohttp.TCPConnector(ssl=cluster.anonymous_context(), limit=concurrency)
    async with aiohttp.ClientSession(base_url=cluster.url, connector=connector) as session:
        queue = list(names)

        async def worker() -> None:
            while queue:
                name = queue.pop()
                async with session.patch(f"{base}/{name}/status", data=orjson.dumps(
                        {"status": {"conditions": [{**condition(True), "message": message}]}}),
                        headers=headers) as r:
                    assert r.status == 200, await r.text()

        await asyncio.gather(*(worker() for _ in range(concurrency)))


def burst(cluster: UiCluster, driver: Any, table_url: str, n: int, m: int) -> float:
    """M status writes spread over the kind with its table open, then a marker write to
    the first object: the time from the marker acknowledged to the page showing it."""
    driver.get("about:blank")
    driver.get(table_url)
    wait(driver, "const s = document.getElementById('table-status');"
                 "return s && s.textContent.includes('objects, live')")
    driver.execute_script(
        "window.longTasks = []; new PerformanceObserver((list) => { for (const e of "
        "list.getEntries()) window.longTasks.push(e.duration); })"
        ".observe({entryTypes: ['longtask']});")
    step = max(1, n // m)
    asyncio.run(write_statuses(cluster, [f"w-{i:05d}" for i in range(0, n, step)][:m],
                               "burst"))
    cluster.ok("PATCH", f"/apis/example.com/v1/namespaces/{NS}/widgets/w-00000/status",
               {"status": {"conditions": [{**condition(True), "message": "marker"}]}},
               content_type="application/merge-patch+json")
    caught_up = timed(lambda: wait(driver, "return !!document.querySelector("
                                           "'#table tr[data-name=w-00000] [title*=marker]')",
                                   timeout=900))
    rows = driver.execute_script("return document.querySelectorAll('#table tbody tr').length")
    longest = max(driver.execute_script("return window.longTasks") or [0])
    print(f"burst of {m}: the table holds {rows} rows; longest task {longest:.0f} ms",
          flush=True)
    return caught_up


def row(what: str, samples: list[float]) -> str:
    ms = [s * 1000 for s in samples]
    return f"| {what} | {statistics.median(ms):.0f} | {max(ms):.0f} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--burst", type=int, default=0)
    args = parser.parse_args()
    n, repeat = args.n, args.repeat
    with tempfile.TemporaryDirectory() as tmp:
        cluster = start(Path(tmp) / "serve")
        driver = None
        try:
            cluster.ok("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                       WIDGETS_CRD)
            deadline = time.monotonic() + 30
            while cluster.call("GET", "/apis/example.com/v1/widgets")[0] != 200:
                if time.monotonic() > deadline:
                    raise TimeoutError("the CRD is not served")
                time.sleep(0.05)
            cluster.ok("POST", "/api/v1/namespaces", {
                "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
            started = time.perf_counter()
            asyncio.run(populate(cluster, n))
            print(f"created {n} widgets with status in {time.perf_counter() - started:.1f} s",
                  flush=True)
            collection = f"/apis/example.com/v1/namespaces/{NS}/widgets"
            context = cluster.anonymous_context()

            def api_table() -> None:
                request = urllib.request.Request(
                    cluster.url + collection + f"?includeObject=Object&limit={TABLE_LIMIT}",
                    headers={"Accept": TABLE, "Authorization": f"Bearer {ADMIN_TOKEN}"})
                with urllib.request.urlopen(request, context=context, timeout=60) as r:
                    assert len(orjson.loads(r.read())["rows"]) >= min(n, TABLE_LIMIT)

            results: dict[str, list[float]] = {}
            results["API: Table list"] = [timed(api_table) for _ in range(repeat)]

            driver = browser()
            driver.get(cluster.url + "/ui/")
            driver.execute_script(f"sessionStorage.setItem('setpoint.token', '{ADMIN_TOKEN}')")
            table_url = cluster.url + f"/ui/#/r/example.com/v1/widgets?ns={NS}"
            shown = min(n, TABLE_LIMIT)  # a table reads at most its limit
            loads = []
            for _ in range(repeat):
                driver.get("about:blank")
                loads.append(timed(lambda: (driver.get(table_url), wait(
                    driver, "const s = document.getElementById('table-status');"
                            f"return s && s.textContent.startsWith('{shown} objects')"))))
            results[f"page: table of {shown}"] = loads

            object_url = cluster.url + f"/ui/#/o/example.com/v1/widgets/{NS}/w-00001"
            objects = []
            for _ in range(repeat):
                driver.get("about:blank")
                objects.append(timed(lambda: (driver.get(object_url), wait(
                    driver, "return !!document.querySelector('#tree li.self') && "
                            "!!document.getElementById('health-message') && "
                            "!document.querySelector('#events h2 + p:empty')"))))
            results["page: object"] = objects

            driver.get("about:blank")
            driver.get(table_url)
            wait(driver, "const s = document.getElementById('table-status');"
                         f"return s && s.textContent.startsWith('{shown} objects')")
            live = []
            for i in range(repeat):
                name = f"live-{i}"
                cluster.ok("POST", collection, {"apiVersion": "example.com/v1",
                                                "kind": "Widget", "metadata": {"name": name},
                                                "spec": {"size": 1}})
                live.append(timed(lambda name=name: wait(  # type: ignore[misc]
                    driver, f"return !!document.querySelector('tr[data-name=\"{name}\"]')")))
            results["live: create -> row"] = live

            driver.get("about:blank")
            driver.get(object_url)
            wait(driver, "return !!document.getElementById('health-message')")
            flips = []
            for i in range(repeat):
                ready = i % 2 == 0
                state = "ready" if ready else "not-ready"
                cluster.ok("PATCH", f"{collection}/w-00001/status",
                           {"status": {"conditions": [{**condition(ready),
                                                       "message": f"flip {i}"}]}},
                           content_type="application/merge-patch+json")
                script = ("const b = document.querySelector('#health [data-health]');"
                          f"return b && b.dataset.health === '{state}' && "
                          "document.getElementById('health-message').textContent"
                          f".includes('flip {i}')")
                flips.append(timed(lambda script=script: wait(  # type: ignore[misc]
                    driver, script)))
            results["live: status -> health"] = flips
            if args.burst:
                results[f"live: burst of {args.burst} status writes -> caught up"] = [
                    burst(cluster, driver, table_url, n, args.burst)]
        finally:
            if driver is not None:
                driver.quit()
            cluster.serve.stop()
    print(f"\n{n} objects, {repeat} runs each (headless chromium, same machine)\n")
    print("| what | median ms | max ms |")
    print("|---|---|---|")
    for what, samples in results.items():
        print(row(what, samples))


if __name__ == "__main__":
    main()
