"""How the server is secured: TLS, who may connect, what they may do, what is recorded.

With a :class:`SecurityConfig` (``setpoint serve``'s default) the server:

* serves TLS with a certificate from the data directory's CA (:mod:`setpoint.pki`), valid
  for every name it answers on, renewed before it expires;
* authenticates client certificates, static tokens (``--token-auth-file``) and
  ServiceAccount tokens it signed, and lets anonymous requests reach only health and version;
* authorizes with RBAC (``system:masters`` may do anything), with impersonation;
* audits requests when given a policy;
* writes an admin kubeconfig with a client certificate for ``system:admin`` in
  ``system:masters``, and one per built-in controller for its own ServiceAccount.

Without one (``--insecure-plain-http``), it serves plain HTTP and every request runs as an
administrator, as kube-apiserver's old insecure port did: for local experiments only.

Both ways the review APIs and ``serviceaccounts/token`` are served (tokens signed with an
in-memory key when insecure, since nothing checks them there).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from setpoint.apimachinery import errors, timeutil
from setpoint.apimachinery.clock import Clock
from setpoint.audit.log import AuditLog, AuditLogConfig
from setpoint.audit.policy import default_policy, load_policy
from setpoint.auth import jwt, serviceaccounts
from setpoint.auth import user as users
from setpoint.auth.attributes import Attributes
from setpoint.auth.authenticator import Authenticator, Credentials
from setpoint.auth.nodeauthorizer import NodeAuthorizer, node_name_of
from setpoint.auth.rbac import bootstrap as policy
from setpoint.auth.rbac.authorizer import (
    AuthorizerChain,
    Decision,
    PrivilegedGroupAuthorizer,
    RBACAuthorizer,
    Verdict,
)
from setpoint.auth.tokenfile import StaticTokens
from setpoint.auth.user import UserInfo
from setpoint.pki import certs
from setpoint.pki.authority import Authority
from setpoint.registry import (
    actions,
    certificates,
    clustertrustbundles,
    escalation,
    noderestriction,
    reviews,
    signerauthz,
)
from setpoint.registry import serviceaccounts as sa_registry
from setpoint.registry import watchcache as wc
from setpoint.registry.catalog import Catalog
from setpoint.registry.nodegraph import PODS, CacheNodeGraph
from setpoint.registry.options import AdmissionAttributes
from setpoint.registry.rbacsource import CacheSource
from setpoint.registry.resources import ResourceInfo, VersionInfo
from setpoint.registry.store import Admission
from setpoint.server import kubeconfigs, nodeproxy
from setpoint.server.security import INSECURE_USER, Gate, Security
from setpoint.server.tls import ServingTLS

log = logging.getLogger(__name__)

RBAC = "rbac.authorization.k8s.io"
#: the name :meth:`Secured.controller_kubeconfig` takes for the controller manager itself
MANAGER = "manager"
#: the file name (in the PKI directory) of the server's client certificate for node agents
KUBELET_CLIENT = "apiserver-kubelet-client"

#: names the serving certificate is always valid for (the in-cluster names included, for
#: workloads that reach the API as ``kubernetes.default.svc``)
DEFAULT_HOSTS = ("localhost", "127.0.0.1", "::1", "kubernetes", "kubernetes.default",
                 "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")


@dataclass(frozen=True, slots=True, kw_only=True)
class SecurityConfig:
    #: where the CA, certificates and the token signing key live (0700)
    pki_dir: Path
    #: more names and addresses for the serving certificate (``--advertise-address``, ...)
    hosts: tuple[str, ...] = ()
    #: kube-apiserver's ``--token-auth-file`` (CSV: token,user,uid,"groups")
    token_auth_file: Path | None = None
    service_account_issuer: str = serviceaccounts.DEFAULT_ISSUER
    #: audiences tokens must name to authenticate (default: the issuer)
    api_audiences: tuple[str, ...] = ()
    #: an audit.k8s.io/v1 Policy (default policy when only a log is given)
    audit_policy_file: Path | None = None
    audit_log: AuditLogConfig | None = None
    #: seconds between checks that renew certificates due for renewal
    renew_interval: float = 3600.0

    def __post_init__(self) -> None:
        if self.renew_interval <= 0:
            raise ValueError("renew_interval must be positive")


def serving_hosts(listen_host: str, extra: tuple[str, ...]) -> list[str]:
    """Every name the serving certificate covers for a server listening on ``listen_host``."""
    hosts = list(DEFAULT_HOSTS)
    name = socket.gethostname()
    hosts.append(name)
    if listen_host in ("0.0.0.0", "::", ""):
        try:
            hosts.extend(str(info[4][0]) for info in socket.getaddrinfo(name, None))
        except OSError:
            pass
    else:
        hosts.append(listen_host)
    hosts.extend(extra)
    return list(dict.fromkeys(h for h in hosts if h))


class _Everyone(Authenticator):
    """Insecure mode: every request is the administrator."""

    def authenticate(self, credentials: Credentials, path: str) -> UserInfo:
        return INSECURE_USER


class _AllowAll:
    def authorize(self, attrs: Attributes) -> Verdict:
        return Verdict(Decision.ALLOW)


class Secured:
    """The security of one running server (see the module docstring)."""

    def __init__(self, config: SecurityConfig | None, *, listen_host: str, cache: wc.WatchCache,
                 clock: Clock) -> None:
        self.config = config
        self._clock = clock
        source = CacheSource(cache)
        self._source = source
        self._cache = cache
        self.rbac = RBACAuthorizer(source)
        self.authority: Authority | None = None
        self.tls: ServingTLS | None = None
        self.audit_log: AuditLog | None = None
        if config is None:
            self.signer = jwt.Signer(certs.new_key())
            self.issuer = serviceaccounts.DEFAULT_ISSUER
            self.audiences: tuple[str, ...] = (self.issuer,)
            self.authenticator: Authenticator = _Everyone(now=time.time)
            self.authorizer: Any = _AllowAll()
            security = Security(authenticator=self.authenticator, authorizer=self.authorizer)
        else:
            self.authority = Authority(config.pki_dir)
            self.tls = ServingTLS(self.authority, serving_hosts(listen_host, config.hosts))
            self.signer = jwt.Signer(jwt.load_private_key(self.authority.signing_key()))
            self.issuer = config.service_account_issuer
            self.audiences = config.api_audiences or (self.issuer,)
            static = StaticTokens.load(config.token_auth_file) \
                if config.token_auth_file is not None else None
            tokens = serviceaccounts.TokenAuthenticator(
                jwt.Verifier(self.signer.public_key), source, issuer=self.issuer,
                audiences=self.audiences)
            self.authenticator = Authenticator(static_tokens=static, service_accounts=tokens,
                                               now=time.time)
            # --authorization-mode=Node,RBAC (after the superuser group)
            self.authorizer = AuthorizerChain(PrivilegedGroupAuthorizer(),
                                              NodeAuthorizer(CacheNodeGraph(cache)), self.rbac)
            audit_policy = None
            if config.audit_log is not None:
                audit_policy = load_policy(config.audit_policy_file) \
                    if config.audit_policy_file is not None else default_policy()
                self.audit_log = AuditLog(config.audit_log)
            security = Security(authenticator=self.authenticator, authorizer=self.authorizer,
                                audit_policy=audit_policy, audit_log=self.audit_log)
        self.gate = Gate(security, lambda: timeutil.format_micro_time(clock.now()))

    @property
    def secure(self) -> bool:
        return self.config is not None

    def close(self) -> None:
        if self.audit_log is not None:
            self.audit_log.close()

    # --- kubeconfigs ---------------------------------------------------------------------

    def kubeconfig(self, url: str, *, name: str = "admin", user: str = "system:admin",
                   groups: tuple[str, ...] = (users.SYSTEM_MASTERS,)) -> dict[str, Any]:
        """A kubeconfig for ``url`` acting as ``user`` in ``groups`` (a client certificate
        kept as ``<pki>/<name>.crt``); no credentials when insecure."""
        if self.authority is None:
            return kubeconfigs.kubeconfig(url)
        client = self.authority.client(name, user, groups)
        return kubeconfigs.kubeconfig(url, ca_pem=self.authority.ca.cert_pem, client=client)

    def controller_kubeconfig(self, url: str, controller: str) -> dict[str, Any]:
        """The kubeconfig of a built-in controller: its own ServiceAccount's identity, or
        (for ``controller`` :data:`MANAGER`) the controller manager's, which reads the shared
        caches and holds the Lease."""
        if controller == MANAGER:
            return self.kubeconfig(url, name="controller-manager",
                                   user=policy.CONTROLLER_MANAGER_USER, groups=())
        user, groups = policy.controller_user(controller)
        return self.kubeconfig(url, name=f"controller-{controller}", user=user,
                               groups=groups)

    def node_kubeconfig(self, url: str, node: str) -> dict[str, Any]:
        """The kubeconfig of node ``node``'s agent: ``system:node:<node>`` in
        ``system:nodes`` (what the kubelet's client certificate says)."""
        return self.kubeconfig(url, name=f"node-{node}", user=f"{users.NODE_PREFIX}{node}",
                               groups=(users.NODES_GROUP,))

    def kubelet_client_files(self) -> tuple[Path, Path] | None:
        """The certificate and key the server presents to node agents (issued when due)."""
        if self.authority is None:
            return None
        self.authority.client(KUBELET_CLIENT, nodeproxy.KUBELET_CLIENT_USER,
                              (users.SYSTEM_MASTERS,))
        return self.authority.paths(KUBELET_CLIENT)

    async def renew_periodically(self, on_renewed: Callable[[], None]) -> None:
        """Renew certificates that are due, every ``renew_interval`` seconds."""
        if self.config is None or self.tls is None:
            return
        while True:
            await asyncio.sleep(self.config.renew_interval)
            try:
                if self.tls.refresh():
                    on_renewed()
            except OSError:
                log.exception("renewing certificates failed; will try again")

    # --- the APIs answered rather than stored ------------------------------------------------

    def register_actions(self, catalog: Catalog) -> None:
        rbac = self.rbac
        authorizer = self.authorizer
        authenticator = self.authenticator

        def virtual(group: str, resource: str, kind: str, namespaced: bool,
                    action: actions.Action) -> None:
            catalog.add_virtual(actions.VirtualResource(ResourceInfo(
                group=group, resource=resource, kind=kind, singular="",
                namespaced=namespaced, versions=(VersionInfo("v1", storage=True),),
                verbs=("create",)), action))

        async def ssar(req: actions.ActionRequest) -> reviews.Obj:
            return reviews.self_subject_access_review(req.body, req.user, authorizer)

        async def sar(req: actions.ActionRequest) -> reviews.Obj:
            return reviews.subject_access_review(req.body, authorizer)

        async def lsar(req: actions.ActionRequest) -> reviews.Obj:
            return reviews.local_subject_access_review(req.body, req.namespace or "",
                                                       authorizer)

        async def ssrr(req: actions.ActionRequest) -> reviews.Obj:
            return reviews.self_subject_rules_review(req.body, req.user, rbac.resolver)

        async def token_review(req: actions.ActionRequest) -> reviews.Obj:
            return reviews.token_review(req.body, authenticator)

        async def whoami(req: actions.ActionRequest) -> reviews.Obj:
            return reviews.self_subject_review(req.body, req.user)

        virtual(reviews.AUTHORIZATION, "selfsubjectaccessreviews", "SelfSubjectAccessReview",
                False, ssar)
        virtual(reviews.AUTHORIZATION, "subjectaccessreviews", "SubjectAccessReview", False,
                sar)
        virtual(reviews.AUTHORIZATION, "localsubjectaccessreviews", "LocalSubjectAccessReview",
                True, lsar)
        virtual(reviews.AUTHORIZATION, "selfsubjectrulesreviews", "SelfSubjectRulesReview",
                False, ssrr)
        virtual(reviews.AUTHENTICATION, "tokenreviews", "TokenReview", False, token_review)
        virtual(reviews.AUTHENTICATION, "selfsubjectreviews", "SelfSubjectReview", False,
                whoami)

        accounts = catalog.store("", "serviceaccounts")
        source = self._source
        signer = self.signer

        cache = self._cache

        async def token(req: actions.ActionRequest) -> reviews.Obj:
            if req.namespace is None:
                raise errors.path_not_found()
            namespace = req.namespace
            noderestriction.check_token_request(
                req.user, req.name, req.body,
                lambda pod: cache.get(f"{PODS}{namespace}/{pod}"))
            account = await accounts.get(req.namespace, req.name, "v1")
            return sa_registry.create_token(
                account, req.body, signer=signer, issuer=self.issuer,
                api_audiences=self.audiences, now=time.time(), lookup=source.uid_of)

        catalog.add_subresource_action("", "serviceaccounts", "token", token)
        self._install_escalation_checks(catalog)
        self._install_node_restriction(catalog)
        # CertificateApproval and CertificateSigning: approve/sign on the request's signer
        catalog.store(certificates.GROUP, certificates.RESOURCE).admission.insert(
            0, signerauthz.admission(authorizer))
        # ClusterTrustBundleAttest: attest on a bundle's signer
        catalog.store(certificates.GROUP, clustertrustbundles.RESOURCE).admission.insert(
            0, signerauthz.attest_admission(authorizer))

        def authorize(attrs: Attributes) -> tuple[bool, str]:
            verdict = authorizer.authorize(attrs)
            return verdict.allowed, verdict.reason

        # admission policies' ``authorizer`` asks what the server's authorization answers
        catalog.policies.authorize = authorize
        catalog.webhooks.authorize = authorize

    def _install_node_restriction(self, catalog: Catalog) -> None:
        """NodeRestriction (:mod:`setpoint.registry.noderestriction`): what node agents
        write is about themselves and their own pods."""
        pods = catalog.store("", "pods")
        noderestriction.install(catalog.store("", "nodes"), pods,
                                catalog.store("coordination.k8s.io", "leases"))
        evict = catalog.subresource_action("", "pods", "eviction")
        if evict is None:
            return
        action = evict

        async def guarded_eviction(req: actions.ActionRequest) -> reviews.Obj:
            if req.namespace is not None and node_name_of(req.user) is not None:
                noderestriction.check_eviction(
                    req.user, await pods.get(req.namespace, req.name, "v1"))
            return await action(req)

        catalog.add_subresource_action("", "pods", "eviction", guarded_eviction)

    def _install_escalation_checks(self, catalog: Catalog) -> None:
        """Writes of roles and bindings grant nothing the writer does not hold
        (:mod:`setpoint.registry.escalation`); the server's own writes are not checked."""
        authorizer = self.authorizer
        resolver = self.rbac.resolver
        source = self._source

        def lookup(kind: str, namespace: str, name: str) -> Any:
            return source.role(namespace, name) if kind == "Role" \
                else source.cluster_role(name)

        def namespace_of(obj: Any) -> str:
            return str((obj.get("metadata") or {}).get("namespace") or "")

        def role_check(resource: str) -> Admission:
            async def admit(new: Any, old: Any, attrs: AdmissionAttributes) -> None:
                if attrs.user is not None and new is not None:
                    escalation.check_role(attrs.user, new, resource=resource,
                                          namespace=namespace_of(new), authorizer=authorizer,
                                          resolver=resolver)
            return admit

        def binding_check(resource: str) -> Admission:
            async def admit(new: Any, old: Any, attrs: AdmissionAttributes) -> None:
                if attrs.user is not None and new is not None:
                    escalation.check_binding(attrs.user, new, resource=resource,
                                             namespace=namespace_of(new),
                                             authorizer=authorizer, resolver=resolver,
                                             lookup=lookup)
            return admit

        for resource in ("roles", "clusterroles"):
            catalog.store(RBAC, resource).admission.append(role_check(resource))
        for resource in ("rolebindings", "clusterrolebindings"):
            catalog.store(RBAC, resource).admission.append(binding_check(resource))
