"""ServiceAccount tokens: what a bound token says, issuing one, and checking one.

A token is a JWT (:mod:`setpoint.auth.jwt`) with Kubernetes' claims::

    iss, sub (system:serviceaccount:<ns>:<name>), aud, iat, nbf, exp, jti,
    kubernetes.io: {namespace, serviceaccount: {name, uid}, pod|secret|node: {name, uid}}

A token authenticates only while its ServiceAccount exists with the same uid, and, when bound
to an object, while that object exists with the uid it was bound to (deleting the pod or the
account revokes the token), as kube-apiserver checks them. Audiences must intersect those the
caller accepts.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from setpoint.auth import jwt
from setpoint.auth import user as users
from setpoint.auth.user import UserInfo

DEFAULT_ISSUER = "https://kubernetes.default.svc.cluster.local"
DEFAULT_EXPIRATION = 3600
MIN_EXPIRATION = 600
CREDENTIAL_ID = "authentication.kubernetes.io/credential-id"
POD_NAME = "authentication.kubernetes.io/pod-name"
POD_UID = "authentication.kubernetes.io/pod-uid"
NODE_NAME = "authentication.kubernetes.io/node-name"
NODE_UID = "authentication.kubernetes.io/node-uid"


class ObjectLookup(Protocol):
    """The uid of a live object, or None when it does not exist."""

    def uid_of(self, kind: str, namespace: str, name: str) -> str | None: ...


@dataclass(frozen=True, slots=True)
class BoundObject:
    kind: str  # Pod, Secret or Node
    name: str
    uid: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenRequest:
    namespace: str
    name: str
    uid: str
    audiences: tuple[str, ...]
    expiration_seconds: int
    bound: BoundObject | None = None


def claims_for(request: TokenRequest, *, issuer: str, now: int) -> dict[str, Any]:
    private: dict[str, Any] = {"namespace": request.namespace,
                               "serviceaccount": {"name": request.name, "uid": request.uid}}
    if request.bound is not None:
        private[request.bound.kind.lower()] = {"name": request.bound.name,
                                               "uid": request.bound.uid}
    return {
        "aud": list(request.audiences),
        "exp": now + request.expiration_seconds,
        "iat": now,
        "iss": issuer,
        "jti": str(uuid.uuid4()),
        "kubernetes.io": private,
        "nbf": now,
        "sub": users.service_account_username(request.namespace, request.name),
    }


class TokenAuthenticator:
    """Turns a ServiceAccount token into its user; None for a token that is not one."""

    def __init__(self, verifier: jwt.Verifier, lookup: ObjectLookup, *, issuer: str,
                 audiences: Sequence[str]) -> None:
        self._verifier = verifier
        self._lookup = lookup
        self.issuer = issuer
        self.audiences = tuple(audiences)

    def authenticate(self, token: str, now: float,
                     audiences: Sequence[str] | None = None) -> UserInfo:
        """The token's user; raises :class:`jwt.InvalidToken` saying why it is refused."""
        claims = self._verifier.verify(token, now)
        if claims.get("iss") != self.issuer:
            raise jwt.InvalidToken("token issuer is not recognised")
        aud = claims.get("aud")
        token_audiences = [aud] if isinstance(aud, str) else \
            [a for a in aud if isinstance(a, str)] if isinstance(aud, list) else []
        wanted = self.audiences if audiences is None else tuple(audiences)
        if not set(token_audiences) & set(wanted):
            raise jwt.InvalidToken("token audiences are invalid")
        private = claims.get("kubernetes.io")
        if not isinstance(private, dict):
            raise jwt.InvalidToken("token lacks its kubernetes.io claims")
        namespace = private.get("namespace")
        account = private.get("serviceaccount") or {}
        name = account.get("name") if isinstance(account, dict) else None
        uid = account.get("uid") if isinstance(account, dict) else None
        if not isinstance(namespace, str) or not isinstance(name, str) or \
                not isinstance(uid, str):
            raise jwt.InvalidToken("token lacks its service account claims")
        if claims.get("sub") != users.service_account_username(namespace, name):
            raise jwt.InvalidToken("token subject does not match its service account")
        live = self._lookup.uid_of("ServiceAccount", namespace, name)
        if live is None:
            raise jwt.InvalidToken(f"service account {namespace}/{name} has been deleted")
        if live != uid:
            raise jwt.InvalidToken(f"service account UID ({uid}) does not match the claim "
                                   f"({live})")
        extra: dict[str, tuple[str, ...]] = {}
        jti = claims.get("jti")
        if isinstance(jti, str) and jti:
            extra[CREDENTIAL_ID] = (f"JTI={jti}",)
        for kind in ("pod", "secret", "node"):
            bound = private.get(kind)
            if not isinstance(bound, dict):
                continue
            bname, buid = bound.get("name"), bound.get("uid")
            ns = "" if kind == "node" else namespace
            if not isinstance(bname, str) or self._lookup.uid_of(
                    kind.capitalize(), ns, bname) != buid:
                raise jwt.InvalidToken(f"the {kind} this token was bound to no longer exists")
            if kind == "pod":
                extra[POD_NAME] = (bname,)
                extra[POD_UID] = (str(buid),)
            elif kind == "node":
                extra[NODE_NAME] = (bname,)
                extra[NODE_UID] = (str(buid),)
        return UserInfo(users.service_account_username(namespace, name), uid,
                        (*users.service_account_groups(namespace), users.ALL_AUTHENTICATED),
                        extra)
