"""The web UI's assets, served under ``/ui``.

The UI is a static single-page application (``ui_static/``, shipped in the package): its
code runs in the browser and asks the ordinary Kubernetes API for every piece of data, with
the user's own bearer token, so authentication and RBAC apply to it exactly as to kubectl.
This module serves only the asset files, and serves them to anyone: they hold no data.

Invariants: the set of files is fixed when the server starts (the directory's regular files
with a known suffix, symbolic links left out, read once and looked up by exact name; no path
reaches the file system, so ``..`` and friends can only miss); a response never
contains anything from the request or from storage; every response under ``/ui`` carries
the security headers below (a strict Content-Security-Policy without inline script or
``eval``, ``connect-src 'self'``, Trusted Types required with no policy allowed, framing
denied, no MIME sniffing, no referrer). Only GET
and HEAD are answered; anything else is a 405 Status.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Final

from aiohttp import web

from setpoint.apimachinery import errors
from setpoint.server import responses

PREFIX: Final = "/ui"
STATIC_DIR: Final = Path(__file__).parent / "ui_static"

#: the asset types served, by file suffix; other files in the directory are not served
CONTENT_TYPES: Final[Mapping[str, str]] = MappingProxyType({
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".txt": "text/plain; charset=utf-8",
})

CONTENT_SECURITY_POLICY: Final = "; ".join([
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self'",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
    # Trusted Types: the DOM's HTML and script sinks (innerHTML, outerHTML,
    # insertAdjacentHTML, document.write, string event handlers) refuse plain strings, and
    # no policy may be created to turn one into markup. The UI builds every element with
    # createElement and text nodes, so a sink used by mistake fails instead of parsing data
    "require-trusted-types-for 'script'",
    "trusted-types 'none'",
])

SECURITY_HEADERS: Final[Mapping[str, str]] = MappingProxyType({
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    # the assets change with the installed version; revalidating is cheap
    "Cache-Control": "no-cache",
})


def is_ui_path(path: str) -> bool:
    return path == PREFIX or path.startswith(PREFIX + "/")


@dataclass(frozen=True, slots=True)
class Asset:
    body: bytes
    content_type: str


@dataclass(frozen=True, slots=True)
class Assets:
    """The UI's files by name (``index.html``, ``app.js``, ...)."""

    files: Mapping[str, Asset]

    @classmethod
    def load(cls, directory: Path = STATIC_DIR) -> Assets:
        files: dict[str, Asset] = {}
        if directory.is_dir():
            for path in sorted(directory.iterdir()):
                content_type = CONTENT_TYPES.get(path.suffix)
                # a symbolic link could name any file of the machine: only regular files
                if content_type is not None and path.is_file() and not path.is_symlink():
                    files[path.name] = Asset(path.read_bytes(), content_type)
        return cls(MappingProxyType(files))

    def serve(self, request: web.Request) -> web.Response:
        """The response to a request whose path is under :data:`PREFIX`."""
        if request.method not in ("GET", "HEAD"):
            response = responses.error_response(errors.MethodNotAllowed(
                "the server does not allow this method on the requested resource"))
            response.headers["Allow"] = "GET, HEAD"
        elif request.path == PREFIX:
            # relative asset URLs in index.html need the trailing slash
            response = web.Response(status=308, headers={"Location": PREFIX + "/"})
        else:
            name = request.path[len(PREFIX) + 1:] or "index.html"
            asset = self.files.get(name)
            if asset is None:
                response = responses.error_response(errors.path_not_found())
            else:
                response = web.Response(body=asset.body,
                                        headers={"Content-Type": asset.content_type})
        response.headers.update(SECURITY_HEADERS)
        return response
