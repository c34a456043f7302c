// The health rule, the same for every kind (docs/ui.md, "Health"):
//  1. metadata.deletionTimestamp set                          -> terminating
//  2. status.observedGeneration < metadata.generation         -> progressing (status is stale)
//  3. a Stalled condition True, or Ready / Available False,
//     or status.phase Failed                                  -> not ready (with its message)
//  4. Ready / Available Unknown, a Reconciling condition True, or
//     a Ready / Available condition whose observedGeneration
//     is older than metadata.generation                       -> progressing
//  5. Ready / Available True (all of them), or phase
//     Succeeded / Active                                      -> ready
//  6. no Ready / Available condition, but a numeric spec.replicas
//     and status.observedGeneration (a scalable kind's status):
//     status.availableReplicas (else readyReplicas; absent
//     is 0) >= spec.replicas -> ready, fewer -> progressing
//  7. nothing of the above                                    -> unknown (the kind reports no health)

const READY_TYPES = ["Ready", "Available"];

function conditionsOf(obj) {
  const conds = obj && obj.status && obj.status.conditions;
  return Array.isArray(conds) ? conds.filter((c) => c && typeof c === "object") : [];
}

function describe(c) {
  const parts = [`${c.type}=${c.status}`];
  if (c.reason) parts.push(String(c.reason));
  if (c.message) parts.push(String(c.message));
  return parts.join(": ");
}

export function health(obj) {
  const meta = (obj && obj.metadata) || {};
  const status = (obj && obj.status) || {};
  if (meta.deletionTimestamp) {
    return { state: "terminating", message: `being deleted since ${meta.deletionTimestamp}` };
  }
  const gen = meta.generation;
  const observed = status.observedGeneration;
  if (typeof gen === "number" && typeof observed === "number" && observed < gen) {
    return { state: "progressing",
             message: `observedGeneration ${observed} < generation ${gen}` };
  }
  const conds = conditionsOf(obj);
  const stalled = conds.find((c) => c.type === "Stalled" && c.status === "True");
  if (stalled) return { state: "not-ready", message: describe(stalled) };
  const readiness = conds.filter((c) => READY_TYPES.includes(c.type));
  const bad = readiness.find((c) => c.status === "False");
  if (bad) return { state: "not-ready", message: describe(bad) };
  if (status.phase === "Failed") {
    return { state: "not-ready", message: `phase Failed${status.message ? ": " + status.message : ""}` };
  }
  const unsure = readiness.find((c) => c.status !== "True");
  if (unsure) return { state: "progressing", message: describe(unsure) };
  const busy = conds.find((c) => c.type === "Reconciling" && c.status === "True");
  if (busy) return { state: "progressing", message: describe(busy) };
  const stale = readiness.find((c) => typeof c.observedGeneration === "number"
                                      && typeof gen === "number" && c.observedGeneration < gen);
  if (stale) {
    return { state: "progressing",
             message: `${stale.type} describes generation ${stale.observedGeneration} < ${gen}` };
  }
  if (readiness.length > 0) return { state: "ready", message: readiness.map(describe).join("; ") };
  if (status.phase === "Succeeded" || status.phase === "Active") {
    return { state: "ready", message: `phase ${status.phase}` };
  }
  const wanted = obj && obj.spec && obj.spec.replicas;
  if (typeof wanted === "number" && typeof observed === "number") {
    const counted = typeof status.availableReplicas === "number" ? ["available", status.availableReplicas]
      : ["ready", typeof status.readyReplicas === "number" ? status.readyReplicas : 0];
    const message = `${counted[1]} of ${wanted} replicas ${counted[0]}`;
    return { state: counted[1] >= wanted ? "ready" : "progressing", message };
  }
  return { state: "unknown", message: "reports no Ready or Available condition" };
}

export const LABELS = {
  "ready": "ready", "not-ready": "not ready", "progressing": "progressing",
  "terminating": "terminating", "unknown": "–",
};
