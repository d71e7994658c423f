"""infertop.probes: every source of Samples (I/O lives here, never in the core or panes).

Heavy or optional libraries (pynvml, psutil, httpx) are imported lazily inside the probe
that needs them: a missing library or GPU is a Capability that says why, not an ImportError.
"""
