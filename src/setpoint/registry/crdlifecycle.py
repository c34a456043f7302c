"""The CRD lifecycle in the server: name acceptance and establishment.

A level-triggered loop over the CRDs in the watch cache. For each CRD it computes the status
the CRD should have and writes it through the store (never through storage):

* ``NamesAccepted``: True (``NoConflicts``) unless another CRD of the group, or a built-in
  resource of it, already holds one of its names (``NameConflict``); ``acceptedNames`` are
  then the names on offer. Names a built-in holds are never accepted, so a CRD that would
  shadow a built-in resource is never established nor served, whatever it said before.
* ``Established``: True (``InitialNamesAccepted``) once the names are accepted. From that
  write on, the catalog serves the resource.
* ``KubernetesAPIApprovalPolicyConformant`` (CRDs of ``k8s.io`` and ``kubernetes.io`` groups
  only): whether the ``api-approved.kubernetes.io`` annotation approves the API.
* ``storedVersions``: every version ever used as the storage version.

Establishment stays in the server because the catalog must serve a resource before any
client can see its Established condition (kopf re-reads discovery on that event).

Cleanup on deletion is not done here: a CRD being deleted is left alone, and the CRD
controller (:mod:`setpoint.controllers.crd`, run by :mod:`setpoint.controlplane`) sets its
``Terminating`` condition, deletes its custom resources through the API and removes the
``customresourcecleanup`` finalizer. Without that controller a deleted CRD stays Terminating.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from setpoint.apimachinery import errors, timeutil
from setpoint.apimachinery.clock import Clock
from setpoint.registry import crd
from setpoint.registry import watchcache as wc
from setpoint.registry.catalog import CRD_PREFIX, Catalog
from setpoint.registry.options import WriteOptions

log = logging.getLogger(__name__)

Obj = dict[str, Any]


def _condition(type_: str, status: str, reason: str, message: str, now: str,
               previous: Obj | None) -> Obj:
    if previous and previous.get("status") == status:
        stamp = previous.get("lastTransitionTime", now)
    else:
        stamp = now
    return {"type": type_, "status": status, "lastTransitionTime": stamp, "reason": reason,
            "message": message}


class CRDLifecycle:
    def __init__(self, catalog: Catalog, cache: wc.WatchCache, clock: Clock) -> None:
        self._catalog = catalog
        self._cache = cache
        self._clock = clock
        self._store = catalog.store(crd.GROUP, "customresourcedefinitions")
        self._dirty = asyncio.Event()

    async def run(self) -> None:
        await self._cache.wait_ready()
        watcher = self._cache.watch(CRD_PREFIX, self._cache.revision)
        self._dirty.set()
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self._notice(watcher))
            while True:
                await self._dirty.wait()
                self._dirty.clear()
                failed = False
                for _, obj in list(self._cache.items(CRD_PREFIX)):
                    try:
                        await self.reconcile(obj)
                    except errors.Conflict:
                        self._dirty.set()
                    except errors.NotFound:
                        pass
                    except Exception:
                        log.exception("CRD lifecycle failed for %s",
                                      obj.get("metadata", {}).get("name"))
                        failed = True
                if failed:
                    await asyncio.sleep(1.0)
                    self._dirty.set()

    async def _notice(self, watcher: wc.Watcher) -> None:
        while True:
            event = await watcher.next()
            if event is None:
                # fell behind or was closed: look at everything again
                watcher = self._cache.watch(CRD_PREFIX, self._cache.revision)
            self._dirty.set()

    async def reconcile(self, obj: Obj) -> None:
        """Bring one CRD's status in line (a CRD being deleted is the CRD controller's)."""
        meta = obj["metadata"]
        name = meta["name"]
        if meta.get("deletionTimestamp"):
            return
        status = obj.get("status") or {}
        desired = self.desired_status(obj)
        if desired != status:
            updated = dict(obj)
            updated["status"] = desired
            await self._store.update(None, name, updated, "v1", WriteOptions(),
                                     subresource="status")

    def desired_status(self, obj: Obj) -> Obj:
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        now = timeutil.format_time(self._clock.now())
        previous = {c.get("type"): c for c in status.get("conditions") or []
                    if isinstance(c, dict)}
        names = dict(spec.get("names") or {})
        conflict, builtin = self._conflict(obj, names)
        accepted_before = status.get("acceptedNames") or {}
        if conflict:
            # names accepted once stay accepted (Kubernetes), except a built-in's: those are
            # never this CRD's, whatever an older server accepted
            keep = bool(accepted_before.get("plural")) and not builtin
            accepted = accepted_before if keep else {"plural": "", "kind": ""}
            names_cond = _condition("NamesAccepted", "False", "NameConflict", conflict, now,
                                    previous.get("NamesAccepted"))
        else:
            accepted = names
            names_cond = _condition("NamesAccepted", "True", "NoConflicts",
                                    "no conflicts found", now, previous.get("NamesAccepted"))
        conditions = [names_cond]
        if accepted.get("plural"):
            conditions.insert(0, _condition(
                "Established", "True", "InitialNamesAccepted",
                "the initial names have been accepted", now, previous.get("Established")))
        elif "Established" in previous:
            conditions.insert(0, _condition("Established", "False", "NotAccepted",
                                            "not all names are accepted", now,
                                            previous.get("Established")))
        approval = crd.approval_condition(obj)
        if approval is not None:
            conditions.append(_condition(crd.APPROVAL_CONDITION, *approval, now,
                                         previous.get(crd.APPROVAL_CONDITION)))
        stored = list(status.get("storedVersions") or [])
        for v in spec.get("versions") or []:
            if isinstance(v, dict) and v.get("storage") and v.get("name") not in stored:
                stored.append(v["name"])
        out: Obj = {"conditions": conditions, "acceptedNames": accepted,
                    "storedVersions": stored}
        return out

    def _conflict(self, obj: Obj, names: Obj) -> tuple[str, bool]:
        """Why the names are not accepted (``""``: they are), and whether a built-in
        resource of the group holds them."""
        group = str(obj["spec"].get("group"))
        builtins = crd.builtin_names(group)
        taken = self._catalog.names_in_use(group, str(obj["metadata"]["name"]))
        checks = [("p", names.get("plural")), ("s", names.get("plural")),
                  ("k", names.get("kind")), ("L", names.get("listKind"))]
        checks += [("p", s) for s in names.get("shortNames") or []]
        checks += [("s", s) for s in names.get("shortNames") or []]
        for held, builtin in ((builtins, True), (taken, False)):
            for tag, value in checks:
                if value and f"{tag}:{value}" in held:
                    return f'"{value}" is already in use', builtin
        return "", False
