"""``setpoint crd generate MODULE:Model [...]``: the CRD of typed resources, as YAML.

``MODULE`` is a path to a ``.py`` file or a dotted module name (as ``setpoint run`` takes
them); ``Model`` a :class:`setpoint.runtime.typed.Resource` subclass decorated with
``@custom_resource``. Several models of one kind are its versions (one CRD); models of
different kinds give one YAML document each. ``--output FILE`` writes the file instead of
standard output. See :mod:`setpoint.runtime.typed` for how a model becomes a schema.

Exit codes: 0 with the YAML written; 2 when a target cannot be imported, is not a decorated
resource model, or has a field a structural schema cannot express (the message names it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

from setpoint.cli import run as run_command


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``crd`` subcommand to ``setpoint``'s subparsers."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "crd", help="generate CustomResourceDefinitions from typed resource models",
        description="Work with the CRDs of typed resources (pydantic models).")
    actions = parser.add_subparsers(dest="crd_command", required=True)
    generate = actions.add_parser(
        "generate", help="print the CRD of typed resource models as YAML",
        description="Print the CustomResourceDefinition of each kind among the models, as "
                    "YAML. Several models of one kind are its versions.")
    generate.add_argument("targets", nargs="+", metavar="MODULE:Model",
                          help="a .py file or a dotted module name, a colon, and the name "
                               "of a Resource subclass decorated with @custom_resource")
    generate.add_argument("--output", "-o", type=Path, default=None,
                          help="write here instead of standard output")
    generate.add_argument("--log-level", default="WARNING")
    return parser


def load_model(target: str) -> Any:
    """The class a ``MODULE:Model`` target names."""
    module_name, sep, attribute = target.rpartition(":")
    if not sep or not module_name or not attribute:
        raise run_command.UsageError(f"{target}: expected MODULE:Model")
    try:
        module = run_command.load_target(module_name, add_to_path=True)
    except run_command.UsageError:
        raise
    except Exception as e:
        raise run_command.UsageError(run_command.describe_import_error(module_name, e)) from e
    model = getattr(module, attribute, None)
    if model is None:
        raise run_command.UsageError(f"{module_name} has no {attribute}")
    return model


def generate(targets: list[str]) -> str:
    """The YAML of the CRDs the targets name."""
    try:
        from setpoint.runtime import typed
    except ImportError as e:  # pragma: no cover - pydantic is installed with setpoint[typed]
        raise run_command.UsageError(f"typed resources need pydantic 2: {e}") from e
    models = []
    for target in targets:
        model = load_model(target)
        if not (isinstance(model, type) and issubclass(model, typed.Resource)):
            raise run_command.UsageError(f"{target} is not a setpoint.runtime.typed.Resource")
        try:
            model.definition()
        except TypeError as e:
            raise run_command.UsageError(f"{target}: {e}") from e
        models.append(model)
    try:
        crds = typed.crds_for(models)
    except ValueError as e:  # SchemaError too
        raise run_command.UsageError(str(e)) from e
    return yaml.safe_dump_all(crds, sort_keys=False)


def main(args: argparse.Namespace) -> int:
    """Run the ``crd`` subcommand; returns the exit code."""
    try:
        text = generate(args.targets)
        if args.output is None:
            sys.stdout.write(text)
        else:
            args.output.write_text(text)
    except run_command.UsageError as e:
        print(f"setpoint crd generate: error: {e}", file=sys.stderr, flush=True)
        return 2
    return 0
