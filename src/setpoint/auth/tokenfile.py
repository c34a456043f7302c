"""Static bearer tokens: kube-apiserver's ``--token-auth-file`` format.

One token per line, CSV: ``token,user,uid[,"group1,group2"]``. Blank lines and lines starting
with ``#`` are skipped. A malformed line is an error naming the line (the server refuses to
start rather than silently dropping a credential). Tokens are kept and looked up by their
SHA-256 digest, so a lookup's timing says nothing about how much of a token matched.
"""

from __future__ import annotations

import csv
import hashlib
import io
from pathlib import Path

from setpoint.auth import user as users
from setpoint.auth.user import UserInfo


class TokenFileError(ValueError):
    pass


class StaticTokens:
    def __init__(self, entries: dict[str, UserInfo]) -> None:
        self._by_digest = {_digest(token): info for token, info in entries.items()}

    @classmethod
    def parse(cls, text: str, source: str = "token file") -> StaticTokens:
        entries: dict[str, UserInfo] = {}
        for lineno, row in enumerate(csv.reader(io.StringIO(text)), start=1):
            if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
                continue
            if len(row) < 3:
                raise TokenFileError(f"{source}, line {lineno}: want at least 3 fields "
                                     "(token,user,uid)")
            token, name, uid = (f.strip() for f in row[:3])
            if not token or not name:
                raise TokenFileError(f"{source}, line {lineno}: empty token or user name")
            if token in entries:
                raise TokenFileError(f"{source}, line {lineno}: duplicate token")
            groups = tuple(g.strip() for g in row[3].split(",") if g.strip()) \
                if len(row) > 3 else ()
            entries[token] = UserInfo(name, uid, (*groups, users.ALL_AUTHENTICATED))
        return cls(entries)

    @classmethod
    def load(cls, path: Path) -> StaticTokens:
        return cls.parse(path.read_text(), str(path))

    def authenticate(self, token: str) -> UserInfo | None:
        return self._by_digest.get(_digest(token))


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()
