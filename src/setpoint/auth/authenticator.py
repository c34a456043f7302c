"""Who sent a request: client certificate, bearer token, or nobody.

The order and outcomes follow kube-apiserver:

1. a client certificate the TLS layer verified against the cluster CA names the user (CN)
   and groups (O);
2. otherwise a ``Bearer`` token is tried against the static tokens, then as a ServiceAccount
   token; a token that none accepts is a 401 (never anonymous);
3. a request with no credentials is ``system:anonymous`` only on the public health and
   version paths; anywhere else it is a 401.

Every authenticated user is also in ``system:authenticated``. Other schemes (``Basic``) are
not credentials here, as Kubernetes removed them.

The user a certificate names is remembered by its DER bytes (at most
``CERTIFICATE_SUBJECTS`` of them, the least recently used forgotten): a connection presents
the same certificate at each of its requests, and reading its subject again each time was a
measurable part of every request.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from cryptography import x509

from setpoint.auth import jwt
from setpoint.auth import user as users
from setpoint.auth.serviceaccounts import TokenAuthenticator
from setpoint.auth.tokenfile import StaticTokens
from setpoint.auth.user import UserInfo
from setpoint.pki import certs

#: paths anonymous requests may reach (and their sub-paths, such as /readyz/ping)
ANONYMOUS_PATHS = ("/healthz", "/livez", "/readyz", "/version")
#: certificates whose user is remembered
CERTIFICATE_SUBJECTS: Final = 1024


class Unauthenticated(Exception):
    """Credentials were presented and refused, or are needed and missing."""


@dataclass(frozen=True, slots=True)
class Credentials:
    peer_certificate: bytes | None = None  # DER, already verified by the TLS layer
    authorization: str | None = None


def anonymous_allowed(path: str) -> bool:
    return any(path == p or path.startswith(p + "/") for p in ANONYMOUS_PATHS)


def bearer_token(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    token = token.strip()
    return token or ""


class Authenticator:
    def __init__(self, *, static_tokens: StaticTokens | None = None,
                 service_accounts: TokenAuthenticator | None = None,
                 now: Callable[[], float],
                 certificate_subjects: int = CERTIFICATE_SUBJECTS) -> None:
        if certificate_subjects < 1:
            raise ValueError("certificate_subjects must be >= 1")
        self._bound = certificate_subjects
        self._static = static_tokens
        self._accounts = service_accounts
        self._now = now
        self._subjects: collections.OrderedDict[bytes, UserInfo] = collections.OrderedDict()

    def authenticate_token(self, token: str,
                           audiences: Sequence[str] | None = None) -> UserInfo:
        """The user a bearer token stands for; raises :class:`Unauthenticated`."""
        if self._static is not None and audiences is None:
            found = self._static.authenticate(token)
            if found is not None:
                return found
        if self._accounts is not None and token.count(".") == 2:
            try:
                return self._accounts.authenticate(token, self._now(), audiences)
            except jwt.InvalidToken as e:
                raise Unauthenticated(str(e)) from e
        raise Unauthenticated("invalid bearer token")

    def _certificate_user(self, der: bytes) -> UserInfo:
        known = self._subjects.get(der)
        if known is not None:
            self._subjects.move_to_end(der)
            return known
        try:
            # the subject is parsed lazily: a name TLS let through (OpenSSL does not check a
            # UTF8String's bytes) may still be unreadable here, as Go's parser refuses it
            name, groups = certs.subject_of(x509.load_der_x509_certificate(der))
        except ValueError as e:
            raise Unauthenticated("unreadable client certificate") from e
        if not name:
            raise Unauthenticated("client certificate has no common name")
        user = UserInfo(name, groups=(*groups, users.ALL_AUTHENTICATED))
        self._subjects[der] = user
        if len(self._subjects) > self._bound:
            self._subjects.popitem(last=False)
        return user

    def authenticate(self, credentials: Credentials, path: str) -> UserInfo:
        if credentials.peer_certificate is not None:
            return self._certificate_user(credentials.peer_certificate)
        token = bearer_token(credentials.authorization)
        if token is not None:
            return self.authenticate_token(token)
        if anonymous_allowed(path):
            return users.anonymous()
        raise Unauthenticated("no credentials")
