"""One-line errors and exit codes shared by every command."""

from __future__ import annotations

EXIT_OK, EXIT_USAGE, EXIT_NO_SOURCE = 0, 2, 3



class UsageError(Exception):
    """A problem with what the user asked for: one line, exit 2."""
