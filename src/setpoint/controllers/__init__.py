"""``setpoint.controllers``: the built-in controllers, written on :mod:`setpoint.runtime`.

They are ordinary operators: they talk to the API server through a
:class:`setpoint.client.Client` (never through storage), so they run against any server, and
:mod:`setpoint.controlplane` runs them inside ``setpoint serve`` over loopback HTTP.

- ``garbagecollector`` (:class:`GarbageCollector`, a runnable): cascading deletion through
  ``ownerReferences`` across every resource kind, in the background, foreground and orphan
  modes;
- ``namespace`` (:func:`namespace_controller`): a deleted namespace is emptied (every kind,
  custom resources included, finalizers waited for), then finalized;
- ``crd`` (:func:`crd_controller`): a deleted CRD's custom resources are deleted, then its
  cleanup finalizer is removed;
- ``clusterrole-aggregation``: aggregated ClusterRoles (``admin``, ``edit``, ``view``) hold
  the rules of the roles they select;
- ``serviceaccount``: every namespace has a ``default`` ServiceAccount;
- ``root-ca-cert-publisher``: every namespace has the ``kube-root-ca.crt`` ConfigMap;
- ``scheduler`` (:class:`~setpoint.controllers.scheduler.Scheduler`, a runnable acting as
  ``system:kube-scheduler``): pending pods are bound to nodes;
- ``nodelifecycle`` and ``taint-eviction-controller``: a silent node becomes Unknown and
  tainted, and the pods that do not tolerate its taints are evicted;
- ``endpoint`` and ``endpointslice``: a Service's Endpoints and EndpointSlices follow the
  pods it selects;
- ``replicaset`` and ``deployment``: a ReplicaSet keeps its pods, a Deployment rolls its
  template out through ReplicaSets.
- ``job`` and ``ttl-after-finished``: Jobs run their pods to completion, finished Jobs go
  after their TTL (:mod:`setpoint.controllers.job`);
- ``cronjob``: CronJobs create Jobs on their schedules (:mod:`setpoint.controllers.cronjob`);
- ``daemonset``: one pod of each DaemonSet on every eligible node
  (:mod:`setpoint.controllers.daemonset`);
- ``statefulset``: a StatefulSet's pods, with stable names, started and stopped in order
  and updated from the highest ordinal down (:mod:`setpoint.controllers.statefulset`);
- ``csrsigning``: approved CertificateSigningRequests of the built-in signers get
  certificates from the cluster CA (:mod:`setpoint.controllers.csrsigning`), and each of
  its signers publishes that CA as a ClusterTrustBundle
  (:mod:`setpoint.controllers.trustbundles`);
- ``disruption``: the status of every PodDisruptionBudget, which the eviction subresource
  spends, and (as ``disruption-pods``, with the same identity) the reset of stale
  ``DisruptionTarget`` pod conditions (:mod:`setpoint.controllers.disruption`).

:func:`builtin` builds the ones named, fresh each time (they keep per-run state);
:func:`manager` a :class:`~setpoint.runtime.Manager` that runs them, the same whether it runs
inside ``setpoint serve``'s process or in ``setpoint controller-manager``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from setpoint import client as sp_client
from setpoint import runtime
from setpoint.controllers.crd import crd_controller
from setpoint.controllers.cronjob import CronJobConfig, cronjob_controller
from setpoint.controllers.csrsigning import SigningConfig, csr_signing_controller
from setpoint.controllers.daemonset import DaemonSetConfig, daemonset_controller
from setpoint.controllers.deployment import deployment_controller
from setpoint.controllers.disruption import (
    DisruptionConfig,
    disruption_controller,
    stale_target_controller,
)
from setpoint.controllers.endpointcontrollers import (
    endpoints_controller,
    endpointslice_controller,
)
from setpoint.controllers.garbagecollector import GarbageCollector
from setpoint.controllers.job import JobConfig, job_controller, ttl_after_finished_controller
from setpoint.controllers.namespace import namespace_controller
from setpoint.controllers.nodelifecycle import (
    NodeLifecycleConfig,
    node_lifecycle_controller,
    taint_eviction_controller,
)
from setpoint.controllers.rbacaggregation import aggregation_controller
from setpoint.controllers.replicaset import replicaset_controller
from setpoint.controllers.scheduler import Scheduler, SchedulerConfig
from setpoint.controllers.serviceaccounts import root_ca_controller, service_account_controller
from setpoint.controllers.statefulset import StatefulSetConfig, statefulset_controller
from setpoint.controllers.trustbundles import NAME as TRUST_BUNDLE_PUBLISHER
from setpoint.controllers.trustbundles import TrustBundlePublisher
from setpoint.pki.certs import KeyPair

#: every built-in controller, by the name ``setpoint serve --controllers`` takes
NAMES: Final = ("garbagecollector", "namespace", "crd", "clusterrole-aggregation",
                "serviceaccount", "root-ca-cert-publisher", "scheduler", "nodelifecycle",
                "taint-eviction-controller", "endpoint", "endpointslice", "replicaset",
                "deployment", "job", "ttl-after-finished", "cronjob", "daemonset",
                "statefulset", "disruption", "csrsigning")
#: the ones that run unless others are named (every one)
DEFAULT_NAMES: Final = NAMES
#: controllers that one name of :data:`NAMES` runs besides its own, and act as its identity
SHARED_IDENTITIES: Final = {"disruption-pods": "disruption",
                             TRUST_BUNDLE_PUBLISHER: "csrsigning"}
#: the Lease the built-in controllers of several servers compete for (in kube-system)
LEASE_NAME: Final = "setpoint-controller-manager"
LEASE_NAMESPACE: Final = "kube-system"
#: how the built-in controllers introduce themselves to the server
USER_AGENT: Final = "setpoint-controller-manager"


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """The options of the built-in controllers that are not their names."""

    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    node_lifecycle: NodeLifecycleConfig = field(default_factory=NodeLifecycleConfig)
    job: JobConfig = field(default_factory=JobConfig)
    cronjob: CronJobConfig = field(default_factory=CronJobConfig)
    daemonset: DaemonSetConfig = field(default_factory=DaemonSetConfig)
    statefulset: StatefulSetConfig = field(default_factory=StatefulSetConfig)
    disruption: DisruptionConfig = field(default_factory=DisruptionConfig)
    signing: SigningConfig = field(default_factory=SigningConfig)


def builtin(names: Iterable[str] = DEFAULT_NAMES, *, ca_pem: str | None = None,
            settings: Settings | None = None, signing_ca: KeyPair | None = None
            ) -> tuple[list[runtime.Controller], list[runtime.Runnable]]:
    """The controllers and runnables for ``names`` (a subset of :data:`NAMES`).

    ``root-ca-cert-publisher`` publishes ``ca_pem`` (the cluster CA the clients trust); with
    none (a server without TLS) it is left out. ``csrsigning`` signs with ``signing_ca``
    (that CA with its key); without one it is left out.
    """
    settings = settings or Settings()
    wanted = list(dict.fromkeys(names))
    unknown = [n for n in wanted if n not in NAMES]
    if unknown:
        raise ValueError(f"unknown controllers: {', '.join(unknown)} (known: "
                         f"{', '.join(NAMES)})")
    controllers: list[runtime.Controller] = []
    runnables: list[runtime.Runnable] = []
    if "garbagecollector" in wanted:
        runnables.append(GarbageCollector())
    if "namespace" in wanted:
        controllers.append(namespace_controller())
    if "crd" in wanted:
        controllers.append(crd_controller())
    if "clusterrole-aggregation" in wanted:
        controllers.append(aggregation_controller())
    if "serviceaccount" in wanted:
        controllers.append(service_account_controller())
    if "root-ca-cert-publisher" in wanted and ca_pem:
        controllers.append(root_ca_controller(ca_pem))
    if "scheduler" in wanted:
        runnables.append(Scheduler(settings.scheduler))
    if "nodelifecycle" in wanted:
        controllers.append(node_lifecycle_controller(settings.node_lifecycle))
    if "taint-eviction-controller" in wanted:
        controllers.append(taint_eviction_controller(settings.node_lifecycle))
    if "endpoint" in wanted:
        controllers.append(endpoints_controller())
    if "endpointslice" in wanted:
        controllers.append(endpointslice_controller())
    if "replicaset" in wanted:
        controllers.append(replicaset_controller())
    if "deployment" in wanted:
        controllers.append(deployment_controller())
    if "job" in wanted:
        controllers.append(job_controller(settings.job))
    if "ttl-after-finished" in wanted:
        controllers.append(ttl_after_finished_controller())
    if "cronjob" in wanted:
        controllers.append(cronjob_controller(settings.cronjob))
    if "daemonset" in wanted:
        controllers.append(daemonset_controller(settings.daemonset))
    if "statefulset" in wanted:
        controllers.append(statefulset_controller(settings.statefulset))
    if "disruption" in wanted:
        controllers.append(disruption_controller(settings.disruption))
        controllers.append(stale_target_controller(settings.disruption))
    if "csrsigning" in wanted and signing_ca is not None:
        controllers.append(csr_signing_controller(signing_ca, settings.signing))
        runnables.append(TrustBundlePublisher(signing_ca.cert_pem.decode()))
    return controllers, runnables


def manager(client: sp_client.Client, names: Iterable[str] = DEFAULT_NAMES, *,
            leader_election: bool = False, graceful_shutdown_timeout: float = 5.0,
            clients: Mapping[str, sp_client.Client] | None = None, ca_pem: str | None = None,
            settings: Settings | None = None,
            signing_ca: KeyPair | None = None) -> runtime.Manager:
    """A manager running the built-in controllers ``names``: their caches read through
    ``client``, each one writes through ``clients[name]`` when given (its own identity, see
    :data:`setpoint.auth.rbac.bootstrap.CONTROLLER_ACCOUNTS`); with ``leader_election``, only
    while holding the Lease ``kube-system/`` :data:`LEASE_NAME`.

    The built-in controllers do not publish their reconciles as Events (as
    kube-controller-manager's do not): they reconcile every pod, endpoint and role of the
    cluster, and say what they did with Events of their own (``SuccessfulCreate``,
    ``ScalingReplicaSet``, ...)."""
    controllers, runnables = builtin(names, ca_pem=ca_pem, settings=settings,
                                     signing_ca=signing_ca)
    clients = dict(clients or {})
    for extra, owner in SHARED_IDENTITIES.items():
        if owner in clients:
            clients.setdefault(extra, clients[owner])
    election = runtime.LeaderElectionConfig(
        lease_name=LEASE_NAME, lease_namespace=LEASE_NAMESPACE) if leader_election else None
    return runtime.Manager(client, controllers, runnables=runnables, leader_election=election,
                           graceful_shutdown_timeout=graceful_shutdown_timeout,
                           clients=clients, reconcile_events=None)


__all__ = ["DEFAULT_NAMES", "LEASE_NAME", "LEASE_NAMESPACE", "NAMES", "USER_AGENT",
           "CronJobConfig", "DaemonSetConfig", "DisruptionConfig",
           "GarbageCollector", "JobConfig", "NodeLifecycleConfig", "Scheduler", "SchedulerConfig",
           "Settings", "SigningConfig", "StatefulSetConfig", "builtin", "crd_controller",
           "deployment_controller",
           "disruption_controller", "endpoints_controller",
           "endpointslice_controller", "manager", "namespace_controller",
           "node_lifecycle_controller", "replicaset_controller", "statefulset_controller",
           "taint_eviction_controller"]
