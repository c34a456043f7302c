"""ServiceAccount tokens, static tokens, the authenticator chain and impersonation."""

from __future__ import annotations

import base64
import datetime as dt

import orjson
import pytest
from cryptography.hazmat.primitives import serialization
from hypothesis import given
from hypothesis import strategies as st

from setpoint.auth import impersonation, jwt
from setpoint.auth import user as users
from setpoint.auth.authenticator import Authenticator, Credentials, Unauthenticated
from setpoint.auth.serviceaccounts import (
    BoundObject,
    TokenAuthenticator,
    TokenRequest,
    claims_for,
)
from setpoint.auth.tokenfile import StaticTokens, TokenFileError
from setpoint.auth.user import UserInfo
from setpoint.pki import certs

ISSUER = "https://kubernetes.default.svc.cluster.local"
NOW = 1_800_000_000


class Lookup:
    def __init__(self) -> None:
        self.live: dict[tuple[str, str, str], str] = {
            ("ServiceAccount", "team", "bot"): "sa-uid", ("Pod", "team", "p"): "pod-uid"}

    def uid_of(self, kind: str, namespace: str, name: str) -> str | None:
        return self.live.get((kind, namespace, name))


@pytest.fixture(scope="module")
def signer() -> jwt.Signer:
    return jwt.Signer(certs.new_key())


def make(signer: jwt.Signer, lookup: Lookup) -> tuple[Authenticator, TokenAuthenticator]:
    accounts = TokenAuthenticator(jwt.Verifier(signer.public_key), lookup, issuer=ISSUER,
                                  audiences=[ISSUER])
    return Authenticator(service_accounts=accounts, now=lambda: NOW), accounts


def token(signer: jwt.Signer, *, expiration: int = 3600, audiences: tuple[str, ...] = (ISSUER,),
          bound: BoundObject | None = None, uid: str = "sa-uid") -> str:
    request = TokenRequest(namespace="team", name="bot", uid=uid, audiences=audiences,
                           expiration_seconds=expiration, bound=bound)
    return signer.sign(claims_for(request, issuer=ISSUER, now=NOW))


def test_a_service_account_token_authenticates_as_its_account(signer: jwt.Signer) -> None:
    auth, _ = make(signer, Lookup())
    user = auth.authenticate(Credentials(authorization=f"Bearer {token(signer)}"), "/api")
    assert user.name == "system:serviceaccount:team:bot"
    assert user.uid == "sa-uid"
    assert user.groups == ("system:serviceaccounts", "system:serviceaccounts:team",
                           "system:authenticated")
    assert user.extra["authentication.kubernetes.io/credential-id"][0].startswith("JTI=")


@pytest.mark.parametrize(("case", "message"), [
    ("expired", "token has expired"),
    ("audience", "token audiences are invalid"),
    ("deleted", "service account team/bot has been deleted"),
    ("recreated", "does not match"),
    ("pod-gone", "the pod this token was bound to no longer exists"),
    ("forged", "unknown signing key"),
])
def test_a_token_is_refused_with_the_reason(signer: jwt.Signer, case: str, message: str) -> None:
    lookup = Lookup()
    auth, _ = make(signer, lookup)
    value = token(signer)
    if case == "expired":
        value = token(signer, expiration=-3600)
    elif case == "audience":
        value = token(signer, audiences=("vault",))
    elif case == "deleted":
        del lookup.live[("ServiceAccount", "team", "bot")]
    elif case == "recreated":
        lookup.live[("ServiceAccount", "team", "bot")] = "new-uid"
    elif case == "pod-gone":
        value = token(signer, bound=BoundObject("Pod", "p", "pod-uid"))
        del lookup.live[("Pod", "team", "p")]
    elif case == "forged":
        value = token(jwt.Signer(certs.new_key()))
    with pytest.raises(Unauthenticated, match=message):
        auth.authenticate(Credentials(authorization=f"Bearer {value}"), "/api")


def test_a_pod_bound_token_names_its_pod(signer: jwt.Signer) -> None:
    auth, _ = make(signer, Lookup())
    value = token(signer, bound=BoundObject("Pod", "p", "pod-uid"))
    user = auth.authenticate(Credentials(authorization=f"Bearer {value}"), "/api")
    assert user.extra["authentication.kubernetes.io/pod-name"] == ("p",)


def test_tampered_claims_fail_the_signature(signer: jwt.Signer) -> None:
    header, payload, sig = token(signer).split(".")
    claims = orjson.loads(base64.urlsafe_b64decode(payload + "=="))
    claims["sub"] = "system:serviceaccount:kube-system:admin"
    forged = base64.urlsafe_b64encode(orjson.dumps(claims)).rstrip(b"=").decode()
    with pytest.raises(jwt.InvalidToken, match="invalid signature"):
        jwt.Verifier(signer.public_key).verify(f"{header}.{forged}.{sig}", NOW)


@given(st.text(max_size=300))
def test_garbage_tokens_only_ever_raise_invalid_token(text: str) -> None:
    verifier = jwt.Verifier(_KEY.public_key())
    with pytest.raises(jwt.InvalidToken):
        verifier.verify(text, NOW)


_KEY = certs.new_key()


def test_static_tokens_and_the_file_format() -> None:
    tokens = StaticTokens.parse('# comment\n\nsecret1,alice,1,"devs,ops"\nsecret2,bob,2\n')
    alice = tokens.authenticate("secret1")
    assert alice == UserInfo("alice", "1", ("devs", "ops", "system:authenticated"))
    assert tokens.authenticate("secret") is None
    with pytest.raises(TokenFileError, match="line 1"):
        StaticTokens.parse("only,two\n")
    with pytest.raises(TokenFileError, match="duplicate"):
        StaticTokens.parse("t,a,1\nt,b,2\n")


@pytest.mark.parametrize(("creds", "path", "outcome"), [
    (Credentials(), "/healthz", users.ANONYMOUS),
    (Credentials(), "/readyz/ping", users.ANONYMOUS),
    (Credentials(), "/version", users.ANONYMOUS),
    (Credentials(), "/api/v1/namespaces", "no credentials"),
    (Credentials(), "/healthzX", "no credentials"),
    (Credentials(authorization="Basic YWRtaW46YWRtaW4="), "/api", "no credentials"),
    (Credentials(authorization="Bearer garbage"), "/healthz", "invalid bearer token"),
    (Credentials(authorization="Bearer "), "/api", "invalid bearer token"),
])
def test_credentials_and_anonymity(creds: Credentials, path: str, outcome: str) -> None:
    auth = Authenticator(static_tokens=StaticTokens.parse("good,alice,1\n"), now=lambda: NOW)
    if outcome == users.ANONYMOUS:
        assert auth.authenticate(creds, path) == users.anonymous()
    else:
        with pytest.raises(Unauthenticated, match=outcome):
            auth.authenticate(creds, path)


def test_client_certificate_names_user_and_groups() -> None:
    ca = certs.new_ca("ca", now=dt.datetime.now(dt.UTC))
    pair = certs.issue(ca, common_name="jane", organizations=["devs"], usage="client",
                       now=ca.not_before)
    der = pair.certificate.public_bytes(serialization.Encoding.DER)
    user = Authenticator(now=lambda: NOW).authenticate(Credentials(peer_certificate=der), "/api")
    assert user == UserInfo("jane", groups=("devs", "system:authenticated"))


def test_certificate_users_are_remembered_within_a_bound() -> None:
    ca = certs.new_ca("ca", now=dt.datetime.now(dt.UTC))
    ders = {name: certs.issue(ca, common_name=name, organizations=[f"{name}s"], usage="client",
                              now=ca.not_before).certificate.public_bytes(
                                  serialization.Encoding.DER)
            for name in ("jane", "bob", "carol")}
    auth = Authenticator(now=lambda: NOW, certificate_subjects=2)

    def who(name: str) -> UserInfo:
        return auth.authenticate(Credentials(peer_certificate=ders[name]), "/api")

    assert who("jane") == who("jane") == UserInfo("jane", groups=("janes",
                                                                  "system:authenticated"))
    assert who("bob").name == "bob"
    assert who("jane").name == "jane"  # now the most recent
    assert who("carol") == UserInfo("carol", groups=("carols", "system:authenticated"))
    assert list(auth._subjects) == [ders["jane"], ders["carol"]]  # bob, least recent, gone
    assert who("bob").name == "bob"  # read again
    for _ in range(2):  # an unreadable one is refused every time, and not remembered
        with pytest.raises(Unauthenticated, match="unreadable client certificate"):
            auth.authenticate(Credentials(peer_certificate=b"not DER"), "/api")
    assert len(auth._subjects) == 2
    with pytest.raises(ValueError, match="certificate_subjects"):
        Authenticator(now=lambda: NOW, certificate_subjects=0)


def test_impersonation_headers() -> None:
    wanted = impersonation.parse([("Impersonate-User", "system:serviceaccount:team:bot"),
                                  ("Impersonate-Extra-Scopes%2Fread", "a")])
    assert wanted is not None
    checks = impersonation.requests(UserInfo("admin"), wanted)
    assert [(c.resource, c.subresource, c.namespace, c.name) for c in checks] == [
        ("serviceaccounts", "", "team", "bot"), ("userextras", "scopes/read", "", "a")]
    user = impersonation.impersonated(wanted)
    assert user.groups == ("system:serviceaccounts", "system:serviceaccounts:team",
                           "system:authenticated")
    assert impersonation.parse([("Accept", "x")]) is None
    with pytest.raises(impersonation.ImpersonationError):
        impersonation.parse([("Impersonate-Group", "admins")])
    anon = impersonation.impersonated(impersonation.parse([
        ("Impersonate-User", "system:anonymous")]) or pytest.fail("parsed"))
    assert anon.groups == ("system:unauthenticated",)


def test_a_token_sent_again_skips_the_signature_check_never_the_time_or_account_checks(
        signer: jwt.Signer) -> None:
    lookup = Lookup()
    verifier = jwt.Verifier(signer.public_key, remembered=2)
    accounts = TokenAuthenticator(verifier, lookup, issuer=ISSUER, audiences=[ISSUER])
    value = token(signer, expiration=3600)
    for _ in range(3):
        assert accounts.authenticate(value, NOW).name == "system:serviceaccount:team:bot"
    assert verifier.signature_checks == 1
    # expiry is checked on every use of a remembered token
    with pytest.raises(jwt.InvalidToken, match="expired"):
        verifier.verify(value, NOW + 3600 + jwt.LEEWAY + 1)
    # and so is the account: deleting it revokes the token at once
    del lookup.live[("ServiceAccount", "team", "bot")]
    with pytest.raises(jwt.InvalidToken, match="has been deleted"):
        accounts.authenticate(value, NOW)
    assert verifier.signature_checks == 1


def test_remembered_tokens_are_bounded_and_refused_ones_are_not_remembered(
        signer: jwt.Signer) -> None:
    verifier = jwt.Verifier(signer.public_key, remembered=2)
    first, second, third = (token(signer, expiration=e) for e in (3600, 3601, 3602))
    for value in (first, second, third):
        verifier.verify(value, NOW)
    assert verifier.signature_checks == 3
    verifier.verify(third, NOW)  # remembered
    assert verifier.signature_checks == 3
    verifier.verify(first, NOW)  # the oldest went when the third came
    assert verifier.signature_checks == 4
    header, payload, _ = first.split(".")
    forged = f"{header}.{payload}.{'A' * 86}"
    for _ in range(2):
        with pytest.raises(jwt.InvalidToken, match="invalid signature"):
            verifier.verify(forged, NOW)
    assert verifier.signature_checks == 6
    # a verifier that remembers nothing checks every time
    forgetful = jwt.Verifier(signer.public_key, remembered=0)
    for _ in range(2):
        forgetful.verify(first, NOW)
    assert forgetful.signature_checks == 2
