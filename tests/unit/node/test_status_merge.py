"""What the agent writes to pods/status: the runtime's status, others' fields kept."""

from __future__ import annotations

from setpoint.node.pods import merge_status


def test_foreign_conditions_and_fields_are_kept_and_owned_ones_replaced() -> None:
    current = {
        "phase": "Pending", "nominatedNodeName": "n1", "message": "old",
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "T-sched"},
            {"type": "example.com/gate", "status": "True"},
            {"type": "Ready", "status": "False", "lastTransitionTime": "T-old"},
        ],
    }
    reported = {
        "phase": "Running", "podIP": "127.64.0.2",
        "conditions": [
            {"type": "Initialized", "status": "True"},
            {"type": "Ready", "status": "True", "lastTransitionTime": "T-new"},
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "T-agent"},
        ],
    }
    merged = merge_status(current, reported)
    assert merged["phase"] == "Running"
    assert merged["podIP"] == "127.64.0.2"
    assert merged["nominatedNodeName"] == "n1"
    assert "message" not in merged  # the agent's own field, no longer reported
    types = {c["type"]: c for c in merged["conditions"]}
    assert set(types) == {"PodScheduled", "example.com/gate", "Initialized", "Ready"}
    assert types["Ready"]["lastTransitionTime"] == "T-new"
    assert types["PodScheduled"]["lastTransitionTime"] == "T-sched"


def test_without_a_current_status_the_report_is_written_as_it_is() -> None:
    reported = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}
    assert merge_status(None, reported) == reported
