"""infertop: top for LLM inference servers.

This package is the pure core (model, keys, history, exposition parser, rules, recording
codec, config).  It imports no I/O library: probes live in ``infertop.probes``, the
screen in ``infertop.tui``.
"""

__version__ = "0.1.0"
