"""Two agents on one machine share the pod bridge: one stopping never cuts the other's pods
off, and the last one out removes the bridge (root and iproute2 only)."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from setpoint.agent.network import BridgeNetwork
from tests.integration.agent.conftest import can_namespace, network_names

pytestmark = pytest.mark.skipif(not can_namespace(), reason="needs root and iproute2")


def state(bridge: str) -> tuple[bool, int, str]:
    """Whether the bridge exists, how many interfaces are attached, its IPv4 addresses."""
    if not os.path.exists(f"/sys/class/net/{bridge}"):
        return False, 0, ""
    addrs = subprocess.run(["ip", "-o", "-4", "addr", "show", "dev", bridge], check=True,
                           capture_output=True, text=True).stdout
    return True, len(os.listdir(f"/sys/class/net/{bridge}/brif")), addrs


def reaches(netns: str, ip: str) -> bool:
    """A process in ``netns`` opens a TCP connection to a listener of the host on ``ip``."""
    with socket.create_server((ip, 0)) as listener:
        port = listener.getsockname()[1]
        reply = subprocess.run(
            ["ip", "netns", "exec", Path(netns).name, sys.executable, "-c",
             f"import socket; socket.create_connection(({ip!r}, {port}), 10)"],
            capture_output=True, timeout=30)
        if reply.returncode != 0:
            return False
        listener.settimeout(10)
        listener.accept()[0].close()
        return True


def forget(bridge: str) -> None:
    subprocess.run(["ip", "link", "delete", bridge], capture_output=True)


async def test_an_agent_left_without_pods_keeps_a_bridge_another_agent_uses() -> None:
    bridge, _ = network_names()
    first = BridgeNetwork(agent_id=f"a{os.getpid()}", cidr="10.251.1.0/24", bridge=bridge)
    second = BridgeNetwork(agent_id=f"b{os.getpid()}", cidr="10.251.2.0/24", bridge=bridge)
    try:
        await first.setup("uid-first")
        pod = await second.setup("uid-second")
        assert pod.ip == "10.251.2.2"
        exists, count, addrs = await asyncio.to_thread(state, bridge)
        assert count == 2
        assert "10.251.1.1/24" in addrs
        assert "10.251.2.1/24" in addrs

        # the creator has no pod left and stops: the other agent's pod stays connected
        await first.teardown("uid-first")
        await first.close()
        exists, count, addrs = await asyncio.to_thread(state, bridge)
        assert exists
        assert count == 1
        assert "10.251.1.1/24" not in addrs
        assert "10.251.2.1/24" in addrs
        assert await asyncio.to_thread(reaches, pod.netns or "", "10.251.2.1")

        # the last one out removes the bridge, though it did not create it
        await second.teardown("uid-second")
        await second.close()
        assert (await asyncio.to_thread(state, bridge))[0] is False
    finally:
        for net, uid in ((first, "uid-first"), (second, "uid-second")):
            await net.teardown(uid)
            await net.close()
        await asyncio.to_thread(forget, bridge)


async def test_a_bridge_removed_by_another_agent_is_made_again() -> None:
    bridge, _ = network_names()
    first = BridgeNetwork(agent_id=f"c{os.getpid()}", cidr="10.251.3.0/24", bridge=bridge)
    second = BridgeNetwork(agent_id=f"d{os.getpid()}", cidr="10.251.4.0/24", bridge=bridge)
    try:
        await second.setup("uid-early")
        await second.teardown("uid-early")
        await first.setup("uid-a")
        await first.teardown("uid-a")
        await first.close()  # nothing attached: the bridge goes
        assert (await asyncio.to_thread(state, bridge))[0] is False
        pod = await second.setup("uid-late")  # second had seen the bridge ready
        exists, count, addrs = await asyncio.to_thread(state, bridge)
        assert exists
        assert count == 1
        assert "10.251.4.1/24" in addrs
        assert pod.ip == "10.251.4.2"
    finally:
        for net, uid in ((first, "uid-a"), (second, "uid-late")):
            await net.teardown(uid)
            await net.close()
        await asyncio.to_thread(forget, bridge)
