"""Smoke tests of the benchmark scripts (no timing checks)."""
