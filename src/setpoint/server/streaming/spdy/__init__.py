"""SPDY/3.1, as Kubernetes' streaming clients speak it: frames, header blocks, a session."""
