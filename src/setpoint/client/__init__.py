"""``setpoint.client``: an async Kubernetes API client for setpoint and real clusters.

It reads kubeconfig files and in-cluster service accounts, speaks JSON over HTTP/1.1
(its own lean keep-alive client; aiohttp for proxies and injected sessions), resolves
resources through discovery, and raises the exceptions of
:mod:`setpoint.apimachinery.errors`. Objects are plain dicts. Example::

    async with Client(auto_config()) as client:
        cm = await client.get(("v1", "ConfigMap"), "settings", namespace="default")
"""

from setpoint.client.api import (
    ALL_NAMESPACES,
    Client,
    PatchType,
    delete_options,
)
from setpoint.client.config import (
    ClientConfig,
    auto_config,
    config_from_document,
    load_incluster,
    load_kubeconfig,
)
from setpoint.client.discovery import Discovery, NoMatchError, ResourceRef
from setpoint.client.kubeconfig import ConfigError
from setpoint.client.watch import Watch, WatchEvent

__all__ = [
    "ALL_NAMESPACES",
    "Client",
    "ClientConfig",
    "ConfigError",
    "Discovery",
    "NoMatchError",
    "PatchType",
    "ResourceRef",
    "Watch",
    "WatchEvent",
    "auto_config",
    "config_from_document",
    "delete_options",
    "load_incluster",
    "load_kubeconfig",
]
