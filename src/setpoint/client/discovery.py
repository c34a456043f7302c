"""Which resources a server serves: legacy discovery, cached, refreshed on a miss.

:class:`ResourceRef` names one served resource (group, version, plural, kind, scope,
subresources) and builds its URL paths. :class:`Discovery` answers three lookups:

- :meth:`Discovery.resolve` by ``(apiVersion, kind)``: reads only that group version
  (``/api/v1`` or ``/apis/{group}/{version}``);
- :meth:`Discovery.find` by plural, singular, short name or kind, optionally qualified as
  ``plural.group`` or ``plural.version.group`` (kubectl's forms): reads every group version
  (``/api``, ``/apis``, then each one, a bounded number at a time);
- :meth:`Discovery.resources` for one group version.

Invariants:

- A lookup that misses the cache refreshes what it needs **once** and then either answers or
  raises :class:`NoMatchError` — a ``LookupError``, deliberately not an ``ApiError``, so "this
  kind is not served (yet)" is never confused with "this object does not exist".
- Subresource entries (``widgets/status``) are folded into their parent's ``subresources``.
- Without an explicit version, :meth:`find` uses each group's preferred version. Plural and
  singular names beat short names, which beat kinds; among equal matches the core group
  wins, then the groups in the server's order.
- A group version that fails to load during a full refresh (an unavailable aggregated API)
  is recorded in :attr:`Discovery.failed` and skipped; the others still load.

Non-guarantees: aggregated discovery (``apidiscovery.k8s.io``) is not used; nothing expires by
time — call :meth:`Discovery.refresh` or :meth:`Discovery.invalidate` after installing CRDs
if a stale positive answer matters (a stale *miss* refreshes itself).
"""

from __future__ import annotations

import asyncio
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from setpoint.apimachinery import errors

GetJSON = Callable[[str], Awaitable[Any]]


class NoMatchError(LookupError):
    """No served resource matches the lookup (also after refreshing discovery)."""


def _quote(segment: str) -> str:
    if not segment:
        raise ValueError("a path segment must not be empty")
    return urllib.parse.quote(segment, safe="")


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceRef:
    """One served resource in one version; ``group`` is ``""`` for the core group."""

    group: str
    version: str
    resource: str
    kind: str
    namespaced: bool
    subresources: frozenset[str] = frozenset()
    verbs: frozenset[str] = frozenset()
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    def path(self, *, namespace: str | None = None, name: str | None = None,
             subresource: str | None = None) -> str:
        """The URL path of the collection, or of one object when ``name`` is given.

        ``namespace`` is ignored for cluster-scoped resources; for a namespaced resource,
        ``None`` addresses all namespaces (valid for list and watch only).
        """
        parts = [_group_version_path(self.group, self.version)]
        if self.namespaced and namespace is not None:
            parts.append(f"namespaces/{_quote(namespace)}")
        parts.append(self.resource)
        if name is not None:
            parts.append(_quote(name))
            if subresource is not None:
                parts.append(_quote(subresource))
        elif subresource is not None:
            raise ValueError("a subresource needs an object name")
        return "/".join(parts)

    def matches(self, name: str) -> int:
        """How well ``name`` names this resource: 3 plural/singular, 2 short, 1 kind, 0 not."""
        lowered = name.lower()
        if not lowered:
            return 0
        if lowered == self.resource or lowered == self.singular:
            return 3
        if lowered in self.short_names:
            return 2
        if lowered == self.kind.lower():
            return 1
        return 0


def parse_api_version(api_version: str) -> tuple[str, str]:
    """``"apps/v1"`` → ``("apps", "v1")``; ``"v1"`` → ``("", "v1")``."""
    group, _, version = api_version.rpartition("/")
    if not version or "/" in group:
        raise ValueError(f"invalid apiVersion {api_version!r}")
    return group, version


def _group_version_path(group: str, version: str) -> str:
    return f"/apis/{group}/{version}" if group else f"/api/{version}"


def refs_from_resource_list(group: str, version: str,
                            document: Mapping[str, Any]) -> tuple[ResourceRef, ...]:
    """The resources of one ``APIResourceList``, subresources folded into their parents."""
    entries = [e for e in document.get("resources") or [] if isinstance(e, Mapping)]
    subresources: dict[str, set[str]] = {}
    for entry in entries:
        parent, slash, sub = str(entry.get("name", "")).partition("/")
        if slash:
            subresources.setdefault(parent, set()).add(sub)
    refs: list[ResourceRef] = []
    for entry in entries:
        name = str(entry.get("name", ""))
        if not name or "/" in name:
            continue
        refs.append(ResourceRef(
            group=group, version=version, resource=name, kind=str(entry.get("kind", "")),
            namespaced=bool(entry.get("namespaced", False)),
            subresources=frozenset(subresources.get(name, ())),
            verbs=frozenset(entry.get("verbs") or ()),
            singular=str(entry.get("singularName") or ""),
            short_names=tuple(entry.get("shortNames") or ()),
            categories=tuple(entry.get("categories") or ())))
    return tuple(refs)


class Discovery:
    """A cache of the server's discovery documents; see the module docstring for the rules."""

    def __init__(self, get: GetJSON, *, concurrency: int = 8) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self._get = get
        self._concurrency = concurrency
        self._lock = asyncio.Lock()
        #: group version ("v1", "apps/v1") -> its resources; () when not served
        self._by_gv: dict[str, tuple[ResourceRef, ...]] = {}
        #: groups in server order, versions preferred first; None until a full load
        self._groups: list[tuple[str, list[str]]] | None = None
        self.failed: dict[str, errors.ApiError] = {}

    def invalidate(self) -> None:
        """Forget everything; the next lookup reads discovery again."""
        self._by_gv.clear()
        self._groups = None
        self.failed = {}

    async def _fetch_group_version(self, group: str, version: str) -> tuple[ResourceRef, ...]:
        try:
            document = await self._get(_group_version_path(group, version))
        except errors.NotFound:
            return ()
        return refs_from_resource_list(group, version, document or {})

    async def resources(self, api_version: str, *, refresh: bool = False
                        ) -> tuple[ResourceRef, ...]:
        """The resources served in one group version (empty when it is not served)."""
        group, version = parse_api_version(api_version)
        key = f"{group}/{version}" if group else version
        if not refresh and key in self._by_gv:
            return self._by_gv[key]
        refs = await self._fetch_group_version(group, version)
        self._by_gv[key] = refs
        return refs

    async def resolve(self, api_version: str, kind: str) -> ResourceRef:
        """The resource serving ``kind`` in ``api_version``; refreshes that version on a miss."""
        group, version = parse_api_version(api_version)
        key = f"{group}/{version}" if group else version
        cached = key in self._by_gv
        for attempt in range(2):
            refs = await self.resources(api_version, refresh=attempt > 0)
            for ref in refs:
                if ref.kind == kind:
                    return ref
            if not cached:
                break
        raise NoMatchError(f'no matches for kind "{kind}" in version "{api_version}"')

    async def refresh(self) -> None:
        """Read every group version again (``/api``, ``/apis`` and each one)."""
        async with self._lock:
            await self._load_all()

    async def _load_all(self) -> None:
        core = await self._get("/api") or {}
        groups: list[tuple[str, list[str]]] = [("", [str(v) for v in core.get("versions", [])])]
        listing = await self._get("/apis") or {}
        for entry in listing.get("groups") or []:
            versions = [str(v.get("version")) for v in entry.get("versions") or []]
            preferred = (entry.get("preferredVersion") or {}).get("version")
            if preferred in versions:
                versions.remove(preferred)
                versions.insert(0, preferred)
            groups.append((str(entry.get("name", "")), versions))
        failed: dict[str, errors.ApiError] = {}
        limit = asyncio.Semaphore(self._concurrency)
        by_gv: dict[str, tuple[ResourceRef, ...]] = {}

        async def load(group: str, version: str) -> None:
            key = f"{group}/{version}" if group else version
            async with limit:
                try:
                    by_gv[key] = await self._fetch_group_version(group, version)
                except errors.ApiError as e:
                    failed[key] = e

        async with asyncio.TaskGroup() as tasks:
            for group, versions in groups:
                for version in versions:
                    tasks.create_task(load(group, version))
        self._by_gv = by_gv
        self._groups = groups
        self.failed = failed

    def _search(self, name: str) -> ResourceRef | None:
        assert self._groups is not None
        resource, _, qualifier = name.partition(".")
        wanted: list[tuple[str, str]] = []  # (group, version) pairs to search, in order
        if qualifier:
            version, _, group = qualifier.partition(".")
            for g, versions in self._groups:
                if g == group and version in versions:
                    wanted = [(g, version)]
                    break
            else:
                wanted = [(g, vs[0]) for g, vs in self._groups if g == qualifier and vs]
        else:
            wanted = [(g, vs[0]) for g, vs in self._groups if vs]
        best: tuple[int, ResourceRef] | None = None
        for group, version in wanted:
            for ref in self._by_gv.get(f"{group}/{version}" if group else version, ()):
                score = ref.matches(resource)
                if score and (best is None or score > best[0]):
                    best = (score, ref)
        return best[1] if best else None

    async def find(self, name: str) -> ResourceRef:
        """The resource ``name`` names, as kubectl would pick it (``cm``, ``deployments.apps``)."""
        if not name:
            raise ValueError("a resource name must not be empty")
        async with self._lock:
            loaded_now = self._groups is None
            if loaded_now:
                await self._load_all()
            found = self._search(name)
            if found is None and not loaded_now:
                await self._load_all()
                found = self._search(name)
        if found is None:
            note = ""
            if self.failed:
                note = " (discovery failed for " + ", ".join(sorted(self.failed)) + ")"
            raise NoMatchError(f'the server doesn\'t have a resource type "{name}"{note}')
        return found

    async def all(self) -> list[ResourceRef]:
        """Every resource in each group's preferred version, core group first."""
        async with self._lock:
            if self._groups is None:
                await self._load_all()
            assert self._groups is not None
            return [ref for group, versions in self._groups if versions
                    for ref in self._by_gv.get(f"{group}/{versions[0]}" if group
                                               else versions[0], ())]

