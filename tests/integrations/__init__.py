"""Tests of toolguard.integrations and of tools built from JSON Schemas."""
