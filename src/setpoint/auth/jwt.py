"""Compact JWS tokens signed with ES256 (ECDSA P-256, SHA-256): ServiceAccount tokens.

Only what ServiceAccount tokens need: one algorithm, one key. Verification checks the
header's algorithm and key id, the signature, and the time claims (``exp``, ``nbf``) with a
little leeway; audience and binding checks are the caller's (they need the API's state).

Invariants: a token that verifies was signed by this key, is not expired, and its payload is
a JSON object whose time claims (``exp`` required, ``nbf``, ``iat``) are NumericDates in
int64's range; anything else raises :class:`InvalidToken` (never another exception, whatever
the input: a compact JWS is ASCII, so a token with any other character, such as the
surrogates an HTTP header's undecodable bytes become, is refused before it is read). What a
refused token costs does not grow with its content beyond one pass over its at most
``MAX_TOKEN`` characters, a JSON parse of its header and one signature check.

A :class:`Verifier` remembers the claims of the last :data:`VERIFIED_TOKENS` tokens whose
signature it checked, keyed by the whole token: the same string again skips the signature
check and the decoding (the bulk of a valid token's cost, since clients send their token
with every request), never the time checks. Only tokens that verified are remembered, so
refused ones cannot fill it; what the caller checks against the API's state (the account
and bound objects still exist) is not remembered here and stays as prompt as before.
"""

from __future__ import annotations

import base64
import binascii
import collections
import hashlib
from typing import Any

import orjson
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import (
    decode_dss_signature,
    encode_dss_signature,
)

ALGORITHM = "ES256"
LEEWAY = 60  # seconds of clock skew tolerated on exp and nbf
MAX_TOKEN = 16 * 1024
MAX_NUMERIC_DATE = 2**63 - 1
#: tokens whose verified claims a Verifier remembers (a token is at most MAX_TOKEN
#: characters; ServiceAccount tokens are about 1 KiB)
VERIFIED_TOKENS = 1024


class InvalidToken(Exception):
    """The token is malformed, forged, expired or not yet valid."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as e:
        raise InvalidToken("malformed token") from e


def key_id(public: ec.EllipticCurvePublicKey) -> str:
    """The ``kid``: the SHA-256 of the DER public key, base64url (as Kubernetes derives it)."""
    der = public.public_bytes(serialization.Encoding.DER,
                              serialization.PublicFormat.SubjectPublicKeyInfo)
    return _b64(hashlib.sha256(der).digest())


def load_private_key(pem: bytes) -> ec.EllipticCurvePrivateKey:
    key = serialization.load_pem_private_key(pem, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
        raise ValueError("service account signing keys must be ECDSA P-256")
    return key


class Signer:
    def __init__(self, private_key: ec.EllipticCurvePrivateKey) -> None:
        self._key = private_key
        self.public_key = private_key.public_key()
        self.kid = key_id(self.public_key)

    def sign(self, claims: dict[str, Any]) -> str:
        header = _b64(orjson.dumps({"alg": ALGORITHM, "kid": self.kid}))
        payload = _b64(orjson.dumps(claims))
        signing_input = f"{header}.{payload}".encode()
        der = self._key.sign(signing_input, ec.ECDSA(hashes.SHA256()))
        r, s = decode_dss_signature(der)
        return f"{header}.{payload}.{_b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"

    def jwk(self) -> dict[str, str]:
        """The public key as a JWK (for /openid/v1/jwks)."""
        numbers = self.public_key.public_numbers()
        return {"kty": "EC", "crv": "P-256", "alg": ALGORITHM, "use": "sig", "kid": self.kid,
                "x": _b64(numbers.x.to_bytes(32, "big")),
                "y": _b64(numbers.y.to_bytes(32, "big"))}


class Verifier:
    def __init__(self, public_key: ec.EllipticCurvePublicKey, *,
                 remembered: int = VERIFIED_TOKENS) -> None:
        if remembered < 0:
            raise ValueError("remembered must be >= 0")
        self._key = public_key
        self.kid = key_id(public_key)
        self._bound = remembered
        self._verified: collections.OrderedDict[str, dict[str, Any]] = \
            collections.OrderedDict()
        #: signatures checked (a remembered token's repeats are not)
        self.signature_checks = 0

    def verify(self, token: str, now: float) -> dict[str, Any]:
        """The claims of a valid token; raises :class:`InvalidToken` otherwise. The claims
        of a remembered token are shared between calls: the caller must not change them."""
        claims = self._verified.get(token)
        if claims is not None:
            self._verified.move_to_end(token)
        else:
            claims = self._checked_claims(token)
            if self._bound:
                self._verified[token] = claims
                if len(self._verified) > self._bound:
                    self._verified.popitem(last=False)
        exp = claims["exp"]
        if now > exp + LEEWAY:
            raise InvalidToken("token has expired")
        nbf = claims.get("nbf")
        if nbf is not None and now + LEEWAY < nbf:
            raise InvalidToken("token is not valid yet")
        return claims

    def _checked_claims(self, token: str) -> dict[str, Any]:
        """The claims of a token signed with this key whose time claims are NumericDates
        (``exp`` among them); raises :class:`InvalidToken` otherwise."""
        if len(token) > MAX_TOKEN or not token.isascii() or token.count(".") != 2:
            raise InvalidToken("malformed token")
        header_b64, payload_b64, signature_b64 = token.split(".")
        try:
            header = orjson.loads(_unb64(header_b64))
        except orjson.JSONDecodeError as e:
            raise InvalidToken("malformed token header") from e
        if not isinstance(header, dict) or header.get("alg") != ALGORITHM:
            raise InvalidToken("unsupported signing algorithm")
        if header.get("kid") not in (None, self.kid):
            raise InvalidToken("unknown signing key")
        signature = _unb64(signature_b64)
        if len(signature) != 64:
            raise InvalidToken("invalid signature")
        self.signature_checks += 1
        der = encode_dss_signature(int.from_bytes(signature[:32], "big"),
                                   int.from_bytes(signature[32:], "big"))
        try:
            self._key.verify(der, f"{header_b64}.{payload_b64}".encode(),
                             ec.ECDSA(hashes.SHA256()))
        except InvalidSignature as e:
            raise InvalidToken("invalid signature") from e
        try:
            claims = orjson.loads(_unb64(payload_b64))
        except orjson.JSONDecodeError as e:
            raise InvalidToken("malformed token payload") from e
        if not isinstance(claims, dict):
            raise InvalidToken("malformed token payload")
        for name in ("exp", "nbf", "iat"):
            if name in claims and not _numeric_date(claims[name]):
                raise InvalidToken(f"malformed token: {name} is not a NumericDate")
        if "exp" not in claims:
            raise InvalidToken("token has expired")
        return claims


def _numeric_date(value: object) -> bool:
    """Whether ``value`` is a JWT NumericDate: seconds since the epoch that fit an int64, as
    Kubernetes reads them (a string, a boolean or a number beyond that range is not one)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and \
        -MAX_NUMERIC_DATE <= value <= MAX_NUMERIC_DATE
