"""Benchmarks: commands that measure and print tables (never timed tests)."""
