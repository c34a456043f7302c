"""What :func:`setpoint.controllers.history.plan` decides for a StatefulSet's or DaemonSet's
revisions: reuse, renumbering, creation with the next number, and trimming that never
removes the current, the update or a live revision."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from setpoint.controllers import history

Obj = dict[str, Any]


def owner(image: str, limit: int | None = None) -> Obj:
    spec: Obj = {"template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": image}]}}}
    if limit is not None:
        spec["revisionHistoryLimit"] = limit
    return {"metadata": {"name": "web", "namespace": "default", "uid": "u"}, "spec": spec}


def revision(image: str, number: int) -> Obj:
    return history.new_revision(owner(image), ("apps/v1", "StatefulSet"), f"web-{image}",
                                "controller.kubernetes.io/hash", image, number)


def never(r: Any) -> bool:
    return False


def test_a_new_template_gets_the_next_number() -> None:
    decided = history.plan(owner("c"), [revision("a", 1), revision("b", 2)], "web-c", never)
    assert decided.update is None
    assert decided.update_number == 3


def test_the_newest_revision_is_kept_as_it_is() -> None:
    revisions = [revision("a", 1), revision("b", 2)]
    decided = history.plan(owner("b"), revisions, "web-b", never)
    assert decided.update is revisions[1]
    assert decided.update_number == 2


def test_a_template_that_comes_back_is_renumbered() -> None:
    revisions = [revision("a", 1), revision("b", 2)]
    decided = history.plan(owner("a"), revisions, "web-a", never)
    assert decided.update is revisions[0]
    assert decided.update_number == 3


def test_the_revision_data_is_the_template_as_a_replace_patch() -> None:
    made = revision("a", 1)
    assert made["data"] == {"spec": {"template": {
        "$patch": "replace", "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "a"}]}}}}
    assert made["metadata"]["labels"] == {"app": "web", "controller.kubernetes.io/hash": "a"}
    assert made["metadata"]["ownerReferences"][0]["controller"] is True


@given(count=st.integers(0, 12), limit=st.integers(0, 4),
       live=st.sets(st.integers(0, 11), max_size=4), current=st.integers(0, 11))
def test_trimming_keeps_the_limit_and_never_what_is_in_use(
        count: int, limit: int, live: set[int], current: int) -> None:
    images = [f"i{n}" for n in range(count)]
    revisions = [revision(image, n + 1) for n, image in enumerate(images)]
    update_image = images[-1] if images else "new"
    in_use = {f"web-i{n}" for n in live}
    decided = history.plan(owner(update_image, limit), revisions, f"web-{update_image}",
                           lambda r: r["metadata"]["name"] in in_use,
                           current_name=f"web-i{current}")
    trimmed = set(decided.trim)
    assert f"web-{update_image}" not in trimmed
    assert f"web-i{current}" not in trimmed
    assert not trimmed & in_use
    kept_spare = [r for r in revisions if r["metadata"]["name"] not in trimmed
                  and r["metadata"]["name"] not in in_use | {f"web-{update_image}",
                                                             f"web-i{current}"}]
    assert len(kept_spare) == min(limit, len(kept_spare) + len(trimmed))
    # the oldest go first
    numbers = {r["metadata"]["name"]: r["revision"] for r in revisions}
    if trimmed and kept_spare:
        assert max(numbers[n] for n in trimmed) < min(r["revision"] for r in kept_spare)
