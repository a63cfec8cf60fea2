"""Throughput benchmarks of the reference trainer (``python -m benchmarks.<name>``)."""
