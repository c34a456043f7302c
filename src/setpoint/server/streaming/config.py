"""The limits of the streaming subresources, each bounded.

One :class:`StreamingConfig` serves every connection of a server; the defaults follow
Kubernetes where it has a number (the kubelet's 4 h streaming idle timeout, 30 s to create
the streams of an exec) and are small where it has none.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from setpoint.server.streaming.spdy import frames


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamingConfig:
    #: a connection on which nothing moved (no frame or message either way) for this long
    #: is closed (the kubelet's ``--streaming-connection-idle-timeout``)
    idle_timeout: float = 4 * 3600.0
    #: how long an exec/attach waits for the client to open its SPDY streams, and a
    #: port-forward for the second stream of a pair
    stream_creation_timeout: float = 30.0
    #: a single write that the client does not take for this long ends the connection (a
    #: client that stops reading holds no more than the socket buffers meanwhile)
    write_timeout: float = 15 * 60.0
    #: after the end of a command, how long the server waits for the client to close
    finish_timeout: float = 5 * 60.0
    #: one WebSocket message (the Python client sends port-forward data 1 MiB at a time)
    max_message_bytes: int = 2 * 1024 * 1024
    #: one SPDY frame's payload
    max_frame_bytes: int = 1024 * 1024
    #: one decompressed SPDY header block, and its pairs
    max_header_bytes: int = 16 * 1024
    max_header_pairs: int = 64
    #: SPDY streams open at once on one connection (a port-forward uses two per connection)
    max_streams: int = 128
    #: received bytes a stream or channel holds until its consumer takes them; beyond, the
    #: connection is not read (backpressure to the client)
    stream_buffer_bytes: int = 256 * 1024
    #: how much is read from a target at once: the largest frame or message sent
    read_chunk_bytes: int = 32 * 1024
    #: ports one WebSocket port-forward may ask for (two channels each)
    max_ports: int = 32
    #: one terminal-size message (``{"Width":80,"Height":24}``)
    max_resize_bytes: int = 4096

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value <= 0:
                raise ValueError(f"{f.name} must be positive, not {value}")
        if self.max_frame_bytes > frames.MAX_LENGTH:
            raise ValueError(f"max_frame_bytes must be at most {frames.MAX_LENGTH}")
        if self.read_chunk_bytes > frames.MAX_LENGTH:
            raise ValueError(f"read_chunk_bytes must be at most {frames.MAX_LENGTH}")
        if self.max_ports > 127:
            raise ValueError("max_ports must be at most 127 (two channel numbers each)")
        if self.max_header_bytes < 64:
            raise ValueError("max_header_bytes must be at least 64")
