"""Modal and full screens: help, findings, capture."""
