"""Bearer tokens built to hurt the parser: every shape is a clean :class:`InvalidToken`."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac

import orjson
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from hypothesis import given
from hypothesis import strategies as st

from setpoint.auth import impersonation, jwt
from setpoint.auth.authenticator import Authenticator, Credentials, Unauthenticated
from setpoint.auth.serviceaccounts import TokenAuthenticator
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


# -- tokens signed by the server's own key whose claims are of the wrong shapes -------------

ISSUER = "https://kubernetes.default.svc.cluster.local"
_SIGNER = jwt.Signer(_KEY)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) |
    st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=12)


class Lookup:
    def uid_of(self, kind: str, namespace: str, name: str) -> str | None:
        live = {("ServiceAccount", "team", "bot"): "sa-uid", ("Pod", "team", "p"): "pod-uid"}
        return live.get((kind, namespace, name))


def valid_claims() -> dict[str, object]:
    return {"iss": ISSUER, "aud": [ISSUER], "exp": NOW + 600, "nbf": NOW, "iat": NOW,
            "sub": "system:serviceaccount:team:bot", "jti": "j",
            "kubernetes.io": {"namespace": "team",
                              "serviceaccount": {"name": "bot", "uid": "sa-uid"},
                              "pod": {"name": "p", "uid": "pod-uid"}}}


CLAIM_PATHS = [("iss",), ("aud",), ("exp",), ("nbf",), ("iat",), ("sub",), ("jti",),
               ("kubernetes.io",), ("kubernetes.io", "namespace"),
               ("kubernetes.io", "serviceaccount"), ("kubernetes.io", "serviceaccount", "uid"),
               ("kubernetes.io", "pod"), ("kubernetes.io", "pod", "name"),
               ("kubernetes.io", "pod", "uid"), ("kubernetes.io", "node")]


@given(path=st.sampled_from(CLAIM_PATHS), value=JSON)
def test_signed_claims_of_any_shape_authenticate_or_are_refused_cleanly(
        path: tuple[str, ...], value: object) -> None:
    claims = valid_claims()
    where: dict[str, object] = claims
    for key in path[:-1]:
        where = where[key]  # type: ignore[assignment]
    where[path[-1]] = value
    accounts = TokenAuthenticator(_VERIFIER, Lookup(), issuer=ISSUER, audiences=[ISSUER])
    try:
        user = accounts.authenticate(_SIGNER.sign(claims), NOW)
    except jwt.InvalidToken:
        return
    assert user.name == "system:serviceaccount:team:bot"
    assert user.uid == "sa-uid"


@pytest.mark.parametrize(("claim", "value", "why"), [
    ("aud", [{"a": 1}, [ISSUER]], "audiences are invalid"),
    ("exp", "9999999999", "exp is not a NumericDate"),
    ("exp", 1e300, "exp is not a NumericDate"),
    ("exp", True, "exp is not a NumericDate"),
    ("exp", None, "exp is not a NumericDate"),
    ("nbf", "later", "nbf is not a NumericDate"),
    ("nbf", NOW + 3600, "not valid yet"),
    ("iat", [NOW], "iat is not a NumericDate"),
])
def test_claims_kubernetes_would_not_read_are_refused(claim: str, value: object,
                                                       why: str) -> None:
    accounts = TokenAuthenticator(_VERIFIER, Lookup(), issuer=ISSUER, audiences=[ISSUER])
    with pytest.raises(jwt.InvalidToken, match=why):
        accounts.authenticate(_SIGNER.sign({**valid_claims(), claim: value}), NOW)
    assert accounts.authenticate(_SIGNER.sign(valid_claims()), NOW).uid == "sa-uid"


# -- impersonation headers that are not UTF-8 -----------------------------------------------

@pytest.mark.parametrize("header", ["Impersonate-User", "Impersonate-Group", "Impersonate-Uid",
                                    "Impersonate-Extra-scopes"])
def test_impersonation_values_that_are_not_utf8_are_refused(header: str) -> None:
    undecodable = b"\xff\xfe".decode("utf-8", "surrogateescape")
    user = [] if header == "Impersonate-User" else [("Impersonate-User", "bob")]
    with pytest.raises(impersonation.ImpersonationError, match="not valid UTF-8"):
        impersonation.parse([*user, (header, undecodable)])
    assert impersonation.parse([*user, (header, "é")]) is not None


# -- client certificates the TLS layer let through ------------------------------------------

def test_a_client_certificate_whose_subject_is_not_utf8_is_refused() -> None:
    now = dt.datetime.now(dt.UTC)
    pair = certs.issue(certs.new_ca("ca", now=now), common_name="bobXYZ", usage="client",
                       now=now, organizations=["grpQQQ"])
    der = x509.load_pem_x509_certificate(pair.cert_pem).public_bytes(
        serialization.Encoding.DER)
    auth = Authenticator(now=lambda: NOW)
    assert auth.authenticate(Credentials(peer_certificate=der), "/api").name == "bobXYZ"
    for bad in (der.replace(b"bobXYZ", b"bob\xff\xfeZ"), der.replace(b"grpQQQ", b"grp\xc0\x80Q")):
        with pytest.raises(Unauthenticated, match="unreadable client certificate"):
            auth.authenticate(Credentials(peer_certificate=bad), "/api")
