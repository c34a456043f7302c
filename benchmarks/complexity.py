"""How the request path's work grows with what a client sends: CPU time at growing sizes,
each beside the term-by-term (or scan-everything) way of doing the same work, in the same run.

No server: the functions a request (or the garbage collector) calls, timed with
``time.process_time``. Three curves:

1. a label selector of n ``!=`` terms matched against 2,000 objects' labels (a LIST): the
   folded selector, and the same requirements evaluated one by one;
2. the escalation check of a Role of one rule of n verbs, n resources and n names by a user
   holding three rules: checked, or refused at once beyond the bound;
3. the garbage collector's graph handling n owners of one object verified absent: owners'
   references looked up by UID, and the same partition scanning every reference.

    python benchmarks/complexity.py [--sizes 100,400,1600]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from setpoint.apimachinery.selectors import LabelSelector  # noqa: E402
from setpoint.auth.rbac import rules  # noqa: E402
from setpoint.controllers import graph as g  # noqa: E402


def cpu(fn: Callable[[], Any]) -> float:
    started = time.process_time()
    fn()
    return (time.process_time() - started) * 1000


def selectors(n: int) -> str:
    sel = LabelSelector.parse(",".join(f"k{i}!=v" for i in range(n)))
    objects = [{"app": f"a{i}", "tier": "web"} for i in range(2000)]
    folded = cpu(lambda: [sel.matches(labels) for labels in objects])
    one_by_one = cpu(lambda: [all(r.matches(labels) for r in sel.requirements)
                              for labels in objects])
    return f"{folded:9.1f} ms  (term by term: {one_by_one:9.1f} ms)"


def escalation(n: int) -> str:
    held = [rules.PolicyRule(("get",), ("",), ("*",)), rules.PolicyRule(("*",), ("",), ("r0",)),
            rules.PolicyRule(("list",), ("apps",), ("deployments",))]
    rule = rules.PolicyRule(tuple(f"v{i}" for i in range(n)), ("",),
                            tuple(f"r{i}" for i in range(n)), tuple(f"n{i}" for i in range(n)))
    outcome = "checked"

    def check() -> None:
        nonlocal outcome
        try:
            rules.uncovered(held, [rule])
        except rules.BreakdownTooLarge:
            outcome = "refused"
    took = cpu(check)
    return f"{took:9.1f} ms  ({rules.atoms(rule):,} single permissions: {outcome})"


def _scanning_partition(dependents: Any, owner: g.Identity) -> None:
    for dep in dependents:  # what partition_dependents did before: every reference
        for ref in dep.owners:
            if ref.get("uid") == owner.uid:
                g.reference_matches(ref, owner)


def collector(n: int) -> str:
    def run(scan: bool) -> float:
        graph = g.Graph(attempt_to_delete=lambda node: None,
                        attempt_to_orphan=lambda node: None)
        refs = [{"apiVersion": "example.com/v1", "kind": "Widget", "name": f"w{i}",
                 "uid": f"u{i}"} for i in range(n)]
        graph.observe("v1", "ConfigMap", None, {"metadata": {
            "name": "cm", "namespace": "default", "uid": "c1", "ownerReferences": refs}})
        identities = [g.Identity("example.com/v1", "Widget", "default", f"w{i}", f"u{i}")
                      for i in range(n)]
        dependent = graph.get("c1")

        def handle() -> None:
            for identity in identities:
                if scan:
                    _scanning_partition([dependent], identity)
                graph.virtual_delete(identity)
        return cpu(handle)
    return f"{run(False):9.1f} ms  (scanning every reference as well: {run(True):9.1f} ms)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="100,400,1600")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    for title, fn, scale in (
            ("label selector of n terms over 2,000 objects", selectors, 1),
            ("escalation check of a rule of n verbs, resources and names", escalation, 0),
            ("garbage collector: n absent owners of one object", collector, 5)):
        print(title)
        for n in sizes:
            size = n * scale if scale else max(1, n // 20)
            print(f"  n={size:7,d} {fn(size)}")


if __name__ == "__main__":
    main()
