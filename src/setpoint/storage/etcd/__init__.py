"""The etcd backend; see :mod:`setpoint.storage.etcd.backend`.

Importing it needs the ``aetcd`` client (and with it ``grpcio``); the rest of
:mod:`setpoint.storage` does not, so :func:`~setpoint.storage.create_backend` imports this
package only for ``kind="etcd"``.
"""

from setpoint.storage.etcd.backend import EtcdBackend
from setpoint.storage.etcd.watch import EtcdWatch
from setpoint.storage.interface import Progress  # where it lives; kept here for importers

__all__ = ["EtcdBackend", "EtcdWatch", "Progress"]
