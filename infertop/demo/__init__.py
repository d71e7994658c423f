"""The demo: scripted bottleneck scenarios as one package.

``scenario`` (TOML -> validated phases), ``engine`` (a serving engine's simulation),
``sim`` (the scenario run: GPUs, engines, processes per tick), ``hist`` (histogram
buckets), ``exposition`` (real /metrics text in each server's dialect), ``readings``
(NVML and process samples).  These are pure, like the rest of the core.  ``source`` (a
SnapshotSource for the app) and ``server`` (an HTTP /metrics server) are the package's
two adapters: they may use asyncio and the probes' helpers, never the TUI.
"""
