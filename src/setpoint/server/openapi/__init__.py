"""The OpenAPI the server publishes: ``/openapi/v2`` (JSON and gnostic protobuf) and
``/openapi/v3`` (an index and one document per group-version).

kubectl reads them for ``create``/``apply`` (server-side field validation is chosen from the v3
PATCH operations; a ``kind: List`` is validated client-side against v2; client-side ``apply``
builds strategic merge patches from the patch-strategy extensions), for ``explain`` (the v3
component schemas, tagged with an array of group-version-kinds) and for ``diff``.

Modules: :mod:`~.builtins` (Kubernetes' published definitions of the built-in kinds, shipped
as ``kubernetes.json``), :mod:`~.schemas` (v2/v3 schema forms, CRD schema conversion),
:mod:`~.paths` (operations), :mod:`~.fragments` (one resource version's part),
:mod:`~.documents` (assembly and caching per catalog generation), :mod:`~.gnostic` (the
protobuf form) and :mod:`~.handler` (HTTP: negotiation, ETags, 304, compression).
"""
