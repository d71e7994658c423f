"""Diagnosis rules, one module per layer: History + Snapshot -> Findings."""
