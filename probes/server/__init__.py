"""The inference server seen from outside: its process tree and threads (``process``), how
it is found (``discovery``), its settings from its command line (``settings``) and its
``/metrics`` page (``metrics``)."""
