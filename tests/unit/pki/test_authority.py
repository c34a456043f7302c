"""The data directory's CA: certificates issued, verified, renewed, and kept private."""

from __future__ import annotations

import datetime as dt
import ssl
import stat
from pathlib import Path

from setpoint.pki import certs
from setpoint.pki.authority import Authority


class Clock:
    def __init__(self) -> None:
        self.now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

    def __call__(self) -> dt.datetime:
        return self.now


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_keys_are_0600_in_a_0700_directory(tmp_path: Path) -> None:
    pki = tmp_path / "pki"
    authority = Authority(pki)
    authority.serving(["localhost", "127.0.0.1"])
    authority.client("admin", "system:admin", ["system:masters"])
    authority.signing_key()
    assert mode(pki) == 0o700
    files = list(pki.iterdir())
    assert {f.name for f in files} >= {"ca.key", "apiserver.key", "admin.key", "sa.key"}
    assert all(mode(f) == 0o600 for f in files)


def test_an_open_directory_is_tightened(tmp_path: Path) -> None:
    pki = tmp_path / "pki"
    pki.mkdir(mode=0o755)
    pki.chmod(0o755)
    Authority(pki)
    assert mode(pki) == 0o700


def test_serving_certificate_names_every_host_and_verifies_with_ssl(tmp_path: Path) -> None:
    authority = Authority(tmp_path)
    pair = authority.serving(["localhost", "127.0.0.1", "::1", "node-a"])
    assert certs.san_hosts(pair.certificate) == {"localhost", "127.0.0.1", "::1", "node-a"}
    assert certs.signed_by(pair, authority.ca)
    cert_path, key_path = authority.paths("apiserver")
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert_path, key_path)  # the pair is loadable by Python's ssl
    client = ssl.create_default_context(cadata=authority.ca.cert_pem.decode())
    assert client.verify_mode == ssl.CERT_REQUIRED


def test_a_current_certificate_is_kept_and_a_new_host_reissues_it(tmp_path: Path) -> None:
    authority = Authority(tmp_path)
    first = authority.serving(["localhost"])
    assert authority.serving(["localhost"]) == first
    second = authority.serving(["localhost", "10.0.0.5"])
    assert second != first
    assert {"localhost", "10.0.0.5"} <= certs.san_hosts(second.certificate)


def test_certificates_are_renewed_when_two_thirds_of_their_life_passed(tmp_path: Path) -> None:
    clock = Clock()
    authority = Authority(tmp_path, now=clock)
    first = authority.client("admin", "system:admin", ["system:masters"])
    clock.now += dt.timedelta(days=200)
    assert authority.client("admin", "system:admin", ["system:masters"]) == first
    clock.now += dt.timedelta(days=50)  # 250 of 365 days: less than a third left
    renewed = authority.client("admin", "system:admin", ["system:masters"])
    assert renewed != first
    assert renewed.not_after > first.not_after


def test_client_certificate_carries_user_and_groups(tmp_path: Path) -> None:
    authority = Authority(tmp_path)
    pair = authority.client("ctl", "system:serviceaccount:kube-system:gc",
                            ["system:serviceaccounts", "system:serviceaccounts:kube-system"])
    assert certs.subject_of(pair.certificate) == (
        "system:serviceaccount:kube-system:gc",
        ("system:serviceaccounts", "system:serviceaccounts:kube-system"))


def test_a_certificate_from_another_ca_is_replaced(tmp_path: Path) -> None:
    other = Authority(tmp_path / "other")
    foreign = other.client("admin", "system:admin")
    mine = Authority(tmp_path / "mine")
    (tmp_path / "mine" / "admin.crt").write_bytes(foreign.cert_pem)
    (tmp_path / "mine" / "admin.key").write_bytes(foreign.key_pem)
    assert certs.signed_by(mine.client("admin", "system:admin"), mine.ca)


def test_the_ca_survives_a_restart(tmp_path: Path) -> None:
    assert Authority(tmp_path).ca == Authority(tmp_path).ca
