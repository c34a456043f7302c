"""The pod of local processes from the integration tests, for the real clients."""

from tests.integration.streaming.conftest import (  # noqa: F401  (fixtures, by name)
    app,
    config,
    echo_port,
    no_task_left_running,
    pod_port,
    target,
)
