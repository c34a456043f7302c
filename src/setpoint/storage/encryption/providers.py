"""The ciphers of encryption at rest, with Kubernetes' stored formats.

Each stored value starts with ``k8s:enc:<provider>:v1:<key name>:``, so a reader knows which
provider and key wrote it:

* ``secretbox``: XSalsa20-Poly1305 (NaCl), 32-byte keys, a random 24-byte nonce per value;
* ``aesgcm``: AES-GCM with 16/24/32-byte keys and a random 12-byte nonce; the storage key
  is authenticated data, so a value copied under another key does not decrypt. Kubernetes
  advises rotating an aesgcm key every 200,000 writes (random nonces);
* ``identity``: no prefix, no encryption (for reading values written before encryption was
  turned on, or for turning it off).

Invariants: decryption authenticates (a flipped bit is an error, never wrong plaintext);
keys are never logged or put in error messages.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Protocol

import nacl.exceptions
import nacl.secret
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM


class DecryptError(Exception):
    """A stored value could not be decrypted (wrong key, corrupted, or no matching key)."""


class Provider(Protocol):
    @property
    def prefix(self) -> bytes:
        """The stored prefix, e.g. ``k8s:enc:secretbox:v1:key1:`` (empty for identity)."""

    @property
    def name(self) -> str: ...

    def encrypt(self, plaintext: bytes, key: bytes) -> bytes: ...

    def decrypt(self, ciphertext: bytes, key: bytes) -> bytes: ...


@dataclass(frozen=True, slots=True)
class Identity:
    name: str = "identity"
    prefix: bytes = b""

    def encrypt(self, plaintext: bytes, key: bytes) -> bytes:
        return plaintext

    def decrypt(self, ciphertext: bytes, key: bytes) -> bytes:
        return ciphertext


class SecretBox:
    def __init__(self, key_name: str, secret: bytes) -> None:
        if len(secret) != nacl.secret.SecretBox.KEY_SIZE:
            raise ValueError("secretbox keys must be 32 bytes")
        self.name = f"secretbox:{key_name}"
        self.prefix = f"k8s:enc:secretbox:v1:{key_name}:".encode()
        self._box = nacl.secret.SecretBox(secret)

    def encrypt(self, plaintext: bytes, key: bytes) -> bytes:
        return self.prefix + bytes(self._box.encrypt(plaintext))

    def decrypt(self, ciphertext: bytes, key: bytes) -> bytes:
        try:
            return bytes(self._box.decrypt(ciphertext[len(self.prefix):]))
        except nacl.exceptions.CryptoError as e:
            raise DecryptError(f"{self.name}: the value does not decrypt") from e


class AESGCMProvider:
    NONCE = 12

    def __init__(self, key_name: str, secret: bytes) -> None:
        if len(secret) not in (16, 24, 32):
            raise ValueError("aesgcm keys must be 16, 24 or 32 bytes")
        self.name = f"aesgcm:{key_name}"
        self.prefix = f"k8s:enc:aesgcm:v1:{key_name}:".encode()
        self._aead = AESGCM(secret)

    def encrypt(self, plaintext: bytes, key: bytes) -> bytes:
        nonce = os.urandom(self.NONCE)
        return self.prefix + nonce + self._aead.encrypt(nonce, plaintext, key)

    def decrypt(self, ciphertext: bytes, key: bytes) -> bytes:
        body = ciphertext[len(self.prefix):]
        if len(body) < self.NONCE + 16:
            raise DecryptError(f"{self.name}: the value is too short")
        try:
            return self._aead.decrypt(body[:self.NONCE], body[self.NONCE:], key)
        except InvalidTag as e:
            raise DecryptError(f"{self.name}: the value does not decrypt") from e
