"""Every served resource: the built-ins, plus one entry per established CRD.

The catalog follows CRD changes through a watch-cache listener, which runs *before* any watcher
sees the event. So by the time a client sees a CRD's Established condition, the resource is
already routable and in discovery (kopf re-reads discovery on that event). ``generation``
increases whenever the set of served resources or their schemas change; discovery and
OpenAPI documents use it as their cache key.
"""

from __future__ import annotations

import hashlib
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from setpoint.apimachinery import errors, regexp
from setpoint.apimachinery.clock import Clock
from setpoint.registry import (
    actions,
    admissionregistration,
    certificates,
    clustertrustbundles,
    controllerrevisions,
    conversion,
    core,
    crd,
    cronjobs,
    daemonsets,
    deletion,
    deployments,
    disruptionbudgets,
    endpointslices,
    eviction,
    jobs,
    mutatingpolicies,
    nodes,
    podactions,
    pods,
    policies,
    rbac,
    replicasets,
    serviceaccounts,
    serviceips,
    services,
    statefulsets,
    webhooks,
)
from setpoint.registry import watchcache as wc
from setpoint.registry.customresource import CustomResourceStrategy
from setpoint.registry.options import DeleteOptions
from setpoint.registry.resources import ResourceInfo
from setpoint.registry.store import Store
from setpoint.registry.storebase import QuietAdmission
from setpoint.schema.structural import Node
from setpoint.storage import interface as st

log = logging.getLogger(__name__)

Obj = dict[str, Any]

CRD_PREFIX = "/registry/apiextensions.k8s.io/customresourcedefinitions/"
NAMESPACE_PREFIX = "/registry/core/namespaces/"


@dataclass(frozen=True, slots=True)
class Served:
    """A resource as routed: its store and whether it is a custom resource."""

    store: Store
    custom: bool = False

    @property
    def info(self) -> ResourceInfo:
        return self.store.info


class Catalog:
    """Routing table and discovery source for the API server."""

    def __init__(self, backend: st.Backend, cache: wc.WatchCache, *, clock: Clock,
                 rng: random.Random, builtin_groups_first: bool = True,
                 garbage_collection: bool = False,
                 service_network: serviceips.ServiceNetworkConfig | None = None,
                 conversion_config: conversion.ConversionConfig | None = None) -> None:
        self._backend = backend
        self._cache = cache
        self._clock = clock
        self._rng = rng
        #: a garbage collector runs: DELETE honours Foreground and Orphan with finalizers
        self.garbage_collection = garbage_collection
        #: bounds of CRD conversion webhooks
        self.conversion_config = conversion_config or conversion.ConversionConfig()
        self._resources: dict[tuple[str, str], Served] = {}
        self._virtual: dict[tuple[str, str], actions.VirtualResource] = {}
        self._subresource_actions: dict[tuple[str, str, str], actions.Action] = {}
        self._crd_resources: dict[str, tuple[str, str]] = {}
        self.generation = 0
        #: ValidatingAdmissionPolicies, enforced on every store's writes
        self.policies = policies.PolicyAdmission(cache, self._param_source)
        #: MutatingAdmissionPolicies, before the mutating webhooks
        self.mutating_policies = mutatingpolicies.MutatingPolicyAdmission(cache, self.policies)
        #: admission webhooks: mutating before the policies, validating after them
        self.webhooks = webhooks.WebhookAdmission(cache)
        builtins = [*core.builtin_resources(), *rbac.rbac_resources(),
                    serviceaccounts.service_account_resource(), pods.pod_resource(),
                    nodes.node_resource(), services.service_resource(),
                    services.endpoints_resource(), endpointslices.endpoint_slice_resource(),
                    replicasets.replica_set_resource(), deployments.deployment_resource(),
                    jobs.job_resource(), cronjobs.cronjob_resource(),
                    daemonsets.daemonset_resource(),
                    statefulsets.statefulset_resource(),
                    controllerrevisions.controller_revision_resource(),
                    disruptionbudgets.pdb_resource()]
        for info, strategy_cls in builtins:
            self._add(Served(self._store(strategy_cls(info))))
        #: the ranges Services are allocated from
        self.service_network = service_network or serviceips.ServiceNetworkConfig()
        self.store("", "services").allocator = serviceips.ServiceAllocator(
            self.service_network, backend, cache, clock=clock, rng=rng)
        pod_store = self.store("", "pods")
        self.add_subresource_action("", "pods", "binding", podactions.binding_action(pod_store))
        self.add_subresource_action("", "pods", "eviction",
                                    eviction.eviction_action(
                                        pod_store, self.store("policy", "poddisruptionbudgets")))
        self._add(Served(self._store(crd.CRDStrategy(crd.crd_resource()))))
        self._add(Served(self._store(admissionregistration.ValidatingAdmissionPolicyStrategy(
            admissionregistration.policy_resource(), self._schema_of))))
        self._add(Served(self._store(
            admissionregistration.ValidatingAdmissionPolicyBindingStrategy(
                admissionregistration.binding_resource()))))
        self._add(Served(self._store(admissionregistration.MutatingAdmissionPolicyStrategy(
            admissionregistration.mutating_policy_resource()))))
        self._add(Served(self._store(
            admissionregistration.MutatingAdmissionPolicyBindingStrategy(
                admissionregistration.mutating_binding_resource()))))
        for mutating in (False, True):
            self._add(Served(self._store(admissionregistration.WebhookConfigurationStrategy(
                admissionregistration.webhook_configuration_resource(mutating)))))
        self._add(Served(self._store(certificates.CertificateSigningRequestStrategy(
            certificates.csr_resource(), clock.now))))
        self._add(Served(self._store(clustertrustbundles.ClusterTrustBundleStrategy(
            clustertrustbundles.cluster_trust_bundle_resource()))))
        cache.add_listener(self._on_event)

    def _store(self, strategy: Any) -> Store:
        store = Store(strategy, self._backend, self._cache, clock=self._clock, rng=self._rng,
                      namespace_gate=self.check_namespace,
                      deletion_finalizers=deletion.gc_finalizers if self.garbage_collection
                      else None)
        mutating, webhooks, policies = self.mutating_policies, self.webhooks, self.policies
        store.admission.extend((QuietAdmission(mutating.admit, mutating.quiet),
                                QuietAdmission(webhooks.mutate, webhooks.quiet),
                                QuietAdmission(mutating.reinvoke, mutating.quiet),
                                QuietAdmission(policies.admit, policies.quiet),
                                QuietAdmission(webhooks.validate, webhooks.quiet)))
        return store

    def _served_kind(self, api_version: str, kind: str) -> tuple[Served, str] | None:
        group, _, version = api_version.rpartition("/")
        for served in self._resources.values():
            info = served.info
            if info.group == group and info.kind == kind and info.version(version):
                return served, version
        return None

    def _param_source(self, api_version: str, kind: str) -> tuple[
            ResourceInfo, Callable[[Obj], Awaitable[Obj]]] | None:
        """The resource a policy's ``paramKind`` names, and how to read its objects (in the
        version it names, through the CRD's conversion webhook where it has one)."""
        found = self._served_kind(api_version, kind)
        if found is None:
            return None
        served, version = found
        conversion = served.store.conversion

        async def convert(obj: Obj) -> Obj:
            out = dict(await conversion.output(obj, version))
            out.setdefault("kind", kind)
            out["apiVersion"] = api_version
            return out
        return served.info, convert

    def _schema_of(self, group: str, version: str, resource: str) -> tuple[str, Node] | None:
        """The kind and structural schema of a custom resource version (type checking)."""
        served = self._resources.get((group, resource))
        if served is None or not served.custom:
            return None
        info = served.info
        version_info = info.version(version)
        strategy = served.store.strategy
        if version_info is None or not isinstance(strategy, CustomResourceStrategy):
            return None
        schema = strategy.schema(version_info)
        return (info.kind, schema.node) if schema is not None else None

    def _add(self, served: Served) -> None:
        self._resources[(served.info.group, served.info.resource)] = served
        self.generation += 1

    def add_virtual(self, resource: actions.VirtualResource) -> None:
        """Serve a create-only resource answered by an action (the review APIs)."""
        self._virtual[(resource.info.group, resource.info.resource)] = resource
        self.generation += 1

    def add_subresource_action(self, group: str, resource: str, subresource: str,
                               action: actions.Action) -> None:
        """Answer ``POST .../<resource>/<name>/<subresource>`` with ``action``."""
        self._subresource_actions[(group, resource, subresource)] = action

    # --- lookups -------------------------------------------------------------------------

    def virtual(self, group: str, version: str, resource: str
                ) -> actions.VirtualResource | None:
        found = self._virtual.get((group, resource))
        if found is None or found.info.version(version) is None:
            return None
        return found

    def virtual_in(self, group: str, version: str) -> list[actions.VirtualResource]:
        found = [v for v in self._virtual.values()
                 if v.info.group == group and v.info.version(version) is not None]
        return sorted(found, key=lambda v: v.info.resource)

    def subresource_action(self, group: str, resource: str, subresource: str
                           ) -> actions.Action | None:
        return self._subresource_actions.get((group, resource, subresource))

    def lookup(self, group: str, version: str, resource: str) -> Served | None:
        served = self._resources.get((group, resource))
        if served is None or served.info.version(version) is None:
            return None
        return served

    def store(self, group: str, resource: str) -> Store:
        return self._resources[(group, resource)].store

    def all(self) -> list[Served]:
        return list(self._resources.values())

    def groups(self) -> list[tuple[str, list[str]]]:
        """``(group, versions in preference order)``, core first, then by group name."""
        versions: dict[str, list[str]] = {}
        infos = [s.info for s in self._resources.values()]
        infos.extend(v.info for v in self._virtual.values())
        for info in infos:
            order = versions.setdefault(info.group, [])
            for v in _preferred_order(info):
                if v not in order:
                    order.append(v)
        for group, order in versions.items():
            order.sort(key=_version_priority)
            versions[group] = order
        return sorted(versions.items(), key=lambda kv: (kv[0] != "", kv[0]))

    def resources_in(self, group: str, version: str) -> list[Served]:
        found = [s for s in self._resources.values()
                 if s.info.group == group and s.info.version(version) is not None]
        return sorted(found, key=lambda s: s.info.resource)

    def fingerprint(self, *parts: str) -> str:
        digest = hashlib.sha256(f"{self.generation}|{'|'.join(parts)}".encode())
        return digest.hexdigest()[:32].upper()

    # --- namespace admission -------------------------------------------------------------

    async def check_namespace(self, namespace: str, qualified: str, name: str) -> None:
        ns = self._cache.get(NAMESPACE_PREFIX + namespace)
        if ns is None:
            # Another server on the same storage may have just created it: look again once
            # the cache has caught up with storage (Kubernetes' live lookup).
            await self._cache.wait_fresh()
            ns = self._cache.get(NAMESPACE_PREFIX + namespace)
        if ns is None:
            raise errors.not_found("namespaces", "", namespace)
        if (ns.get("status") or {}).get("phase") == "Terminating" or (
                ns.get("metadata") or {}).get("deletionTimestamp"):
            raise errors.Forbidden(
                f'{qualified} "{name}" is forbidden: unable to create new content in '
                f"namespace {namespace} because it is being terminated",
                details={"name": name, "kind": qualified.split(".", 1)[0],
                         "causes": [{"reason": "NamespaceTerminating",
                                     "message": f"namespace {namespace} is being terminated",
                                     "field": "metadata.namespace"}]})

    # --- CRDs ----------------------------------------------------------------------------

    def _on_event(self, event: wc.CacheEvent) -> None:
        if not event.key.startswith(CRD_PREFIX):
            return
        name = event.key[len(CRD_PREFIX):]
        if event.type == "DELETED":
            self._remove_crd(name)
        else:
            self.sync_crd(event.object)

    def load_existing(self) -> None:
        """Serve the CRDs already established in storage (at start-up)."""
        for _, obj in self._cache.items(CRD_PREFIX):
            self.sync_crd(obj)

    def sync_crd(self, obj: Obj) -> None:
        name = str((obj.get("metadata") or {}).get("name", ""))
        if not crd.is_established(obj):
            self._remove_crd(name)  # served only while Established says so
            return
        try:
            info = crd.resource_info(obj)
            strategy = CustomResourceStrategy(
                info, preserve_unknown_fields=bool(obj["spec"].get("preserveUnknownFields")))
        except Exception:
            log.exception("cannot serve CRD %s", name)
            return
        previous = self._crd_resources.get(name)
        if previous is not None and previous != (info.group, info.resource):
            self._resources.pop(previous, None)
        existing = self._resources.get((info.group, info.resource))
        if existing is not None and not existing.custom:
            log.warning("CRD %s would shadow a built-in resource; not served", name)
            return
        self._crd_resources[name] = (info.group, info.resource)
        store = self._store(strategy)
        spec_conversion = obj["spec"].get("conversion") or {}
        if isinstance(spec_conversion, dict) and spec_conversion.get("strategy") == "Webhook":
            hook = spec_conversion.get("webhook")
            store.conversion = conversion.Conversion(strategy, conversion.WebhookConverter(
                strategy, hook if isinstance(hook, dict) else {}, self.webhooks,
                self.conversion_config))
        self._add(Served(store, custom=True))

    def _remove_crd(self, name: str) -> None:
        key = self._crd_resources.pop(name, None)
        if key is not None:
            self._resources.pop(key, None)
            self.generation += 1

    def crd_terminating(self, group: str, resource: str) -> bool:
        """Whether the CRD that serves ``resource`` in ``group`` is being deleted."""
        obj = self._cache.get(f"{CRD_PREFIX}{resource}.{group}")
        return bool(obj and (obj.get("metadata") or {}).get("deletionTimestamp"))

    def crd_serves(self, name: str) -> Served | None:
        key = self._crd_resources.get(name)
        return self._resources.get(key) if key else None

    def names_in_use(self, group: str, exclude: str) -> dict[str, str]:
        """Plural, singular, kind, listKind and short names taken in ``group`` by other CRDs,
        mapped to the CRD that holds them."""
        taken: dict[str, str] = {}
        for _, obj in self._cache.items(CRD_PREFIX):
            other = str(obj["metadata"].get("name"))
            spec = obj.get("spec") or {}
            if other == exclude or spec.get("group") != group:
                continue
            accepted = (obj.get("status") or {}).get("acceptedNames") or {}
            for key in ("plural", "singular", "kind", "listKind"):
                if accepted.get(key):
                    taken[f"{key[0] if key != 'listKind' else 'L'}:{accepted[key]}"] = other
            for short in accepted.get("shortNames") or []:
                taken[f"s:{short}"] = other
        return taken


def default_delete_options() -> DeleteOptions:
    return DeleteOptions(propagation_policy="Background")


def _preferred_order(info: ResourceInfo) -> list[str]:
    return [v.name for v in info.served_versions]


_KUBE_VERSION = regexp.Regexp(r"v([0-9]+)(?:(alpha|beta)([0-9]+))?")


def _version_priority(version: str) -> tuple[int, int, int]:
    """Kubernetes' version ordering: GA > beta > alpha, higher numbers first."""
    m = _KUBE_VERSION.groups(version)
    if not m:
        return (3, 0, 0)
    major = int(m[0] or 0)
    stage = {None: 0, "beta": 1, "alpha": 2}[m[1]]
    minor = int(m[2] or 0)
    return (stage, -major, -minor)
