"""``setpoint.node``: the node agent above the pod runtimes (setpoint's kubelet).

:class:`NodeAgent` connects a :class:`~setpoint.agent.PodRuntime` to an API server: it
registers the Node and heartbeats (:mod:`.heartbeat`), runs the pods bound to the node and
writes their status and Events (:mod:`.pods`), and serves the API server's streams (logs,
exec, attach, port-forward) on its HTTPS endpoint (:mod:`.endpoint`, :mod:`.target`).
``setpoint agent`` runs one (:mod:`setpoint.cli.agent`); ``setpoint serve`` runs one for its
own machine. See ``docs/agent.md``.

It is a client of the API like the built-in controllers: it never imports the registry or
storage.
"""

from setpoint.node.agent import POD_RUNTIMES, AgentConfig, NodeAgent, default_node_name
from setpoint.node.heartbeat import HeartbeatConfig

__all__ = ["POD_RUNTIMES", "AgentConfig", "HeartbeatConfig", "NodeAgent", "default_node_name"]
