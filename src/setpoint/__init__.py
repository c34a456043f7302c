"""setpoint: a declarative control plane compatible with the Kubernetes API, in Python."""

__version__ = "0.1.0"

__all__ = ["__version__"]
