"""TLS for the API server: the serving context, client certificate verification, rotation.

:class:`ServingTLS` holds the one :class:`ssl.SSLContext` the listening socket uses. It
serves the data directory's serving certificate and asks clients for a certificate signed by
the cluster CA (optional: token and anonymous clients connect without one; the TLS layer
verifies the chain of any certificate offered, and the authenticator reads its subject).
:meth:`ServingTLS.refresh` renews certificates that are due and loads them into the same
context, so new connections get the new certificate without a restart (established ones keep
theirs).

Invariants: TLS 1.2 or newer only; the private key never leaves the data directory; the
context always holds a certificate valid for every configured host name.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Sequence

from setpoint.pki.authority import Authority
from setpoint.pki.certs import KeyPair

log = logging.getLogger(__name__)


class ServingTLS:
    def __init__(self, authority: Authority, hosts: Sequence[str]) -> None:
        self._authority = authority
        self._hosts = list(dict.fromkeys(hosts))
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self.context.verify_mode = ssl.CERT_OPTIONAL
        self.context.load_verify_locations(cadata=authority.ca.cert_pem.decode())
        self._current: KeyPair | None = None
        self.refresh()

    @property
    def certificate(self) -> KeyPair:
        assert self._current is not None
        return self._current

    def refresh(self) -> bool:
        """Renew the serving certificate if due; True when a new one was loaded."""
        pair = self._authority.serving(self._hosts)
        if pair == self._current:
            return False
        cert_path, key_path = self._authority.paths("apiserver")
        self.context.load_cert_chain(cert_path, key_path)
        if self._current is not None:
            log.info("serving certificate renewed; valid until %s", pair.not_after)
        self._current = pair
        return True
