"""Client TLS towards etcd, without an etcd: which endpoints mean TLS, the files checked before
anything connects, and gRPC's TLS failures told in an operator's words."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

pytest.importorskip("aetcd")

from setpoint.pki import certs
from setpoint.storage import StorageConfig, StorageError, Unavailable, create_backend
from setpoint.storage.etcd import EtcdBackend, tls, wire

NOW = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def ca() -> certs.KeyPair:
    return certs.new_ca("etcd-ca", now=NOW)


@pytest.fixture
def files(tmp_path: Path, ca: certs.KeyPair) -> dict[str, Path]:
    client = certs.issue(ca, common_name="setpoint", usage="client", now=NOW)
    other = certs.issue(ca, common_name="someone", usage="client", now=NOW)
    written = {"ca": ca.cert_pem, "cert": client.cert_pem, "key": client.key_pem,
               "other-key": other.key_pem, "junk": b"-----BEGIN NOTHING-----\n"}
    for name, data in written.items():
        (tmp_path / name).write_bytes(data)
    return {name: tmp_path / name for name in written}


def client_tls(files: dict[str, Path], **changes: str | None) -> tls.ClientTLS:
    names = {"ca_file": "ca", "cert_file": "cert", "key_file": "key", **changes}
    return tls.ClientTLS(**{field: None if name is None else files[name]
                            for field, name in names.items()})


@pytest.mark.parametrize(("endpoints", "secure"), [
    (["https://127.0.0.1:2379"], True),
    (["https://10.0.0.1:2379", "https://10.0.0.2:2379"], True),
    (["http://127.0.0.1:2379"], False),
    (["127.0.0.1:2379", "http://127.0.0.2:2379"], False),
], ids=["one", "several", "plain", "no-scheme"])
def test_https_endpoints_mean_tls(endpoints: list[str], secure: bool) -> None:
    assert wire.secure(endpoints) is secure


def test_mixing_http_and_https_endpoints_is_refused() -> None:
    with pytest.raises(ValueError, match="all https:// or all http://"):
        wire.secure(["https://10.0.0.1:2379", "http://10.0.0.2:2379"])
    with pytest.raises(ValueError, match="all https:// or all http://"):
        EtcdBackend(["https://10.0.0.1:2379", "10.0.0.2:2379"])


def test_the_files_are_read_and_returned_as_pem(files: dict[str, Path]) -> None:
    material = tls.load(client_tls(files))
    assert material.root_certificates == files["ca"].read_bytes()
    assert material.certificate_chain == files["cert"].read_bytes()
    assert material.private_key == files["key"].read_bytes()
    assert tls.load(client_tls(files, cert_file=None, key_file=None)) == tls.Material(
        files["ca"].read_bytes(), None, None)
    assert tls.load(tls.ClientTLS()) == tls.Material(None, None, None)


@pytest.mark.parametrize(("changes", "message"), [
    ({"ca_file": "missing"}, "CA file .*missing: No such file"),
    ({"ca_file": "junk"}, "CA file .*junk holds no PEM certificate"),
    ({"cert_file": "key"}, "client certificate .* holds no PEM certificate"),
    ({"key_file": "ca"}, "client key .* is not a PEM private key"),
    ({"key_file": "other-key"}, "does not belong to the certificate"),
], ids=["missing", "ca-not-pem", "cert-not-pem", "key-not-pem", "foreign-key"])
def test_unusable_files_are_refused_naming_the_file(files: dict[str, Path],
                                                    changes: dict[str, str],
                                                    message: str) -> None:
    files["missing"] = files["ca"].with_name("missing")
    with pytest.raises(ValueError, match=message):
        tls.load(client_tls(files, **changes))


def test_an_encrypted_key_is_refused(files: dict[str, Path], ca: certs.KeyPair) -> None:
    pair = certs.issue(ca, common_name="setpoint", usage="client", now=NOW)
    encrypted = pair.private_key().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"secret"))
    files["cert"].write_bytes(pair.cert_pem)
    files["key"].write_bytes(encrypted)
    with pytest.raises(ValueError, match="is encrypted"):
        tls.load(client_tls(files))


def test_a_huge_file_is_refused_without_reading_it_all(files: dict[str, Path]) -> None:
    with files["junk"].open("wb") as f:
        f.truncate(tls.MAX_FILE_BYTES + 1)
    with pytest.raises(ValueError, match="larger than"):
        tls.load(client_tls(files, ca_file="junk"))


def test_a_certificate_goes_with_its_key() -> None:
    with pytest.raises(ValueError, match="both or neither"):
        tls.ClientTLS(cert_file=Path("client.crt"))
    with pytest.raises(ValueError, match="both or neither"):
        StorageConfig(kind="etcd", endpoints=("https://127.0.0.1:2379",),
                      key_file=Path("client.key"))


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_only_etcd_takes_tls_files(kind: str) -> None:
    path = Path("x.db") if kind == "sqlite" else None
    with pytest.raises(ValueError, match="takes no TLS files"):
        StorageConfig(kind=kind, path=path, ca_file=Path("ca.crt"))  # type: ignore[arg-type]


def test_create_backend_reads_the_files_before_anything_connects(
        files: dict[str, Path]) -> None:
    good = StorageConfig(kind="etcd", endpoints=("https://127.0.0.1:1",),
                         ca_file=files["ca"], cert_file=files["cert"], key_file=files["key"])
    assert isinstance(create_backend(good), EtcdBackend)
    with pytest.raises(ValueError, match="does not belong"):
        create_backend(StorageConfig(kind="etcd", endpoints=("https://127.0.0.1:1",),
                                     cert_file=files["cert"], key_file=files["other-key"]))
    # https:// without any file: gRPC's default roots, no client certificate
    assert isinstance(create_backend(StorageConfig(kind="etcd",
                                                   endpoints=("https://127.0.0.1:1",))),
                      EtcdBackend)


def test_tls_files_with_http_endpoints_are_refused(files: dict[str, Path]) -> None:
    with pytest.raises(ValueError, match="endpoints are http://"):
        create_backend(StorageConfig(kind="etcd", endpoints=("http://127.0.0.1:2379",),
                                     ca_file=files["ca"]))


async def test_files_gone_by_start_make_the_start_unavailable(files: dict[str, Path]) -> None:
    backend = EtcdBackend(["https://127.0.0.1:1"], tls=client_tls(files))
    files["key"].unlink()
    with pytest.raises(Unavailable, match=r"client key .*No such file"):
        await backend.start()
    await backend.close()


class _Code:
    name = "UNAVAILABLE"


class _RpcError:
    def __init__(self, details: str) -> None:
        self._details = details

    def code(self) -> _Code:
        return _Code()

    def details(self) -> str:
        return self._details


@pytest.mark.parametrize(("details", "meaning"), [
    ("failed to connect to all addresses; last error: UNAVAILABLE: ipv4:127.0.0.1:2379: "
     "Unwrap failed (TSI_DATA_CORRUPTED)", "etcd refused this client's certificate"),
    ("failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:2379: Tls "
     "handshake failed (TSI_PROTOCOL_FAILURE): SSL_ERROR_SSL: error:1000007d:SSL routines:"
     "OPENSSL_internal:CERTIFICATE_VERIFY_FAILED: unable to get local issuer certificate",
     "etcd's certificate is not trusted"),
    ("connections to all backends failing; last error: UNKNOWN: ipv4:127.0.0.1:2379: Custom "
     "verification check failed with error: UNAUTHENTICATED: Hostname Verification Check "
     "failed.", "not valid for the endpoint's host"),
    ("Ssl handshake failed: SSL_ERROR_SSL: error:100000f7:SSL routines:OPENSSL_internal:"
     "WRONG_VERSION_NUMBER", "does not speak TLS"),
    ("Ssl handshake failed: SSL_ERROR_SSL: error:10000410:SSL routines:OPENSSL_internal:"
     "SSLV3_ALERT_HANDSHAKE_FAILURE", "the TLS handshake with etcd failed"),
], ids=["client-refused", "server-untrusted", "hostname", "plain-server", "other"])
def test_tls_failures_say_tls_and_what_is_likely_wrong(details: str, meaning: str) -> None:
    error = wire.translate(_RpcError(details), "range")
    assert isinstance(error, Unavailable)
    assert str(error).startswith(f"etcd range: TLS: {tls.hint(details)}: UNAVAILABLE: ")
    assert meaning in str(error)
    assert details in str(error)


@pytest.mark.parametrize("details", [
    "failed to connect to all addresses; last error: UNAVAILABLE: ipv4:127.0.0.1:2379: "
    "Connection refused",
    "etcdserver: request timed out",
], ids=["refused", "timeout"])
def test_other_failures_do_not_mention_tls(details: str) -> None:
    assert tls.hint(details) is None
    error = wire.translate(_RpcError(details), "range")
    assert "TLS" not in str(error)
    assert isinstance(error, StorageError)
