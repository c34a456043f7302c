"""``setpoint.testing``: test operators against a real control plane, with no binaries.

An in-process setpoint API server starts in a few tens of milliseconds (envtest's
kube-apiserver and etcd take 5 to 7 s), in the test's own event loop::

    from setpoint.testing import control_plane

    async def test_books_get_catalogued(tmp_path):
        async with control_plane(tmp_path) as cp:
            await cp.apply("examples/book/crd.yaml")
            await cp.run_operator("examples/book/operator.py")
            await cp.apply(BOOK)
            await cp.wait_for(("library.example.com/v1", "Book"), "dune",
                              lambda book: book.get("status", {}).get("phase") == "Catalogued")

With pytest, ``pytest_plugins = ["setpoint.testing.pytest_plugin"]`` provides the fixtures
``setpoint_control_plane`` (a :class:`ControlPlane` per test) and ``setpoint_client`` (its
client). See :mod:`setpoint.testing.controlplane` for the guarantees.
"""

# Only this module imports names from the others: it is the package's public surface.
from setpoint.testing.controlplane import (
    ControlPlane,
    OperatorFailedError,
    control_plane,
    load_operator,
    read_manifests,
)
from setpoint.testing.waiting import eventually, eventually_blocking

__all__ = [
    "ControlPlane",
    "OperatorFailedError",
    "control_plane",
    "eventually",
    "eventually_blocking",
    "load_operator",
    "read_manifests",
]
