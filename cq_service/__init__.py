"""cq-service: an adaptive continuous-query service for CQL pipelines."""

__all__ = ["__version__"]

__version__ = "0.1.0"
