"""Pruning of unknown fields, compiled: apiextensions' ``pruning.PruneWithOptions``.

Rules (upstream's algorithm, node by node):

* under ``x-kubernetes-preserve-unknown-fields`` unknown fields stay, but fields that *are*
  specified (``properties``, ``additionalProperties``) are pruned by their own schemas;
* an object field is kept if it is in ``properties`` or if ``additionalProperties`` is set
  (a schema, or a boolean: ``true``/``false`` keep the key but prune everything inside the
  value, as there is no schema for it); otherwise it is dropped and its path recorded;
* list items are pruned by ``items`` (no ``items``: every object inside loses all fields);
* ``allOf``/``anyOf``/``oneOf``/``not`` play no part;
* ``apiVersion``, ``kind`` and ``metadata`` of an ``x-kubernetes-embedded-resource`` object
  (and of the resource root) are never pruned by the schema.

As Kubernetes' decoder does next (``objectmeta.Coerce``), the ``metadata`` of an embedded
resource is then reduced to the fields ``ObjectMeta`` knows, and those dropped paths are
reported too; the root ``metadata`` is left to the caller.

Invariants: paths are rendered as Kubernetes renders them for warnings (``spec.foo``,
``spec.items[0].bar``, map keys joined with ``.``), pruning mutates in place, and the path list
a caller gets is sorted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from setpoint.apimachinery.metafields import OBJECT_META_FIELDS
from setpoint.schema.structural import META_FIELDS, Node

PruneFn = Callable[[Any, str, list[str]], None]



def _join(path: str, key: str) -> str:
    return path + "." + key if path else key


def prune_all(value: Any, path: str, out: list[str]) -> None:
    """Prune with no schema: every field of every object inside ``value`` goes."""
    t = type(value)
    if t is dict:
        for k in list(value):
            out.append(_join(path, k))
        value.clear()
    elif t is list:
        for i, item in enumerate(value):
            if type(item) in (dict, list):
                prune_all(item, f"{path}[{i}]", out)


def coerce_embedded_metadata(obj: dict[str, Any], path: str, out: list[str]) -> None:
    """Drop what ``ObjectMeta`` would not keep from an embedded object's ``metadata``."""
    meta = obj.get("metadata")
    if type(meta) is not dict:
        return
    mpath = _join(path, "metadata")
    for k in list(meta):
        if k not in OBJECT_META_FIELDS:
            out.append(mpath + "." + k)
            del meta[k]
        elif meta[k] is None:
            del meta[k]


def compile_pruner(node: Node | None, *, resource_root: bool = False,
                   coerce_metadata: bool = True) -> PruneFn:
    """Compile the pruner for ``node``; ``resource_root`` treats it as embedded (the CR root).

    ``coerce_metadata=False`` gives upstream's bare ``Prune`` (embedded ``metadata`` untouched).
    """
    if node is None:
        return prune_all
    return _build(node, embedded=node.embedded_resource or resource_root, root=resource_root,
                  coerce=coerce_metadata)


def _build(node: Node, embedded: bool, root: bool = False, coerce: bool = True) -> PruneFn:
    props: dict[str, PruneFn] = {}
    if node.properties:
        props = {k: _build(v, v.embedded_resource, coerce=coerce)
                 for k, v in node.properties.items()}
    props_get = props.get
    has_additional = node.additional_properties is not None
    ap = node.additional_schema
    additional: PruneFn | None = None
    if has_additional:
        additional = (_build(ap, ap.embedded_resource, coerce=coerce) if ap is not None
                      else prune_all)
    items_node = node.items
    items: PruneFn = (_build(items_node, items_node.embedded_resource, coerce=coerce)
                      if items_node else prune_all)
    preserve = node.preserve_unknown_fields
    coerce_meta = embedded and not root and coerce

    if preserve:
        skip_items: PruneFn | None = None
        if items_node is not None:
            skip_items = _build_skip(items_node, coerce)

        def prune_preserving(value: Any, path: str, out: list[str]) -> None:
            t = type(value)
            if t is dict:
                for k, v in value.items():
                    if embedded and k in META_FIELDS:
                        continue
                    if type(v) not in (dict, list):
                        continue
                    f = props_get(k)
                    if f is not None:
                        f(v, _join(path, k), out)
                    elif additional is not None:
                        additional(v, _join(path, k), out)
                if coerce_meta:
                    coerce_embedded_metadata(value, path, out)
            elif t is list and skip_items is not None:
                for i, item in enumerate(value):
                    if type(item) in (dict, list):
                        skip_items(item, f"{path}[{i}]", out)

        return prune_preserving

    def prune(value: Any, path: str, out: list[str]) -> None:
        t = type(value)
        if t is dict:
            doomed: list[str] | None = None
            for k, v in value.items():
                if embedded and k in META_FIELDS:
                    continue
                f = props_get(k)
                if f is None:
                    f = additional
                    if f is None:
                        if doomed is None:
                            doomed = []
                        doomed.append(k)
                        continue
                if type(v) in (dict, list):
                    f(v, _join(path, k), out)
            if doomed is not None:
                for k in doomed:
                    if not (k in META_FIELDS and not path):
                        out.append(_join(path, k))
                    del value[k]
            if coerce_meta:
                coerce_embedded_metadata(value, path, out)
        elif t is list:
            for i, item in enumerate(value):
                if type(item) in (dict, list):
                    items(item, f"{path}[{i}]", out)

    return prune


def _build_skip(node: Node, coerce: bool) -> PruneFn | None:
    """``skipPrune`` for the items of a preserving list: like the preserving object branch."""
    if node.preserve_unknown_fields:
        return _build(node, node.embedded_resource, coerce=coerce)
    # skipPrune(x, s) with s not preserving still keeps unknown fields of x itself.
    props: dict[str, PruneFn] = {}
    if node.properties:
        props = {k: _build(v, v.embedded_resource, coerce=coerce)
                 for k, v in node.properties.items()}
    ap = node.additional_schema
    additional: PruneFn | None = None
    if node.additional_properties is not None:
        additional = (_build(ap, ap.embedded_resource, coerce=coerce) if ap is not None
                      else prune_all)
    embedded = node.embedded_resource
    coerce_meta = embedded and coerce
    deeper = _build_skip(node.items, coerce) if node.items is not None else None

    def skip(value: Any, path: str, out: list[str]) -> None:
        t = type(value)
        if t is dict:
            for k, v in value.items():
                if embedded and k in META_FIELDS:
                    continue
                if type(v) not in (dict, list):
                    continue
                f = props.get(k)
                if f is not None:
                    f(v, _join(path, k), out)
                elif additional is not None:
                    additional(v, _join(path, k), out)
            if coerce_meta:
                coerce_embedded_metadata(value, path, out)
        elif t is list and deeper is not None:
            for i, item in enumerate(value):
                if type(item) in (dict, list):
                    deeper(item, f"{path}[{i}]", out)

    return skip


def prune(value: Any, node: Node | None, *, resource_root: bool = False) -> list[str]:
    """Prune ``value`` in place against ``node``; the sorted pruned paths."""
    out: list[str] = []
    compile_pruner(node, resource_root=resource_root)(value, "", out)
    out.sort()
    return out
