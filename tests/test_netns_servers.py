"""Servers in real network and PID namespaces, as containers and pods run them (root only).

Two fake vLLM servers, each in its own network namespace (behind a veth pair, with its own
address) and PID namespace, both on port 8000, one a Docker container and one a Kubernetes
pod by their cgroups and runtime metadata (tests/helpers/netns_world.py).  ``infertop snapshot --json`` with no
--url finds both by process and reads both, each labelled with its container; without
CAP_SYS_ADMIN it reads one through a docker-proxy's published host port (a port its command
line never names); as another user, at its namespace's own address, or, when its port is
on its namespace's loopback only, with one line saying why and which --url to pass.  A
pod's server that restarts is read again in the namespace the pod kept.  Where the runner is
not root these skip with the reason (CI runs as root).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from helpers.netns_world import Pod, Proxy, free_port, why_not_root

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(bool(why_not_root()), reason=why_not_root() or "-")]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("netns")
    tmp.chmod(0o755)   # the unprivileged run reads the fake vllm's directory
    with Pod(tmp, 8000, "vllm-a") as a, Pod(tmp, 8000, "qwen-0", pod_namespace="llm") as b:
        yield tmp, a, b


def snapshot(tmp: Path, *args: str, prefix: tuple[str, ...] = (), **env: str) -> dict:
    e = dict(os.environ, INFERTOP_HOST_ROOT=str(tmp / "hostroot"), **env)
    r = subprocess.run([*prefix, sys.executable, "-m", "infertop", "snapshot", "--json", *args],
                       capture_output=True, text=True, env=e, timeout=180, cwd=tmp)
    assert r.stdout.strip(), r.stderr
    return json.loads(r.stdout)


def server_sources(doc: dict) -> dict[str, dict]:
    return {k: v for k, v in doc["sources"].items() if k.startswith("server:")}


def test_the_servers_really_are_in_other_namespaces(world):
    _, a, b = world
    for pod in (a, b):
        pid = pod.server_pid()
        for ns in ("net", "pid"):
            assert os.readlink(f"/proc/{pid}/ns/{ns}") != os.readlink(f"/proc/self/ns/{ns}")


def test_two_namespaced_servers_are_found_by_process_and_read_with_no_flags(world):
    tmp, a, b = world
    got = server_sources(snapshot(tmp))
    for pod in (a, b):
        src = got.get(f"server:{pod.addr}:8000")
        assert src is not None, got
        assert src["status"] == "ok", src
        assert src["via"] == f"in {pod.place}, read through its network namespace"
        if pod.cgroup is not None:   # a writable cgroup hierarchy: the runtime's path, named
            assert src["container"] == pod.label


def test_a_published_host_port_is_read_when_the_namespace_cannot_be_entered(world):
    tmp, a, _ = world
    if shutil.which("setpriv") is None:
        pytest.skip("needs setpriv (util-linux) to drop CAP_SYS_ADMIN")
    port = free_port()
    with Proxy(tmp, a, port):
        doc = snapshot(tmp, "--pid", str(a.server_pid()),
                       prefix=("setpriv", "--bounding-set=-sys_admin", "--inh-caps=-sys_admin"))
    src = server_sources(doc)
    assert list(src) == [f"server:127.0.0.1:{port}"], src
    only = src[f"server:127.0.0.1:{port}"]
    assert only["status"] == "ok", only
    assert f"read at its published host port {port}" in only["via"]
    assert f"{a.addr}:8000" in only["via"]
    if a.cgroup is not None:
        assert only["container"] == a.name


def test_another_user_reads_it_at_its_namespace_address_and_is_told_why(world):
    tmp, _, b = world
    if shutil.which("setpriv") is None:
        pytest.skip("needs setpriv (util-linux) to run as another user")
    home = Path(tempfile.mkdtemp(prefix="infertop-nobody-"))   # pytest's tmp is root's only
    try:
        home.chmod(0o755)
        doc = snapshot(home, "--pid", str(b.server_pid()), HOME=str(home),
                       prefix=("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"))
    finally:
        shutil.rmtree(home, ignore_errors=True)
    src = server_sources(doc)
    assert list(src) == [f"server:{b.addr}:8000"], src
    got = src[f"server:{b.addr}:8000"]
    assert got["status"] == "ok", got
    assert "read at its own address (not root: cannot enter its network namespace)" in got["via"]


async def test_a_pod_server_that_restarts_is_read_again_in_the_namespace_it_kept(tmp_path):
    from infertop.probes.server.discovery import ServerProcess
    from infertop.probes.server.metrics import ServerMetricsError, ServerMetricsProbe
    from infertop.probes.server.reach import plan_for
    with Pod(tmp_path, 8000, "vllm-r") as pod:
        first = pod.server_pid()
        route = plan_for(ServerProcess(first, "vllm", "vllm", [], 8000, ""))
        assert route is not None and route.netns_pid == first
        probe = ServerMetricsProbe(route.url, route=route)
        try:
            assert (await probe.collect()).status.value == "ok"
            pod.restart()            # a new pid; the pod's namespace stays
            assert pod.server_pid() != first
            got = None
            for _ in range(20):      # the kept connection was closed with the old server
                try:
                    got = await probe.collect()
                    break
                except ServerMetricsError:
                    await asyncio.sleep(0.5)
            assert got is not None and got.status.value == "ok"
        finally:
            await probe.close()


def test_another_user_told_why_and_which_url_when_nothing_reaches_it(tmp_path):
    if shutil.which("setpriv") is None:
        pytest.skip("needs setpriv (util-linux) to run as another user")
    home = Path(tempfile.mkdtemp(prefix="infertop-nobody-"))
    try:
        home.chmod(0o755)
        with Pod(tmp_path, 8000, "vllm-lo", listen="127.0.0.1") as pod:
            doc = snapshot(home, "--pid", str(pod.server_pid()), HOME=str(home),
                           prefix=("setpriv", "--reuid=65534", "--regid=65534",
                                   "--clear-groups"))
            labelled = pod.cgroup is not None
    finally:
        shutil.rmtree(home, ignore_errors=True)
    (name, got), = server_sources(doc).items()
    assert got["status"] == "error", got
    said = got["reason"]
    where = "in container docker " if labelled else "'s network namespace"
    assert "listens on port 8000 in " in said and where in said, said
    assert "run infertop as root" in said
    assert "--url http://127.0.0.1:HOST" in said and "is the server running" not in said
    assert doc["unreachable"][name] == said
