"""Storage errors as API errors: the one mapping from etcd meanings to ``Status`` answers.

The store maps the errors that name an object itself (a key that exists is 409
AlreadyExists, a missing one 404 NotFound, a lost compare-and-swap a retry or 409 Conflict);
everything else a backend raises goes through :func:`api_error`:

* :class:`~setpoint.storage.interface.Unavailable` (storage unreachable, no etcd leader, a
  call that timed out) is 503 with ``Retry-After``: the client retries, the server recovers
  by itself once storage is back;
* :class:`~setpoint.storage.interface.Expired` (history compacted) is 410 Expired;
* :class:`~setpoint.storage.interface.FutureRevision` is 504 ``Too large resource version``;
* any other :class:`~setpoint.storage.interface.StorageError` (an etcd answer the backend
  does not classify) is 503 too: it says nothing about the request, so a retry is the only
  thing the client can do, and the server never answers it with a 500.

Invariant: total on storage errors; never raises.
"""

from __future__ import annotations

import logging

from setpoint.apimachinery import errors
from setpoint.storage import interface as st

log = logging.getLogger(__name__)

RETRY_AFTER = 1


def api_error(error: st.StorageError) -> errors.ApiError:
    """The API error a request that met ``error`` answers with."""
    if isinstance(error, st.Unavailable):
        return errors.ServiceUnavailable(f"storage is unavailable: {error}",
                                         retry_after=RETRY_AFTER)
    if isinstance(error, st.Expired):
        return errors.too_old_resource_version(error.requested, error.compacted)
    if isinstance(error, st.FutureRevision):
        return errors.Timeout(f"Too large resource version: {error.requested}, current: "
                              f"{error.current}",
                              details={"causes": [{"reason": "ResourceVersionTooLarge",
                                                   "message": "Too large resource version"}]},
                              retry_after=RETRY_AFTER)
    log.warning("storage error answered with 503: %s", error)
    return errors.ServiceUnavailable(f"storage error: {error}", retry_after=RETRY_AFTER)
