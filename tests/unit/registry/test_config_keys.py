"""ConfigMap and Secret keys are checked as Kubernetes' ``IsConfigMapKey`` does: at most 253
characters of ``[-._a-zA-Z0-9]``, not ``.`` or ``..`` nor starting with ``..``."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from setpoint.apimachinery.fields import FieldPath
from setpoint.registry.core import _validate_config_keys

_KEY = re.compile(r"[-._a-zA-Z0-9]+")


def valid(key: str) -> bool:
    return (len(key) <= 253 and _KEY.fullmatch(key) is not None
            and key not in (".", "..") and not key.startswith(".."))


@given(st.text(alphabet=st.sampled_from("-._aZ09/ \n\u00e9\x00"), max_size=12) | st.text())
def test_keys_are_judged_as_the_pattern_says(key: str) -> None:
    errs = _validate_config_keys({key: "v"}, FieldPath.root("data"))
    assert (errs == []) == valid(key), (key, errs)


def test_a_long_key_is_too_long_not_invalid() -> None:
    [err] = _validate_config_keys({"k" * 254: "v"}, FieldPath.root("data"))
    assert "Too long" in str(err) or "too long" in str(err).lower()
