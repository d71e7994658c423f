"""Servers in containers, as tables: container ids and names from cgroup paths and the
runtimes' metadata, a namespace's addresses and listeners from /proc text, docker-proxy's
arguments, and which way a namespaced server is read (probes/server/reach.py).  The same
paths run against real namespaces in tests/test_netns_servers.py (root only)."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from infertop.probes.server import netns
from infertop.probes.server.containers import (
    Container,
    container_of,
    name_from_docker,
    name_from_oci,
    named,
    parse_cgroup,
)
from infertop.probes.server.discovery import ProcInfo, ServerProcess
from infertop.probes.server.metrics import ServerMetricsError, ServerMetricsProbe
from infertop.probes.server.reach import (
    Published,
    Route,
    parse_proxy_args,
    plan,
    plan_for,
    published_ports,
)

ID = "3f2a9c1b0d4e" + "a" * 52
UID = "0b6c1f9e-2d3a-4b5c-8d7e-9f0a1b2c3d4e"

CGROUPS = [
    ("0::/system.slice/docker-%s.scope\n" % ID, Container("docker", ID)),
    ("12:pids:/docker/%s\n0::/\n" % ID, Container("docker", ID)),
    ("0::/machine.slice/libpod-%s.scope/container\n" % ID, Container("podman", ID)),
    ("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%s.slice/"
     "cri-containerd-%s.scope\n" % (UID.replace("-", "_"), ID),
     Container("cri-containerd", ID, UID)),
    ("0::/kubepods.slice/kubepods-pod%s.slice/crio-%s.scope\n" % (UID.replace("-", "_"), ID),
     Container("crio", ID, UID)),
    ("11:memory:/kubepods/besteffort/pod%s/%s\n" % (UID, ID), Container("containerd", ID, UID)),
    ("0::/user.slice/user-1000.slice/session-2.scope\n", None),
    ("0::/\n", None),
    ("0::/docker/not-an-id\n", None),
]


@pytest.mark.parametrize("text,want", CGROUPS)
def test_container_ids_from_the_cgroup_paths_each_runtime_makes(text, want):
    assert parse_cgroup(text) == want


def test_labels_say_the_pod_then_the_name_then_the_runtime_and_short_id():
    assert Container("docker", ID).label == "docker 3f2a9c1b0d4e"
    assert Container("cri-containerd", ID, UID).label == "pod 0b6c1f9e"
    assert Container("docker", ID, name="vllm-a").label == "vllm-a"
    assert Container("crio", ID, UID, "vllm", "llm/qwen-0").label == "llm/qwen-0"


def test_names_from_docker_and_oci_metadata_are_cleaned_and_bounded():
    assert name_from_docker({"Name": "/vllm-a"}) == ("vllm-a", "")
    dockershim = {"Name": "/k8s_vllm_qwen-0_llm_x", "Config": {"Labels": {
        "io.kubernetes.pod.namespace": "llm", "io.kubernetes.pod.name": "qwen-0",
        "io.kubernetes.container.name": "vllm"}}}
    assert name_from_docker(dockershim) == ("k8s_vllm_qwen-0_llm_x", "llm/qwen-0")
    cri = {"annotations": {"io.kubernetes.cri.sandbox-namespace": "llm",
                           "io.kubernetes.cri.sandbox-name": "qwen-0",
                           "io.kubernetes.cri.container-name": "vllm"}}
    assert name_from_oci(cri) == ("vllm", "llm/qwen-0")
    crio = {"annotations": {"io.kubernetes.pod.namespace": "a", "io.kubernetes.pod.name": "b"}}
    assert name_from_oci(crio) == ("", "a/b")
    hostile = name_from_docker({"Name": "/\x1b[31mred" + "x" * 500, "Config": {"Labels": 3}})
    assert "\x1b" not in hostile[0] and len(hostile[0]) <= 80
    assert name_from_oci({"annotations": ["not", "a", "dict"]}) == ("", "")


def test_metadata_is_read_under_the_host_root_and_a_link_is_not_followed(tmp_path):
    d = tmp_path / "var/lib/docker/containers" / ID
    d.mkdir(parents=True)
    (d / "config.v2.json").write_text(json.dumps({"Name": "/vllm-a"}))
    assert named(Container("docker", ID), str(tmp_path)).label == "vllm-a"
    oci = tmp_path / "run/containerd/io.containerd.runtime.v2.task/k8s.io" / ID
    oci.mkdir(parents=True)
    (oci / "config.json").write_text(json.dumps({"annotations": {
        "io.kubernetes.cri.sandbox-namespace": "llm", "io.kubernetes.cri.sandbox-name": "p"}}))
    (d / "config.v2.json").unlink()
    assert named(Container("cri-containerd", ID, UID), str(tmp_path)).label == "llm/p"
    (oci / "config.json").unlink()
    (oci / "config.json").symlink_to(tmp_path / "elsewhere.json")
    (tmp_path / "elsewhere.json").write_text(json.dumps({"annotations": {
        "io.kubernetes.cri.sandbox-name": "linked"}}))
    assert named(Container("cri-containerd", ID, UID), str(tmp_path)).label == "pod 0b6c1f9e"
    (oci / "config.json").unlink()
    (oci / "config.json").write_text("{" * 100_000)   # not JSON: no name, no traceback
    assert named(Container("cri-containerd", ID, UID), str(tmp_path)).label == "pod 0b6c1f9e"


def test_container_of_reads_a_process_cgroup_file(tmp_path):
    proc = tmp_path / "proc"
    (proc / "42").mkdir(parents=True)
    (proc / "42" / "cgroup").write_text("0::/system.slice/docker-%s.scope\n" % ID)
    assert container_of(42, str(proc), str(tmp_path)) == Container("docker", ID)
    assert container_of(43, str(proc), str(tmp_path)) is None


FIB_TRIE = """\
Main:
  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 universe UNICAST
     +-- 10.231.7.0/24 2 0 2
        |-- 10.231.7.0
           /24 link UNICAST
        |-- 10.231.7.2
           /32 host LOCAL
        |-- 10.231.7.255
           /32 link BROADCAST
     +-- 127.0.0.0/8 2 0 2
        |-- 127.0.0.1
           /32 host LOCAL
Local:
  +-- 0.0.0.0/0 3 0 5
        |-- 10.231.7.2
           /32 host LOCAL
"""

TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1
   1: 0100007F:1F41 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1
   2: 0207E70A:1F40 0107E70A:D3B2 01 00000000:00000000 00:00000000 00000000     0        0 3 1
"""
TCP6 = """\
  sl  local_address                         remote_address                        st
   0: 00000000000000000000000000000000:1F42 00000000000000000000000000000000:0000 0A
   1: 0000000000000000FFFF00000207E70A:1F43 00000000000000000000000000000000:0000 0A
"""
IF_INET6 = """\
00000000000000000000000000000001 01 80 10 80       lo
fe800000000000000000000000000001 02 40 20 80     eth0
20010db8000000000000000000000002 02 40 00 80     eth0
"""


def test_a_namespace_own_addresses_and_listeners_from_proc_text():
    assert netns.parse_fib_trie(FIB_TRIE) == ("10.231.7.2",)
    assert netns.parse_listeners(TCP) == (("0.0.0.0", 8000), ("127.0.0.1", 8001))
    assert netns.parse_listeners(TCP6) == (("::", 8002), ("10.231.7.2", 8003))
    assert netns.parse_if_inet6(IF_INET6) == ("2001:db8::2",)
    assert netns.parse_listeners("header\n   0: zz:1F40 0 0A\n   1: bad\n") == ()
    ns = netns.Namespace("net:[1]", ("10.231.7.2",), (("127.0.0.1", 8001), ("0.0.0.0", 8000)))
    assert ns.bound(8000) == "0.0.0.0" and ns.bound(8001) == "127.0.0.1" and ns.bound(1) is None


def test_docker_proxy_arguments_as_docker_writes_them():
    argv = ["/usr/bin/docker-proxy", "-proto", "tcp", "-host-ip", "0.0.0.0", "-host-port",
            "9000", "-container-ip", "172.17.0.2", "-container-port", "8000", "-use-listen-fd"]
    assert parse_proxy_args(argv) == Published("0.0.0.0", 9000, "172.17.0.2", 8000)
    assert parse_proxy_args(["docker-proxy", "--host-port=9", "--container-ip=a",
                             "--container-port=8"]) == Published("0.0.0.0", 9, "a", 8)
    assert parse_proxy_args(argv[:1] + ["-proto", "udp"] + argv[3:]) is None
    assert parse_proxy_args(["docker-proxy", "-host-port", "x"]) is None
    procs = [ProcInfo(1, 0, "docker-proxy", ("/usr/bin/python3", "/x/docker-proxy", *argv[1:])),
             ProcInfo(2, 0, "bash", ("bash", "-c", "docker-proxy -host-port 1")),
             ProcInfo(3, 0, "docker-proxy", tuple(argv))]
    assert [p.host_port for p in published_ports(procs)] == [9000, 9000]


NS = netns.Namespace("net:[9]", ("10.231.7.2",), (("0.0.0.0", 8000),))
LOOP_ONLY = netns.Namespace("net:[9]", ("10.231.7.2",), (("127.0.0.1", 8000),))
C = Container("docker", ID, name="vllm-a")
PUB = [Published("0.0.0.0", 9000, "10.231.7.2", 8000)]


def test_as_root_a_namespaced_server_is_read_from_inside_at_its_own_address():
    r = plan(7, "vllm", 8000, NS, C, PUB, can_enter=True)
    assert r == Route("http://10.231.7.2:8000", "in container vllm-a, read through its "
                      "network namespace", 7, "127.0.0.1", container="vllm-a")
    # listening on its loopback only: dialled there, shown there
    r = plan(7, "vllm", 8000, LOOP_ONLY, None, [], can_enter=True)
    assert r is not None
    assert (r.url, r.netns_pid, r.connect_host) == ("http://127.0.0.1:8000", 7, "127.0.0.1")
    assert r.via == "in pid 7's network namespace, read through its network namespace"


def test_without_root_a_published_port_then_its_own_address_then_one_line_why():
    r = plan(7, "vllm", 8000, NS, C, PUB, can_enter=False)
    assert r is not None
    assert r.url == "http://127.0.0.1:9000" and r.netns_pid is None
    assert "published host port 9000" in r.via and "vllm-a" in r.via
    r = plan(7, "vllm", 8000, NS, C, [], can_enter=False)
    assert r is not None
    assert r.url == "http://10.231.7.2:8000" and "own address" in r.via
    r = plan(7, "vllm", 8000, LOOP_ONLY, C, [], can_enter=False)
    assert r is not None
    assert r.problem and "run infertop as root" in r.problem and "--url" in r.problem
    assert "is the server running" not in r.problem
    # the port from the namespace's listeners when the command line is silent
    from_listeners = plan(7, "vllm", None, NS, C, [], can_enter=True)
    assert from_listeners is not None and from_listeners.url == "http://10.231.7.2:8000"
    assert plan(7, "vllm", None, netns.Namespace("n", (), ()), C, [], True) is None


def test_an_unreachable_namespaced_server_says_why_and_which_url_never_is_it_running():
    route = Route("http://127.0.0.1:1", problem="pid 7 listens on port 8000 in container x, "
                  "not on this host's: run infertop as root ... pass --url http://127.0.0.1:HOST")
    probe = ServerMetricsProbe("http://127.0.0.1:1", route=route, timeout=0.5)

    async def go():
        try:
            await probe.collect()
        finally:
            await probe.close()
    with pytest.raises(ServerMetricsError) as e:
        asyncio.run(go())
    assert str(e.value) == route.problem


# ---- what the panes, the JSON and recordings say ------------------------------------------

def _frame(*samples):
    from infertop.model import Snapshot
    from infertop.pipeline import Pipeline
    return Pipeline().feed(Snapshot(1.0, {s.source: s for s in samples}, 1, {}))


def _server(instance: str, box: str, running: float):
    from dataclasses import replace as dc_replace

    from helpers.snapkit import reading, sample
    from infertop.meta import ServerMeta
    s = sample(f"server:{instance}", 1.0,
               [reading("server.requests_running", running, instance=instance)])
    return dc_replace(s, meta=ServerMeta(dialect="vllm", container=box, via=f"in pod {box}"))


def test_engines_of_several_pods_are_named_by_their_pod():
    from helpers.panes import pane_text
    frame = _frame(_server("10.231.7.2:8000", "llm/qwen-0", 3),
                   _server("10.231.8.2:8000", "llm/qwen-1", 5))
    text = pane_text("parallelism", frame, width=120)
    assert "llm/qwen-0" in text and "llm/qwen-1" in text
    assert "10.231.7.2:8000" not in text   # the pod, not an address nobody knows


def test_inside_a_container_the_memory_pane_says_why_no_gpu_process_is_listed():
    from dataclasses import replace as dc_replace

    from helpers.panes import pane_text
    from helpers.snapkit import reading, sample
    from infertop.meta import ProcessMeta
    nv = sample("nvml", 1.0, [reading("gpu.util_ratio", 0.5, gpu=0),
                              reading("gpu.mem_used_bytes", 1e9, gpu=0),
                              reading("gpu.mem_total_bytes", 8e10, gpu=0)])
    proc = dc_replace(sample("process", 1.0, []), meta=ProcessMeta(
        in_container=True, in_container_why="PID namespace differs from init's"))
    text = " ".join(pane_text("memory", _frame(nv, proc), width=120).split())
    assert "GPU processes not shown: infertop runs in a container" in text
    assert "NVML's PIDs are the host's" in text
    on_host = dc_replace(proc, meta=ProcessMeta(in_container=False))
    assert "GPU processes not shown" not in pane_text("memory", _frame(nv, on_host), width=120)


def test_a_gpu_process_of_another_pod_is_named_by_its_pod():
    from helpers.panes import pane_text
    from helpers.snapkit import reading, sample
    nv = sample("nvml", 1.0, [reading("gpu.mem_used_bytes", 1e9, gpu=0),
                              reading("gpu.mem_total_bytes", 8e10, gpu=0),
                              reading("process.gpu_mem_bytes", 3e9, gpu=0, pid=4242),
                              reading("process.gpu_owner", 1.0, pid=4242, name="python3",
                                      container="llm/qwen-1", text="vllm serve")])
    text = pane_text("memory", _frame(nv), width=120)
    assert "llm/qwen-1 (not the" in text


def test_the_container_survives_json_and_a_recording_round_trip():
    from infertop.meta import ProcessMeta, ServerInfo, ServerMeta, meta_from_dict
    m = ServerMeta(dialect="vllm", via="in pod llm/q, read through its network namespace",
                   container="llm/q")
    assert meta_from_dict("server:10.0.0.2:8000", m.to_dict()) == m
    info = ServerInfo(7, "vllm", "vllm", "found by name", 8000, container="vllm-a")
    assert info.to_dict()["container"] == "vllm-a"
    pm = ProcessMeta(server=info, tree=(7,))
    back = meta_from_dict("process", pm.to_dict())
    assert isinstance(back, ProcessMeta) and back.server == info
    assert "container" not in ServerInfo(7).to_dict()   # a host server's JSON is unchanged


def test_the_followed_server_process_tree_says_its_container_on_screen_and_in_json():
    from dataclasses import replace as dc_replace

    from helpers.panes import pane_text
    from helpers.snapkit import reading, sample
    from infertop.cli.sources import sources_status
    from infertop.meta import ProcessMeta, ServerInfo
    proc = dc_replace(
        sample("process", 1.0, [reading("process.info", 1.0, pid=4242, name="python",
                                        role="api_server")]),
        meta=ProcessMeta(server=ServerInfo(4242, "vllm", "python", "found by name", 8000,
                                           container="llm/qwen-0"), tree=(4242,)))
    frame = _frame(proc, _server("10.231.7.2:8000", "llm/qwen-0", 3))
    assert "pid 4242 vllm in llm/qwen-0" in pane_text("scheduling", frame, width=120)
    st = sources_status(frame)
    assert st["process"]["container"] == "llm/qwen-0"
    assert st["server:10.231.7.2:8000"]["container"] == "llm/qwen-0"
    assert st["server:10.231.7.2:8000"]["via"] == "in pod llm/qwen-0"


def test_a_failed_read_at_the_namespace_address_says_what_else_to_try():
    r = plan(7, "vllm", 8000, NS, C, [], can_enter=False)
    assert r is not None
    route = Route("http://127.0.0.1:1", r.via, container=r.container, hint=r.hint)
    probe = ServerMetricsProbe("http://127.0.0.1:1", route=route, timeout=0.5)

    async def go():
        try:
            await probe.collect()
        finally:
            await probe.close()
    with pytest.raises(ServerMetricsError) as e:
        asyncio.run(go())
    said = str(e.value)
    assert "read at its own address" in said and "run infertop as root" in said
    assert "--url http://127.0.0.1:HOST" in said
    assert "is the server running" not in said


def _fake_proc(tmp_path, *, their_ns: str | None, cap_eff: str, listening: bool = True):
    """A /proc with infertop (self) and a server (pid 7) in a Docker container."""
    proc = tmp_path / "proc"
    for pid in ("self", "7"):
        (proc / pid / "ns").mkdir(parents=True)
        (proc / pid / "net").mkdir()
    (proc / "self" / "ns" / "net").symlink_to("net:[4026531833]")
    if their_ns:
        (proc / "7" / "ns" / "net").symlink_to(their_ns)
    (proc / "self" / "status").write_text(f"Name:\tinfertop\nCapEff:\t{cap_eff}\n")
    (proc / "self" / "net" / "tcp").write_text(TCP.splitlines()[0] + "\n")
    (proc / "7" / "net" / "tcp").write_text(TCP if listening else TCP.splitlines()[0] + "\n")
    (proc / "7" / "net" / "fib_trie").write_text(FIB_TRIE)
    (proc / "7" / "cgroup").write_text("0::/system.slice/docker-%s.scope\n" % ID)
    return str(proc)


def test_plan_for_reads_proc_as_root_as_non_root_and_for_another_user(tmp_path, monkeypatch):
    monkeypatch.setenv("INFERTOP_HOST_ROOT", str(tmp_path / "nothing"))
    server = ServerProcess(7, "vllm", "vllm", [], 8000, "")
    root = plan_for(server, [], _fake_proc(tmp_path / "a", their_ns="net:[4026532174]",
                                           cap_eff="000001ffffffffff"))
    assert root is not None
    assert root.netns_pid == 7 and root.url == "http://10.231.7.2:8000"
    assert root.via == "in container docker 3f2a9c1b0d4e, read through its network namespace"
    user = plan_for(server, [], _fake_proc(tmp_path / "b", their_ns="net:[4026532174]",
                                           cap_eff="0000000000000000"))
    assert user is not None
    assert user.netns_pid is None and "own address" in user.via
    # another user's process: its namespace link is unreadable, its socket table is not
    other = _fake_proc(tmp_path / "c", their_ns=None, cap_eff="000001ffffffffff")
    got = plan_for(server, [ProcInfo(9, 1, "docker-proxy", (
        "docker-proxy", "-host-port", "9000", "-container-ip", "10.231.7.2",
        "-container-port", "8000"))], other)
    assert got is not None
    assert got.url == "http://127.0.0.1:9000" and got.netns_pid is None   # never setns
    silent = _fake_proc(tmp_path / "d", their_ns=None, cap_eff="0", listening=False)
    got = plan_for(server, [], silent)
    assert got is not None
    assert "another user's process" in got.problem and "--url" in got.problem
    # a host process (no container, same namespace): the plain URL
    same = _fake_proc(tmp_path / "e", their_ns="net:[4026531833]", cap_eff="0")
    os.unlink(os.path.join(same, "7", "cgroup"))
    assert plan_for(server, [], same) is None


def test_a_pod_is_named_from_the_kubelet_pod_directory_when_no_bundle_is_readable(tmp_path):
    from infertop.probes.server.containers import hostname_from_etc_hosts
    pod = tmp_path / "var/lib/kubelet/pods" / UID
    pod.mkdir(parents=True)
    (pod / "etc-hosts").write_text(
        "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n"
        "fe00::1\tip6-allnodes\n10.244.1.5\tqwen-0\n")
    sa = pod / "volumes/kubernetes.io~projected/kube-api-access-x7k2p"
    sa.mkdir(parents=True)
    (sa / "namespace").write_text("llm")
    (sa / "token").write_text("SECRET-TOKEN")
    assert named(Container("cri-containerd", ID, UID), str(tmp_path)).label == "llm/qwen-0"
    assert hostname_from_etc_hosts("10.244.1.5 web-0.nginx.default.svc.cluster.local web-0\n") \
        == "web-0"
    assert hostname_from_etc_hosts("# nothing\n127.0.0.1 localhost\n") == ""


def test_a_socat_forwarder_is_a_published_port_too():
    from infertop.probes.server.reach import parse_socat_args
    assert parse_socat_args(["socat", "TCP-LISTEN:9000,fork,reuseaddr", "TCP:10.231.7.2:8000"]) \
        == Published("0.0.0.0", 9000, "10.231.7.2", 8000)
    assert parse_socat_args(["socat", "-d", "TCP4-LISTEN:9001,bind=127.0.0.1,fork",
                             "TCP4:10.231.7.2:8000,nodelay"]) == \
        Published("127.0.0.1", 9001, "10.231.7.2", 8000)
    assert parse_socat_args(["socat", "UDP-LISTEN:9000", "UDP:10.0.0.2:8000"]) is None
    assert parse_socat_args(["socat", "STDIO", "TCP:10.0.0.2:8000"]) is None
    assert parse_socat_args(["socat", "TCP-LISTEN:x", "TCP:10.0.0.2:8000"]) is None
    procs = [ProcInfo(5, 1, "socat", ("socat", "TCP-LISTEN:9000,fork", "TCP:10.231.7.2:8000"))]
    r = plan(7, "vllm", 8000, NS, C, published_ports(procs), can_enter=False)
    assert r is not None
    assert r.url == "http://127.0.0.1:9000" and "forwarded to 10.231.7.2:8000" in r.via
