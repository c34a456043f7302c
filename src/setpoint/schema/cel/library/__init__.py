"""The function libraries of Kubernetes' CEL environment for CRD validation rules.

:data:`KUBERNETES` is the standard definitions plus every library the Kubernetes base
environment enables for stored expressions: optional types, ``ext.Strings`` v2,
``ext.Sets``, ``ext.Lists`` v3, two-variable comprehensions (macros, in the parser), and
Kubernetes' ``lists``, ``regex``, ``urls``, ``quantity``, ``ip``, ``cidr``, ``format`` and
``semver`` libraries. The authorizer libraries are not included: CRD rules cannot use them.

The mapping is built once at import and never modified.
"""

from __future__ import annotations

from typing import Final

from setpoint.schema.cel.functions import Library
from setpoint.schema.cel.library.formats import FORMAT_LIBRARY
from setpoint.schema.cel.library.lists import LISTS
from setpoint.schema.cel.library.net import NETWORKS
from setpoint.schema.cel.library.optionals import OPTIONALS
from setpoint.schema.cel.library.quantity import QUANTITIES
from setpoint.schema.cel.library.regexes import REGEXES
from setpoint.schema.cel.library.semver import SEMVERS
from setpoint.schema.cel.library.strings import STRINGS
from setpoint.schema.cel.library.urls import URLS
from setpoint.schema.cel.stdlib import STANDARD

KUBERNETES: Final[Library] = (
    STANDARD | OPTIONALS | STRINGS | LISTS | REGEXES | URLS | QUANTITIES | NETWORKS
    | FORMAT_LIBRARY | SEMVERS
)

__all__ = ["KUBERNETES"]
