"""Command line: serve, migrate, status."""
