"""Throughput and latency benchmarks of the storage engine; ``python -m benchmarks`` runs them all."""
