"""The served OpenAPI documents, built once per catalog generation and kept until it changes.

* ``/openapi/v2``: one Swagger 2.0 document of everything served, as JSON and as gnostic
  protobuf (:mod:`~setpoint.server.openapi.gnostic`), with an ETag (the SHA-512 of the JSON,
  as kube-openapi computes it; one tag for both forms, the response varies on ``Accept``);
* ``/openapi/v3``: the index of group-versions, each URL with ``?hash=`` of that document's
  content, so kubectl's cache (keyed by URL) refetches exactly the documents that changed;
* ``/openapi/v3/<gv>``: one OpenAPI 3.0 document per group-version.

Cost model: every served resource version becomes a
:class:`~setpoint.server.openapi.fragments.Fragment` once (kept while the catalog serves the same
store, so a CRD change rebuilds one CRD's fragments); its protobuf entries are encoded once
too. When the catalog's generation changes, a document is assembled lazily, on its first
request, from the fragments: merging dictionaries, one JSON serialisation, one hash. A built
document is immutable and shared by every request of that generation.

Threads: :meth:`Documents.snapshot` reads the catalog and must run on the event loop; it is
cheap. The ``build_*`` methods do the work for a given snapshot and may run in a worker
thread, one at a time (the caller serialises them); they only read the snapshot's served
resources, which are immutable. What is built is kept on the snapshot (``Snapshot.v2_json``
...), where callers look first.

Invariants: a document's bytes and ETag never change once built; any change to the served
resources (the catalog's generation) yields new documents on the next request; ``hash`` values
depend only on content. Non-guarantees: a CRD whose definition names are a built-in's (its
group reversed is an ``io.k8s.api`` package) is left out of ``/openapi/v2``, where all names
share one namespace; cost figures are in ``benchmarks/openapi.py``.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from setpoint.apimachinery.clock import Clock
from setpoint.registry.catalog import Catalog, Served
from setpoint.server.openapi import builtins, fragments, gnostic, paths, schemas

log = logging.getLogger(__name__)

Obj = dict[str, Any]
GV = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Rendered:
    """One document in one encoding: immutable bytes and their validators."""

    body: bytes
    etag: str  # quoted, as sent in the ETag header
    last_modified: datetime


def _etag(body: bytes) -> str:
    return '"' + hashlib.sha512(body).hexdigest().upper() + '"'


def gv_path(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


@dataclass(slots=True)
class _Entry:
    """The fragments of one served store, and their encoded v2 entries (made lazily)."""

    served: Served
    fragments: list[fragments.Fragment]
    #: its v2 definitions are named like built-in ones: it stays out of /openapi/v2
    shadowed: bool
    v2_paths: list[tuple[str, bytes]] | None = None
    v2_definitions: list[tuple[str, bytes]] | None = None

    def encoded(self) -> tuple[list[tuple[str, bytes]], list[tuple[str, bytes]]]:
        if self.v2_paths is None or self.v2_definitions is None:
            self.v2_paths = [(p, gnostic.named_path_item(p, item)) for f in self.fragments
                             for p, item in f.v2_paths.items()]
            self.v2_definitions = [(n, gnostic.named_schema(n, s)) for f in self.fragments
                                   for n, s in f.v2_definitions.items()]
        return self.v2_paths, self.v2_definitions


@dataclass(slots=True)
class Snapshot:
    """The served resources of one catalog generation, and what was built from them."""

    generation: int
    served: list[Served]
    built: datetime
    entries: list[_Entry] | None = None
    v2_json: Rendered | None = None
    v2_proto: Rendered | None = None
    v3_root: Rendered | None = None
    v3: dict[GV, Rendered] = field(default_factory=dict)
    hashes: dict[GV, str] | None = None


class Documents:
    """The OpenAPI documents of one catalog; see the module docstring."""

    def __init__(self, catalog: Catalog, data: builtins.Definitions, *, clock: Clock,
                 version: str) -> None:
        self._catalog = catalog
        self._data = data
        self._clock = clock
        self._info = {"title": "Kubernetes", "version": version}
        self._entries: dict[int, _Entry] = {}
        self._snapshot: Snapshot | None = None
        self._shared_v2: dict[str, bytes] = {}
        self._shared_v3: dict[str, Obj] = {}
        self._params_v2: list[bytes] | None = None

    def forget(self) -> None:
        """Drop everything built, as a restart would (for measurements)."""
        self._entries.clear()
        self._shared_v2.clear()
        self._shared_v3.clear()
        self._params_v2 = None
        self._snapshot = None

    def snapshot(self) -> Snapshot:
        """The current generation's snapshot (on the event loop: reads the catalog)."""
        generation = self._catalog.generation
        snap = self._snapshot
        if snap is None or snap.generation != generation:
            served = sorted(self._catalog.all(), key=lambda s: (s.info.group, s.info.resource))
            snap = Snapshot(generation, served, self._clock.now())
            self._snapshot = snap
        return snap

    # --- fragments -------------------------------------------------------------------------

    def _entries_of(self, snap: Snapshot) -> list[_Entry]:
        if snap.entries is not None:
            return snap.entries
        entries: dict[int, _Entry] = {}
        for served in snap.served:
            key = id(served.store)
            entry = self._entries.get(key)
            if entry is None or entry.served.store is not served.store:
                try:
                    found = fragments.of(served, self._data)
                except Exception:  # one resource's schema must never take the documents down
                    log.exception("cannot publish the OpenAPI of %s", served.info.qualified)
                    continue
                shadowed = any(name in self._data.definitions
                               for f in found for name in f.v2_definitions)
                if shadowed:
                    log.warning("the OpenAPI definitions of %s are named like built-in ones; "
                                "left out of /openapi/v2", served.info.qualified)
                entry = _Entry(served, found, shadowed)
            entries[key] = entry
        if snap is self._snapshot:
            self._entries = entries  # only the newest generation's are kept
        snap.entries = list(entries.values())
        return snap.entries

    def _by_gv(self, snap: Snapshot) -> dict[GV, list[fragments.Fragment]]:
        found: dict[GV, list[fragments.Fragment]] = {}
        for entry in self._entries_of(snap):
            for f in entry.fragments:
                found.setdefault((f.group, f.version), []).append(f)
        return found

    # --- v2 --------------------------------------------------------------------------------

    def build_v2_json(self, snap: Snapshot) -> Rendered:
        if snap.v2_json is None:
            own: Obj = {}
            path_items: Obj = {}
            shared: set[str] = set()
            for entry in self._entries_of(snap):
                if entry.shadowed:
                    continue
                for f in entry.fragments:
                    own.update(f.v2_definitions)
                    path_items.update(f.v2_paths)
                    shared.update(f.shared)
            definitions = {name: self._data.definitions[name]
                           for name in self._data.closure(shared)}
            definitions.update(own)
            doc = {"definitions": definitions, "info": self._info,
                   "parameters": self._data.parameters, "paths": path_items, "swagger": "2.0"}
            body = orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)
            snap.v2_json = Rendered(body, _etag(body), snap.built)
        return snap.v2_json

    def build_v2_protobuf(self, snap: Snapshot) -> Rendered:
        if snap.v2_proto is None:
            etag = self.build_v2_json(snap).etag  # one tag for both forms (varies on Accept)
            path_entries: list[tuple[str, bytes]] = []
            definition_entries: list[tuple[str, bytes]] = []
            shared: set[str] = set()
            for entry in self._entries_of(snap):
                if entry.shadowed:
                    continue
                encoded_paths, encoded_definitions = entry.encoded()
                path_entries.extend(encoded_paths)
                definition_entries.extend(encoded_definitions)
                shared.update(name for f in entry.fragments for name in f.shared)
            for name in self._data.closure(shared):
                encoded = self._shared_v2.get(name)
                if encoded is None:
                    encoded = gnostic.named_schema(name, self._data.definitions[name])
                    self._shared_v2[name] = encoded
                definition_entries.append((name, encoded))
            if self._params_v2 is None:
                self._params_v2 = [gnostic.named_parameter(key, param)
                                   for key, param in self._data.parameters.items()]
            body = gnostic.document(self._info, _in_order(path_entries),
                                    _in_order(definition_entries), self._params_v2)
            snap.v2_proto = Rendered(body, etag, snap.built)
        return snap.v2_proto

    # --- v3 --------------------------------------------------------------------------------

    def _hashes(self, snap: Snapshot) -> dict[GV, str]:
        if snap.hashes is None:
            hashes = {}
            for gv, found in self._by_gv(snap).items():
                digest = hashlib.sha256(self._data.kubernetes_version.encode())
                for f in found:
                    digest.update(f.fingerprint.encode())
                hashes[gv] = digest.hexdigest()[:32].upper()
            snap.hashes = hashes
        return snap.hashes

    def build_v3_root(self, snap: Snapshot) -> Rendered:
        if snap.v3_root is None:
            index = {gv_path(g, v): {"serverRelativeURL": f"/openapi/v3/{gv_path(g, v)}?hash={h}"}
                     for (g, v), h in sorted(self._hashes(snap).items())}
            body = orjson.dumps({"paths": index}, option=orjson.OPT_SORT_KEYS)
            snap.v3_root = Rendered(body, _etag(body), snap.built)
        return snap.v3_root

    def build_v3(self, snap: Snapshot, group: str, version: str) -> Rendered | None:
        """The document of one group-version, or ``None`` if nothing is served there."""
        rendered = snap.v3.get((group, version))
        if rendered is not None:
            return rendered
        found = self._by_gv(snap).get((group, version))
        if not found:
            return None
        component_schemas: Obj = {}
        path_items: Obj = {}
        shared: set[str] = set()
        for f in found:
            component_schemas.update(f.v3_definitions)
            path_items.update(paths.to_v3(dict(f.v2_paths), self._data.parameters))
            shared.update(f.shared)
        for name in self._data.closure(shared):
            schema = self._shared_v3.get(name)
            if schema is None:
                schema = self._shared_v3[name] = schemas.to_v3(self._data.definitions[name])
            component_schemas.setdefault(name, schema)
        doc = {"components": {"schemas": component_schemas}, "info": self._info,
               "openapi": "3.0.0", "paths": path_items}
        body = orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)
        rendered = Rendered(body, '"' + self._hashes(snap)[(group, version)] + '"', snap.built)
        snap.v3[(group, version)] = rendered
        return rendered


def _in_order(entries: Iterable[tuple[str, bytes]]) -> list[bytes]:
    seen: dict[str, bytes] = {}
    for name, encoded in entries:
        seen.setdefault(name, encoded)
    return [seen[name] for name in sorted(seen)]
