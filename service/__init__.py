"""Memory service for Open WebUI: extraction, storage, retrieval and privacy of user memories."""

__version__ = "0.1.0"
