"""Who is asking and what they may do: authentication, RBAC authorization, impersonation.

The package is pure (no I/O, no asyncio): the server feeds it requests' credentials and the
RBAC objects it holds, and asks it questions. ``user`` names identities, ``authenticator``
turns credentials into one, ``attributes`` describes what a request does, ``rbac`` decides.
"""
