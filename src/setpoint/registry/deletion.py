"""What a DELETE asks of the garbage collector: the ``orphan`` and ``foregroundDeletion``
finalizers, from the DeleteOptions (Kubernetes' ``deletionFinalizersForGarbageCollection``).

* ``propagationPolicy: Orphan`` (or the old ``orphanDependents: true``) puts ``orphan`` on the
  object: the garbage collector removes the object's references from its dependents, then
  the finalizer.
* ``propagationPolicy: Foreground`` puts ``foregroundDeletion`` on it: the garbage collector
  deletes the dependents first (those with ``blockOwnerDeletion`` hold the owner until they
  are gone), then removes the finalizer.
* ``Background`` (``orphanDependents: false``) removes both: the object goes at once (unless
  other finalizers hold it) and the garbage collector deletes its dependents afterwards.
* No policy keeps whichever of the two the object already carries (a repeated DELETE does not
  change the mode); with neither, the default is Background.

Invariants: the two finalizers are never both set; other finalizers keep their order; when
the set does not change, the object's own order is kept (so the caller can tell a no-op).

Non-guarantees: this only decides the finalizers. Without a running garbage collector they
would hold the object forever, which is why the server installs this hook only when one runs.
"""

from __future__ import annotations

from typing import Any

from setpoint.registry.options import DeleteOptions

ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"


def _should_orphan(existing: list[str], opts: DeleteOptions) -> bool:
    if opts.orphan_dependents is not None:
        return opts.orphan_dependents
    if opts.propagation_policy is not None:
        return opts.propagation_policy == "Orphan"
    return ORPHAN in existing


def _should_foreground(existing: list[str], opts: DeleteOptions) -> bool:
    if opts.orphan_dependents is not None:
        return False
    if opts.propagation_policy is not None:
        return opts.propagation_policy == "Foreground"
    return FOREGROUND in existing and ORPHAN not in existing


def gc_finalizers(obj: dict[str, Any], opts: DeleteOptions) -> list[str]:
    """The finalizers ``obj`` carries once a DELETE with ``opts`` has marked it."""
    existing = [f for f in (obj.get("metadata") or {}).get("finalizers") or []
                if isinstance(f, str)]
    wanted = [f for f in existing if f not in (ORPHAN, FOREGROUND)]
    if _should_orphan(existing, opts):
        wanted.append(ORPHAN)
    elif _should_foreground(existing, opts):
        wanted.append(FOREGROUND)
    if set(wanted) == set(existing):
        return existing
    return wanted
