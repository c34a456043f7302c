"""The storage state machine against a real etcd: one fresh etcd per example.

Each example starts its own etcd (the model starts from revision 0), so this runs fewer
examples than the in-process machines; raise ``max_examples`` for a longer search.
"""

from __future__ import annotations

import importlib.util
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from setpoint.storage import StorageConfig
from tests.integration.storage import etcd_server
from tests.integration.storage import test_state_machine as machines

pytestmark = [
    pytest.mark.skipif(etcd_server.BINARY is None, reason=etcd_server.MISSING),
    pytest.mark.skipif(importlib.util.find_spec("aetcd") is None,
                       reason="the aetcd client is not installed"),
]


class EtcdMachine(machines.StorageMachine):
    kind = "etcd"

    def config(self, directory: Path) -> StorageConfig:
        self.etcd_directory = tempfile.TemporaryDirectory()
        self.server = etcd_server.EtcdServer(Path(self.etcd_directory.name) / "etcd")
        self.server.start()
        return StorageConfig(kind="etcd", endpoints=(self.server.endpoint,))

    def teardown(self) -> None:
        try:
            super().teardown()
        finally:
            self.server.stop()
            self.etcd_directory.cleanup()


TestEtcdStateMachine = EtcdMachine.TestCase
TestEtcdStateMachine.settings = settings(max_examples=25, stateful_step_count=40,
                                         deadline=None,
                                         suppress_health_check=[HealthCheck.too_slow])
