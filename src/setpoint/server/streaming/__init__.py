"""The streaming subresources of pods: exec, attach, port-forward and log, on the wire.

The protocols real clients speak (kubectl's WebSocket channels and its SPDY/3.1 fallback,
SPDY tunnelled in WebSocket for port-forward, the Python clients' channel protocols, plain
chunked logs), independent of where the streams go: a :class:`StreamTarget` supplies the
command, the connection or the log. The Pod resource calls :func:`parse` and :func:`serve`
(or :func:`serve_subresource`); ``docs/streaming.md`` lists the protocols and limits.

Only this module's names are public; the rest of the package is its implementation.
"""

# Re-exported names, so that callers depend on the package rather than its modules.
from setpoint.server.streaming.config import StreamingConfig
from setpoint.server.streaming.options import (
    AttachOptions,
    ExecOptions,
    LogOptions,
    PortForwardOptions,
)
from setpoint.server.streaming.serve import SUBRESOURCES, Options, parse, serve, serve_subresource
from setpoint.server.streaming.target import (
    ByteReader,
    ByteWriter,
    ExitStatus,
    Session,
    StreamTarget,
    TerminalSize,
)

__all__ = [
    "AttachOptions",
    "ByteReader",
    "ByteWriter",
    "ExecOptions",
    "ExitStatus",
    "LogOptions",
    "Options",
    "PortForwardOptions",
    "SUBRESOURCES",
    "Session",
    "StreamTarget",
    "StreamingConfig",
    "TerminalSize",
    "parse",
    "serve",
    "serve_subresource",
]
