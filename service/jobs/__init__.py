"""Durable background jobs (procrastinate on the same PostgreSQL)."""
