"""The water-tank example's operator with its in-process plant (the same tank physics, kept
in the operator's process), for the UI's browser tests: their server simulates pods, so the
tank program the example runs as a Pod would never answer. ``setpoint run`` this file."""

from __future__ import annotations

from pathlib import Path

from setpoint.testing import load_operator

example = load_operator(Path(__file__).resolve().parents[3] / "examples" / "watertank"
                        / "operator.py")
registry = example.build(example.Plant())
