"""pytest fixtures for :mod:`setpoint.testing`.

Enable them in a test module or the root ``conftest.py``::

    pytest_plugins = ["setpoint.testing.pytest_plugin"]

- ``setpoint_control_plane``: a :class:`~setpoint.testing.ControlPlane` for one test, on
  memory storage, its kubeconfig in the test's ``tmp_path``; everything it started is
  stopped after the test.
- ``setpoint_client``: that control plane's admin :class:`~setpoint.client.Client`.

Both are function-scoped async fixtures (pytest-asyncio), so each test gets a fresh, empty
control plane: starting one costs a few tens of milliseconds.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from setpoint import client as sp_client
from setpoint.testing import controlplane


@pytest_asyncio.fixture
async def setpoint_control_plane(tmp_path: Path) -> AsyncIterator[controlplane.ControlPlane]:
    """A fresh in-process control plane for the test."""
    async with controlplane.control_plane(tmp_path / "setpoint") as cp:
        yield cp


@pytest_asyncio.fixture
async def setpoint_client(
        setpoint_control_plane: controlplane.ControlPlane) -> sp_client.Client:
    """The admin client of the test's control plane."""
    return setpoint_control_plane.client
