"""Bearer tokens built to hurt the parser: every shape is a clean :class:`InvalidToken`."""

from __future__ import annotations

import base64
import hashlib
import hmac

import orjson
import pytest
from cryptography.hazmat.primitives import serialization
from hypothesis import given
from hypothesis import strategies as st

from setpoint.auth import jwt
from setpoint.pki import certs

NOW = 1_800_000_000
_KEY = certs.new_key()
_VERIFIER = jwt.Verifier(_KEY.public_key())


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


ES256_HEADER = b64(b'{"alg":"ES256"}')
#: what an HTTP header's undecodable bytes become once read as text (surrogateescape)
UNDECODABLE = st.binary(max_size=40).map(lambda b: b.decode("utf-8", "surrogateescape"))


@given(payload=st.one_of(st.text(max_size=200), UNDECODABLE),
       signature=st.one_of(st.text(max_size=100), UNDECODABLE, st.just("A" * 86)))
def test_a_well_formed_header_with_any_payload_or_signature_is_refused(
        payload: str, signature: str) -> None:
    with pytest.raises(jwt.InvalidToken):
        _VERIFIER.verify(f"{ES256_HEADER}.{payload}.{signature}", NOW)


@given(st.binary(max_size=300))
def test_any_bytes_read_as_a_header_are_refused(data: bytes) -> None:
    with pytest.raises(jwt.InvalidToken):
        _VERIFIER.verify(data.decode("utf-8", "surrogateescape"), NOW)


def test_undecodable_bytes_after_a_valid_header_are_refused_before_the_signature() -> None:
    # each segment is read only once the token is known to be ASCII: these used to reach the
    # signature check and fail encoding its input (a 500 for an unauthenticated request)
    with pytest.raises(jwt.InvalidToken, match="malformed token"):
        _VERIFIER.verify(f"{ES256_HEADER}.\udcff\udcfe.{'A' * 86}", NOW)


@pytest.mark.parametrize("header", [
    b"[" * 10_000 + b"]" * 10_000,           # nested past any parser's depth
    b'{"alg":"none"}', b'{"alg":"HS256"}', b'{"alg":"RS256"}', b'{"alg":null}',
    b'{"alg":"ES256","kid":"someone-else"}', b'{"alg":"ES256","kid":[1]}',
    b'{"alg":"ES256","kid":{"a":1}}', b'{"alg":"ES256","alg":"none"}',
    b'{"alg":' + b"9" * 5000 + b"}", b'{"alg":1e400}',
])
def test_hostile_headers_are_refused(header: bytes) -> None:
    payload = b64(orjson.dumps({"exp": NOW + 600}))
    with pytest.raises(jwt.InvalidToken):
        _VERIFIER.verify(f"{b64(header)}.{payload}.{'A' * 86}", NOW)


def test_a_token_signed_with_the_public_key_as_an_hmac_secret_is_refused() -> None:
    pem = _KEY.public_key().public_bytes(serialization.Encoding.PEM,
                                         serialization.PublicFormat.SubjectPublicKeyInfo)
    signing_input = b64(b'{"alg":"HS256"}') + "." + b64(b'{"exp":9999999999}')
    mac = hmac.new(pem, signing_input.encode(), hashlib.sha256).digest()
    with pytest.raises(jwt.InvalidToken, match="algorithm"):
        _VERIFIER.verify(f"{signing_input}.{b64(mac)}", NOW)


def test_a_token_signed_by_another_key_is_refused() -> None:
    other = jwt.Signer(certs.new_key())
    forged = other.sign({"exp": NOW + 600})
    _, payload, signature = forged.split(".")
    with pytest.raises(jwt.InvalidToken, match="unknown signing key"):
        _VERIFIER.verify(forged, NOW)
    # without its kid it reaches the signature check, which refuses it
    with pytest.raises(jwt.InvalidToken, match="invalid signature"):
        _VERIFIER.verify(f"{ES256_HEADER}.{payload}.{signature}", NOW)
