"""Benchmarks that replay public data sets through the filter and the memory service."""
