"""End-to-end tests: several real servers (etcd clusters, API servers) and faults between them.

Every test here is marked ``e2e``: a plain ``pytest`` leaves them out (they take minutes),
``make test`` runs them after the rest, ``pytest -m e2e`` runs only them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.e2e)
