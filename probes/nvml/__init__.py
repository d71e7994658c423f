"""NVML and GPM: one GPU probe (``probe.NvmlProbe``) built from guarded calls (``calls``),
per-GPU fast readings (``gpu``), GPM counters (``gpm``), PCIe/NVLink (``links``), the slow
cadence (``slow``: processes, topology, ECC) and decoders of NVML's bit fields (``decode``)."""
