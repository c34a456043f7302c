"""Admission control: ValidatingAdmissionPolicies evaluated in CEL on every write.

* :mod:`~setpoint.admission.expressions` — the CEL environment of admission expressions
  (``object``, ``oldObject``, ``request``, ``params``, ``namespaceObject``, ``variables``,
  ``authorizer``) and its cost limits;
* :mod:`~setpoint.admission.authz` — the ``authorizer`` library;
* :mod:`~setpoint.admission.matching` — ``matchConstraints`` / ``matchResources``;
* :mod:`~setpoint.admission.policy` — a policy compiled and evaluated;
* :mod:`~setpoint.admission.validation` — what a stored policy or binding must satisfy;
* :mod:`~setpoint.admission.typechecking` — ``status.typeChecking`` against known schemas.

Pure: nothing here does I/O; the registry supplies objects, params, namespaces and the
authorizer (:mod:`setpoint.registry.policies` is where requests meet policies).
"""
