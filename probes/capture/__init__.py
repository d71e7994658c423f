"""Captures started from a key press: py-spy dumps, recordings and the GIL sampler, Nsight
Systems, the server's own profiler endpoint, flame graphs, and where capture files go."""
