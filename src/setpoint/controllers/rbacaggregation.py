"""ClusterRole aggregation: ``admin``, ``edit``, ``view`` and every aggregated role stay the
union of the roles they select.

An ordinary controller for ClusterRoles (:func:`aggregation_controller`), as Kubernetes'
clusterrole-aggregation controller works: any ClusterRole change reconciles, and a reconcile
recomputes every aggregated role from the cache
(:func:`setpoint.auth.rbac.aggregation.aggregated_rules`), writing those whose rules differ.
So a CRD's author adds its kinds to ``edit`` by creating a ClusterRole labelled
``rbac.authorization.k8s.io/aggregate-to-edit: "true"``.

Invariants: writes carry the resourceVersion the rules were computed from (a conflict
requeues); one worker, so two reconciles never race on the same roles.
"""

from __future__ import annotations

from typing import Final

from setpoint import runtime
from setpoint.apimachinery import errors
from setpoint.auth.rbac.aggregation import aggregated_rules

CLUSTER_ROLE: Final = ("rbac.authorization.k8s.io/v1", "ClusterRole")


async def aggregate(request: runtime.Request, ctx: runtime.Context) -> runtime.Result:
    roles = ctx.cache.list()
    for role in roles:
        rules = aggregated_rules(role, roles)
        if rules is None or rules == (role.get("rules") or []):
            continue
        try:
            await ctx.client.update({**role, "rules": rules}, resource=CLUSTER_ROLE)
        except errors.Conflict:
            return runtime.Result(requeue=True)
        except errors.NotFound:
            continue
        ctx.logger.info("aggregated %d rules into ClusterRole %s", len(rules),
                        role["metadata"]["name"])
    return runtime.Result.done()


def aggregation_controller() -> runtime.Controller:
    return runtime.Controller(for_=CLUSTER_ROLE, reconcile=aggregate,
                              name="clusterrole-aggregation").with_options(workers=1)
