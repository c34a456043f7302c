"""The roles and bindings every cluster starts with (Kubernetes' bootstrap policy).

Kept in step with Kubernetes where the same names exist: ``cluster-admin`` for
``system:masters``; the user-facing ``admin``, ``edit`` and ``view``, aggregated from the
``system:aggregate-to-*`` roles by label, so that a CRD's own roles can join them; discovery,
basic-user and public-info-viewer for every user; and one role per built-in controller,
bound to that controller's ServiceAccount in ``kube-system``.

The objects carry ``rbac.authorization.kubernetes.io/autoupdate: "true"``: at start-up the
server adds whatever rules or subjects are missing from them (never removes), unless an
administrator set the annotation to ``"false"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from setpoint.auth import user as users
from setpoint.auth.rbac.rules import PolicyRule

Obj = dict[str, Any]

API_VERSION: Final = "rbac.authorization.k8s.io/v1"
AUTOUPDATE: Final = "rbac.authorization.kubernetes.io/autoupdate"
BOOTSTRAPPING_LABEL: Final = "kubernetes.io/bootstrapping"
AGGREGATE_TO_ADMIN: Final = "rbac.authorization.k8s.io/aggregate-to-admin"
AGGREGATE_TO_EDIT: Final = "rbac.authorization.k8s.io/aggregate-to-edit"
AGGREGATE_TO_VIEW: Final = "rbac.authorization.k8s.io/aggregate-to-view"

READ: Final = ("get", "list", "watch")
WRITE: Final = ("create", "delete", "deletecollection", "patch", "update")
READ_WRITE: Final = (*WRITE, *READ)

#: the ServiceAccounts (in kube-system) the built-in controllers act as, by controller name
CONTROLLER_ACCOUNTS: Final = {
    "garbagecollector": "generic-garbage-collector",
    "namespace": "namespace-controller",
    "crd": "crd-cleanup-controller",
    "clusterrole-aggregation": "clusterrole-aggregation-controller",
    "serviceaccount": "service-account-controller",
    "root-ca-cert-publisher": "root-ca-cert-publisher",
    "nodelifecycle": "node-controller",
    "taint-eviction-controller": "taint-eviction-controller",
    "endpoint": "endpoint-controller",
    "endpointslice": "endpointslice-controller",
    "replicaset": "replicaset-controller",
    "deployment": "deployment-controller",
    "job": "job-controller",
    "ttl-after-finished": "ttl-after-finished-controller",
    "cronjob": "cronjob-controller",
    "daemonset": "daemon-set-controller",
    "statefulset": "statefulset-controller",
    "disruption": "disruption-controller",
    "csrsigning": "certificate-controller",
}
#: built-in controllers that act as a user of their own rather than a ServiceAccount
CONTROLLER_USERS: Final = {"scheduler": "system:kube-scheduler"}
SCHEDULER_USER: Final = CONTROLLER_USERS["scheduler"]


def rule(verbs: Sequence[str], groups: Sequence[str] = (), resources: Sequence[str] = (), *,
         names: Sequence[str] = (), urls: Sequence[str] = ()) -> PolicyRule:
    return PolicyRule(tuple(verbs), tuple(groups), tuple(resources), tuple(names), tuple(urls))


def _meta(name: str, labels: dict[str, str] | None = None) -> Obj:
    return {"name": name, "labels": {BOOTSTRAPPING_LABEL: "rbac-defaults", **(labels or {})},
            "annotations": {AUTOUPDATE: "true"}}


def cluster_role(name: str, rules: Sequence[PolicyRule], *,
                 labels: dict[str, str] | None = None,
                 aggregate_from: str | None = None) -> Obj:
    role: Obj = {"apiVersion": API_VERSION, "kind": "ClusterRole",
                 "metadata": _meta(name, labels), "rules": [r.to_api() for r in rules]}
    if aggregate_from is not None:
        role["aggregationRule"] = {"clusterRoleSelectors": [
            {"matchLabels": {aggregate_from: "true"}}]}
    return role


def cluster_role_binding(name: str, role: str, subjects: Sequence[Obj]) -> Obj:
    return {"apiVersion": API_VERSION, "kind": "ClusterRoleBinding", "metadata": _meta(name),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": role},
            "subjects": list(subjects)}


def group(name: str) -> Obj:
    return {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": name}


def service_account(namespace: str, name: str) -> Obj:
    # apiGroup "" spelled out, as the server defaults it: a stored binding compares equal
    return {"apiGroup": "", "kind": "ServiceAccount", "name": name, "namespace": namespace}


_PUBLIC_INFO = ("/healthz", "/livez", "/readyz", "/version", "/version/")
_DISCOVERY = ("/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi",
              "/openapi/*", "/readyz", "/version", "/version/")

_VIEW_CORE = ("configmaps", "endpoints", "events", "limitranges", "namespaces",
              "namespaces/status", "persistentvolumeclaims", "persistentvolumeclaims/status",
              "pods", "pods/log", "pods/status", "replicationcontrollers",
              "replicationcontrollers/scale", "replicationcontrollers/status",
              "resourcequotas", "resourcequotas/status", "serviceaccounts", "services",
              "services/status", "bindings")
_APPS = ("controllerrevisions", "daemonsets", "daemonsets/status", "deployments",
         "deployments/scale", "deployments/status", "replicasets", "replicasets/scale",
         "replicasets/status", "statefulsets", "statefulsets/scale", "statefulsets/status")
_BATCH = ("cronjobs", "cronjobs/status", "jobs", "jobs/status")
_POLICY = ("poddisruptionbudgets", "poddisruptionbudgets/status")
_EDIT_CORE = ("configmaps", "events", "persistentvolumeclaims", "replicationcontrollers",
              "replicationcontrollers/scale", "secrets", "serviceaccounts", "services",
              "services/proxy")
_POD_ACCESS = ("pods/attach", "pods/exec", "pods/portforward", "pods/proxy")


def _aggregate_roles() -> list[Obj]:
    view = [
        rule(READ, [""], _VIEW_CORE),
        rule(READ, ["apps"], _APPS),
        rule(READ, ["batch"], _BATCH),
        rule(READ, ["policy"], _POLICY),
        rule(READ, ["discovery.k8s.io"], ["endpointslices"]),
        rule(READ, ["coordination.k8s.io"], ["leases"]),
        rule(READ, ["events.k8s.io"], ["events"]),
    ]
    edit = [
        rule(READ, [""], (*_POD_ACCESS, "secrets", "services/proxy")),
        rule(["impersonate"], [""], ["serviceaccounts"]),
        rule(WRITE, [""], ("pods", *_POD_ACCESS)),
        rule(["create"], [""], ["pods/eviction"]),
        rule(WRITE, [""], _EDIT_CORE),
        rule(["create"], [""], ["serviceaccounts/token"]),
        rule(WRITE, ["apps"], _APPS),
        rule(WRITE, ["batch"], _BATCH),
        rule(WRITE, ["policy"], ["poddisruptionbudgets"]),
        rule(WRITE, ["discovery.k8s.io"], ["endpointslices"]),
        rule(WRITE, ["coordination.k8s.io"], ["leases"]),
        rule(WRITE, ["events.k8s.io"], ["events"]),
    ]
    admin = [
        rule(["create"], ["authorization.k8s.io"], ["localsubjectaccessreviews"]),
        rule(READ_WRITE, ["rbac.authorization.k8s.io"], ["rolebindings", "roles"]),
    ]
    return [
        cluster_role("system:aggregate-to-view", view, labels={AGGREGATE_TO_VIEW: "true"}),
        cluster_role("system:aggregate-to-edit", edit, labels={AGGREGATE_TO_EDIT: "true"}),
        cluster_role("system:aggregate-to-admin", admin, labels={AGGREGATE_TO_ADMIN: "true"}),
        # what metrics-server's manifest installs: kubectl top for whoever may view
        cluster_role("system:aggregated-metrics-reader",
                     [rule(READ, ["metrics.k8s.io"], ["pods", "nodes"])],
                     labels={AGGREGATE_TO_VIEW: "true", AGGREGATE_TO_EDIT: "true",
                             AGGREGATE_TO_ADMIN: "true"}),
        cluster_role("view", [], labels={AGGREGATE_TO_EDIT: "true"},
                     aggregate_from=AGGREGATE_TO_VIEW),
        cluster_role("edit", [], labels={AGGREGATE_TO_ADMIN: "true"},
                     aggregate_from=AGGREGATE_TO_EDIT),
        cluster_role("admin", [], aggregate_from=AGGREGATE_TO_ADMIN),
    ]


def _controller_roles() -> list[Obj]:
    events = [rule(["create", "patch", "update"], ["", "events.k8s.io"], ["events"])]
    leases = [rule(READ_WRITE, ["coordination.k8s.io"], ["leases"])]
    roles = {
        "generic-garbage-collector": [
            rule(("get", "list", "watch", "patch", "update", "delete"), ["*"], ["*"])],
        "namespace-controller": [
            rule(("get", "list", "watch", "delete"), [""], ["namespaces"]),
            rule(["update"], [""], ["namespaces/finalize"]),
            # Kubernetes' role has update only: this controller writes its conditions
            # with a merge patch of the status (runtime.set_conditions)
            rule(["update", "patch"], [""], ["namespaces/status"]),
            rule(("get", "list", "delete", "deletecollection"), ["*"], ["*"])],
        "crd-cleanup-controller": [
            rule(("get", "list", "watch", "update", "patch"), ["apiextensions.k8s.io"],
                 ["customresourcedefinitions", "customresourcedefinitions/status"]),
            rule(("list", "delete", "deletecollection"), ["*"], ["*"])],
        "clusterrole-aggregation-controller": [
            rule(("escalate", "get", "list", "patch", "update", "watch"),
                 ["rbac.authorization.k8s.io"], ["clusterroles"])],
        "service-account-controller": [
            rule(["create"], [""], ["serviceaccounts"]),
            rule(READ, [""], ["namespaces", "serviceaccounts"])],
        "root-ca-cert-publisher": [
            rule(["create", "update"], [""], ["configmaps"]),
            rule(READ, [""], ["namespaces", "configmaps"])],
        "node-controller": [
            rule(("get", "list", "update", "patch", "delete"), [""], ["nodes"]),
            rule(["patch", "update"], [""], ["nodes/status", "pods/status"]),
            rule(("list", "delete"), [""], ["pods"])],
        "taint-eviction-controller": [
            rule(READ, [""], ["nodes"]),
            rule(("get", "list", "watch", "delete"), [""], ["pods"])],
        "endpoint-controller": [
            rule(READ, [""], ["pods", "services"]),
            rule(("create", "delete", "get", "list", "update"), [""], ["endpoints"]),
            rule(["create"], [""], ["endpoints/restricted"])],
        "endpointslice-controller": [
            rule(READ, [""], ["nodes", "pods", "services"]),
            rule(("create", "delete", "get", "list", "update"), ["discovery.k8s.io"],
                 ["endpointslices"])],
        "replicaset-controller": [
            rule(("get", "list", "watch", "update"), ["apps", "extensions"], ["replicasets"]),
            rule(["update"], ["apps", "extensions"], ["replicasets/status"]),
            rule(["update"], ["apps", "extensions"], ["replicasets/finalizers"]),
            rule(("list", "watch", "patch", "create", "delete"), [""], ["pods"])],
        "deployment-controller": [
            rule(("get", "list", "watch", "update"), ["apps", "extensions"], ["deployments"]),
            # Kubernetes' role has update only: a name collision is counted with a patch
            rule(["update", "patch"], ["apps", "extensions"], ["deployments/status"]),
            rule(["update"], ["apps", "extensions"], ["deployments/finalizers"]),
            rule(("get", "list", "watch", "create", "update", "patch", "delete"),
                 ["apps", "extensions"], ["replicasets"]),
            rule(("get", "list", "watch", "update"), [""], ["pods"])],
        "job-controller": [
            rule(("get", "list", "watch", "update", "patch"), ["batch"], ["jobs"]),
            rule(["update", "patch"], ["batch"], ["jobs/status"]),
            rule(["update"], ["batch"], ["jobs/finalizers"]),
            rule(("list", "watch", "create", "delete", "patch"), [""], ["pods"])],
        "ttl-after-finished-controller": [
            rule(("delete", "get", "list", "watch"), ["batch"], ["jobs"])],
        "cronjob-controller": [
            rule(("get", "list", "watch", "update"), ["batch"], ["cronjobs"]),
            rule(("get", "list", "watch", "create", "update", "delete", "patch"), ["batch"],
                 ["jobs"]),
            rule(["update"], ["batch"], ["cronjobs/status"]),
            rule(["update"], ["batch"], ["cronjobs/finalizers"]),
            rule(("list", "delete"), [""], ["pods"])],
        "daemon-set-controller": [
            rule(("get", "list", "watch"), ["apps"], ["daemonsets"]),
            rule(["update"], ["apps"], ["daemonsets/status"]),
            rule(["update"], ["apps"], ["daemonsets/finalizers"]),
            rule(("get", "list", "watch"), [""], ["nodes"]),
            rule(("list", "watch", "create", "delete", "patch"), [""], ["pods"]),
            rule(["create"], [""], ["pods/binding"]),
            rule(("create", "delete", "update", "patch", "list", "watch"), ["apps"],
                 ["controllerrevisions"])],
        "statefulset-controller": [
            rule(("list", "watch"), ["apps"], ["statefulsets"]),
            rule(["get"], ["apps"], ["statefulsets"]),
            rule(["update"], ["apps"], ["statefulsets/status"]),
            rule(["update"], ["apps"], ["statefulsets/finalizers"]),
            rule(("get", "create", "delete", "update", "patch"), [""], ["pods"]),
            rule(("get", "create", "delete", "update", "patch", "list", "watch"), ["apps"],
                 ["controllerrevisions"]),
            rule(["get", "create"], [""], ["persistentvolumeclaims"]),
            rule(["update", "delete"], [""], ["persistentvolumeclaims"])],
        "certificate-controller": [
            rule(READ, ["certificates.k8s.io"], ["certificatesigningrequests"]),
            rule(["update"], ["certificates.k8s.io"], ["certificatesigningrequests/status"]),
            rule(["sign"], ["certificates.k8s.io"], ["signers"],
                 names=["kubernetes.io/kube-apiserver-client", "kubernetes.io/kubelet-serving",
                        "setpoint.dev/serving"]),
            # each signer publishes its CA as a ClusterTrustBundle
            rule(("get", "list", "watch", "create", "update"), ["certificates.k8s.io"],
                 ["clustertrustbundles"]),
            rule(["attest"], ["certificates.k8s.io"], ["signers"],
                 names=["kubernetes.io/kube-apiserver-client", "kubernetes.io/kubelet-serving",
                        "setpoint.dev/serving"])],
        "disruption-controller": [
            rule(READ, ["apps", "extensions"], ["deployments", "replicasets"]),
            rule(READ, [""], ["replicationcontrollers"]),
            rule(READ, ["policy"], ["poddisruptionbudgets"]),
            rule(READ, ["apps"], ["statefulsets"]),
            rule(["update"], ["policy"], ["poddisruptionbudgets/status"]),
            rule(["get"], ["*"], ["*/scale"]),
            rule(["patch", "update"], [""], ["pods/status"])],
    }
    return [cluster_role(f"system:controller:{name}", [*rules, *events, *leases])
            for name, rules in roles.items()]


#: the identity ``setpoint controller-manager`` reads its shared caches and holds its Lease
#: with (each controller writes as its own ServiceAccount)
CONTROLLER_MANAGER_USER: Final = "system:kube-controller-manager"


#: the ClusterRole ``system:node`` (bound to nobody: the Node authorizer, with rules of its
#: own, decides what node agents may do; see :mod:`setpoint.auth.nodeauthorizer`).
#: Kubernetes narrows it further with its Node authorizer (a node reads only the Secrets and
#: ConfigMaps of its own pods, writes only its own Node, Lease and pods' status); setpoint
#: has no Node authorizer: any node may do this to any node's objects.
NODE_RULES: Final = (
    rule(("create", "get", "list", "watch", "update", "patch", "delete"), [""], ["nodes"]),
    rule(("patch", "update"), [""], ["nodes/status"]),
    rule(("get", "list", "watch", "delete"), [""], ["pods"]),
    rule(("patch", "update"), [""], ["pods/status"]),
    rule(["create"], [""], ["pods/eviction"]),
    rule(("get", "list", "watch"), [""], ["services", "endpoints", "configmaps", "secrets",
                                           "persistentvolumeclaims", "persistentvolumes"]),
    rule(["create"], [""], ["serviceaccounts/token"]),
    rule(("create", "patch", "update"), ["", "events.k8s.io"], ["events"]),
    rule(("create", "get", "list", "watch", "update", "patch", "delete"),
         ["coordination.k8s.io"], ["leases"]),
    rule(("get", "list", "watch"), ["discovery.k8s.io"], ["endpointslices"]),
    rule(["create"], ["authentication.k8s.io"], ["tokenreviews"]),
    rule(["create"], ["authorization.k8s.io"], ["subjectaccessreviews"]),
)


def cluster_roles() -> list[Obj]:
    everything = [rule(["*"], ["*"], ["*"]), rule(["*"], urls=["*"])]
    return [
        cluster_role("system:node", NODE_RULES),
        cluster_role(CONTROLLER_MANAGER_USER, [
            rule(READ, ["*"], ["*"]),
            rule(("create", "get", "update"), ["coordination.k8s.io"], ["leases"]),
            rule(["create", "patch", "update"], ["", "events.k8s.io"], ["events"])]),
        cluster_role(SCHEDULER_USER, [
            rule(READ, [""], ["namespaces", "nodes", "pods", "services",
                              "persistentvolumeclaims", "persistentvolumes",
                              "replicationcontrollers"]),
            rule(["create"], [""], ["bindings", "pods/binding"]),
            rule(["patch", "update"], [""], ["pods/status"]),
            rule(["delete"], [""], ["pods"]),
            rule(READ, ["apps"], ["replicasets", "statefulsets"]),
            rule(READ, ["policy"], ["poddisruptionbudgets"]),
            rule(("create", "get", "update"), ["coordination.k8s.io"], ["leases"]),
            rule(["create", "patch", "update"], ["", "events.k8s.io"], ["events"])]),
        cluster_role("cluster-admin", everything),
        cluster_role("system:discovery", [rule(["get"], urls=_DISCOVERY)]),
        cluster_role("system:public-info-viewer", [rule(["get"], urls=_PUBLIC_INFO)]),
        cluster_role("system:basic-user", [
            rule(["create"], ["authentication.k8s.io"], ["selfsubjectreviews"]),
            rule(["create"], ["authorization.k8s.io"],
                 ["selfsubjectaccessreviews", "selfsubjectrulesreviews"])]),
        cluster_role("system:auth-delegator", [
            rule(["create"], ["authentication.k8s.io"], ["tokenreviews"]),
            rule(["create"], ["authorization.k8s.io"], ["subjectaccessreviews"])]),
        cluster_role("system:service-account-issuer-discovery", [
            rule(["get"], urls=["/.well-known/openid-configuration",
                                "/.well-known/openid-configuration/", "/openid/v1/jwks",
                                "/openid/v1/jwks/"])]),
        *_aggregate_roles(),
        *_controller_roles(),
    ]


def cluster_role_bindings() -> list[Obj]:
    bindings = [
        cluster_role_binding("cluster-admin", "cluster-admin", [group(users.SYSTEM_MASTERS)]),
        cluster_role_binding("system:discovery", "system:discovery",
                             [group(users.ALL_AUTHENTICATED)]),
        cluster_role_binding("system:basic-user", "system:basic-user",
                             [group(users.ALL_AUTHENTICATED)]),
        cluster_role_binding("system:public-info-viewer", "system:public-info-viewer",
                             [group(users.ALL_AUTHENTICATED),
                              group(users.ALL_UNAUTHENTICATED)]),
        # bound to nobody, as in Kubernetes: the Node authorizer decides what nodes may do
        cluster_role_binding("system:node", "system:node", []),
        cluster_role_binding(CONTROLLER_MANAGER_USER, CONTROLLER_MANAGER_USER, [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
             "name": CONTROLLER_MANAGER_USER}]),
        cluster_role_binding(SCHEDULER_USER, SCHEDULER_USER, [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
             "name": SCHEDULER_USER}]),
        cluster_role_binding("system:service-account-issuer-discovery",
                             "system:service-account-issuer-discovery",
                             [group(users.SERVICE_ACCOUNTS_GROUP)]),
    ]
    for account in CONTROLLER_ACCOUNTS.values():
        name = f"system:controller:{account}"
        bindings.append(cluster_role_binding(name, name,
                                             [service_account("kube-system", account)]))
    return bindings


def controller_user(controller: str) -> tuple[str, tuple[str, ...]]:
    """(user name, groups) the built-in ``controller`` acts as."""
    if controller in CONTROLLER_USERS:
        return CONTROLLER_USERS[controller], ()
    account = CONTROLLER_ACCOUNTS[controller]
    return (users.service_account_username("kube-system", account),
            users.service_account_groups("kube-system"))
