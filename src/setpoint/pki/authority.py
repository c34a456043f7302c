"""A data directory's certificate authority and the certificates it issued.

Layout (``<data-dir>/pki``, 0700; every key 0600)::

    ca.crt ca.key            the cluster CA (10 years): signs every certificate below
    apiserver.crt .key       the serving certificate, SANs for every name the server answers on
    sa.key                   the key that signs ServiceAccount tokens
    <name>.crt .key          client certificates (the admin's, each built-in controller's)

:meth:`Authority.serving` and :meth:`Authority.client` return a current certificate, issuing
a new one when there is none, when it was not signed by this CA, when it is due for renewal
(less than a third of its lifetime left), or when it lacks a requested host name or group.
Renewal is therefore just calling them again: the server does so periodically and reloads
its TLS context.

Several servers may share one directory (servers on one etcd must: one CA for every
kubeconfig, one key for every ServiceAccount token): everything that creates or replaces a
file holds an exclusive lock on ``.lock`` in it, so concurrent starts agree on one CA.

Non-guarantee: the CA itself is never rotated automatically (a new CA would invalidate every
kubeconfig); it lives ten years.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from setpoint.pki import certs, files
from setpoint.pki.certs import KeyPair

Now = Callable[[], dt.datetime]

CA_VALIDITY = dt.timedelta(days=3650)
LEAF_VALIDITY = dt.timedelta(days=365)


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class Authority:
    def __init__(self, directory: Path, *, now: Now = _utcnow,
                 leaf_validity: dt.timedelta = LEAF_VALIDITY) -> None:
        self.directory = directory
        self._now = now
        self._leaf_validity = leaf_validity
        files.private_dir(directory)
        with self._locked():
            self.ca = self._load_or_create_ca()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Exclusive among every process using this directory (blocking, briefly)."""
        fd = os.open(self.directory / ".lock", os.O_RDWR | os.O_CREAT, files.FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    @property
    def ca_path(self) -> Path:
        return self.directory / "ca.crt"

    def _read(self, name: str) -> KeyPair | None:
        try:
            return KeyPair((self.directory / f"{name}.crt").read_bytes(),
                           (self.directory / f"{name}.key").read_bytes())
        except FileNotFoundError:
            return None

    def _write(self, name: str, pair: KeyPair) -> None:
        files.write_private(self.directory / f"{name}.key", pair.key_pem)
        files.write_private(self.directory / f"{name}.crt", pair.cert_pem)

    def _load_or_create_ca(self) -> KeyPair:
        found = self._read("ca")
        if found is not None:
            return found
        pair = certs.new_ca("setpoint-ca", now=self._now(), validity=CA_VALIDITY)
        self._write("ca", pair)
        return pair

    def due(self, pair: KeyPair) -> bool:
        """Less than a third of the certificate's lifetime is left (or it expired)."""
        lifetime = pair.not_after - pair.not_before
        return pair.not_after - self._now() < lifetime / 3

    def paths(self, name: str) -> tuple[Path, Path]:
        return self.directory / f"{name}.crt", self.directory / f"{name}.key"

    def serving(self, hosts: Sequence[str]) -> KeyPair:
        """The serving certificate, valid for every name in ``hosts``."""
        with self._locked():
            return self._serving(hosts)

    def _serving(self, hosts: Sequence[str]) -> KeyPair:
        current = self._read("apiserver")
        if current is not None and certs.signed_by(current, self.ca) and not self.due(current) \
                and set(hosts) <= certs.san_hosts(current.certificate):
            return current
        wanted = list(hosts)
        if current is not None and certs.signed_by(current, self.ca):
            wanted += sorted(certs.san_hosts(current.certificate) - set(hosts))
        pair = certs.issue(self.ca, common_name="setpoint-apiserver", usage="server",
                           now=self._now(), validity=self._leaf_validity, hosts=wanted)
        self._write("apiserver", pair)
        return pair

    def client(self, name: str, user: str, groups: Sequence[str] = ()) -> KeyPair:
        """A client certificate for ``user`` in ``groups``, kept as ``<name>.crt``."""
        with self._locked():
            return self._client(name, user, groups)

    def _client(self, name: str, user: str, groups: Sequence[str]) -> KeyPair:
        current = self._read(name)
        if current is not None and certs.signed_by(current, self.ca) and not self.due(current) \
                and certs.subject_of(current.certificate) == (user, tuple(groups)):
            return current
        pair = certs.issue(self.ca, common_name=user, organizations=groups, usage="client",
                           now=self._now(), validity=self._leaf_validity)
        self._write(name, pair)
        return pair

    def signing_key(self) -> bytes:
        """The PEM private key that signs ServiceAccount tokens (made on first use)."""
        path = self.directory / "sa.key"
        with self._locked():
            try:
                return path.read_bytes()
            except FileNotFoundError:
                pem = certs.key_pem(certs.new_key())
                files.write_private(path, pem)
                return pem

    def generated(self, name: str, make: Callable[[], bytes]) -> Path:
        """``<dir>/<name>``, written with ``make()`` (0600) by the first process to ask."""
        path = self.directory / name
        with self._locked():
            if not path.exists():
                files.write_private(path, make())
        return path
