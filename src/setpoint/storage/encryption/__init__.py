"""Encryption at rest: values of chosen resources are encrypted before they reach storage.

``config`` reads Kubernetes' ``EncryptionConfiguration`` file, ``providers`` implements the
ciphers, ``backend`` wraps any :class:`~setpoint.storage.interface.Backend` so that
everything above it sees plaintext and everything below ciphertext.
"""

from setpoint.storage.encryption.backend import EncryptingBackend
from setpoint.storage.encryption.config import (
    EncryptionConfig,
    EncryptionConfigError,
    generate_config,
    load_config,
)

__all__ = ["EncryptingBackend", "EncryptionConfig", "EncryptionConfigError",
           "generate_config", "load_config"]
