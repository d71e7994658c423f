"""One module per inference-server kind, and the registry the rest of infertop asks.

    spec.py      ServerKind: what a kind declares (one place per kind)
    mapping.py   the /metrics dialect vocabulary (FamilyMap rules, the extras' context)
    flags.py     the command-line flag reader the kinds' settings tables use
    registry.py  KINDS, kind(name), and the lookups (dialects, ports, roles, ...)
    vllm.py, sglang.py, tgi.py, llamacpp.py, triton.py, trtllm.py: one kind each

Pure core: nothing here imports probes/, tui/ or cli/.  Adding a kind: docs/servers.md.
"""
