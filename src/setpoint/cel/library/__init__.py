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

from setpoint.cel.functions import Library
from setpoint.cel.library.formats import FORMAT_LIBRARY
from setpoint.cel.library.lists import LISTS
from setpoint.cel.library.net import NETWORKS
from setpoint.cel.library.optionals import OPTIONALS
from setpoint.cel.library.quantity import QUANTITIES
from setpoint.cel.library.regexes import REGEXES
from setpoint.cel.library.semver import SEMVERS
from setpoint.cel.library.strings import STRINGS
from setpoint.cel.library.urls import URLS
from setpoint.cel.stdlib import STANDARD

KUBERNETES: Final[Library] = (
    STANDARD | OPTIONALS | STRINGS | LISTS | REGEXES | URLS | QUANTITIES | NETWORKS
    | FORMAT_LIBRARY | SEMVERS
)

__all__ = ["KUBERNETES"]
