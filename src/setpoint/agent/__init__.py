"""``setpoint.agent``: the node agent's pod runtimes (setpoint's kubelet, below the API).

A :class:`PodRuntime` runs pods given as API objects plus their
:class:`~setpoint.agent.inputs.ResolvedInputs`, and reports each pod's ``status`` exactly as
the kubelet writes it. Two implementations:

* :class:`ProcessRuntime` runs each container as a process on this machine, isolated as far
  as the machine allows (network, UTS and mount namespaces and cgroups as root; a loopback
  address per pod otherwise), with probes, hooks, restarts with CrashLoopBackOff, graceful
  termination, logs, exec and port-forward, and survives the agent being killed;
* :class:`SimulatedRuntime` runs nothing: containers become Running and Ready on a script,
  cheaply enough for 100,000 pods.

Example::

    async with ProcessRuntime(ProcessRuntimeConfig(root_dir=Path("/var/lib/setpoint"))) as rt:
        await rt.sync_pod(pod, resolve_inputs(pod, config_maps=..., secrets=...))
        async for uid in rt.changes():
            status = rt.pod_status(uid)   # write it to the API

See ``docs/agent.md`` for what ``image`` means, the isolation modes and what is not supported.
This package talks to no API server: wiring it to one is the agent's job.
"""

# Only this module imports names from the others: it is the package's public surface.
from setpoint.agent.images import ImageEntry, ImageTable
from setpoint.agent.inputs import ContainerInputs, ResolvedInputs, VolumeFile
from setpoint.agent.logs import LogConfig
from setpoint.agent.network import BridgeNetwork, LoopbackNetwork, PodNetwork
from setpoint.agent.process import ProcessRuntime, ProcessRuntimeConfig, RootDirInUse
from setpoint.agent.resolve import references, resolve_inputs
from setpoint.agent.runtime import (
    AgentError,
    ContainerMetrics,
    ContainerNotFound,
    ContainerNotRunning,
    ExecSession,
    LogOptions,
    NotSupported,
    PodEvent,
    PodMetrics,
    PodNotFound,
    PodRuntime,
)

__all__ = [
    "AgentError",
    "BridgeNetwork",
    "ContainerInputs",
    "ContainerMetrics",
    "ContainerNotFound",
    "ContainerNotRunning",
    "ExecSession",
    "ImageEntry",
    "ImageTable",
    "LogConfig",
    "LogOptions",
    "LoopbackNetwork",
    "NotSupported",
    "PodEvent",
    "PodMetrics",
    "PodNetwork",
    "PodNotFound",
    "PodRuntime",
    "ProcessRuntime",
    "ProcessRuntimeConfig",
    "ResolvedInputs",
    "RootDirInUse",
    "VolumeFile",
    "references",
    "resolve_inputs",
]
