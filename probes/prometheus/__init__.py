"""A fleet read through Prometheus's HTTP API: the client and the fleet source."""
