"""Real network and PID namespaces for the container tests (root only).

``Pod`` builds what Docker's bridge network or a pod gives a server: a network namespace
(``ip netns add``) joined to the host by a veth pair with a private /24 of its own, and a
server in it that also has its own PID namespace (``unshare --pid --fork``).  The server is
a fake ``vllm serve m --port P`` (a script named vllm: discovery finds it by name as it
finds the real one) that serves the demo's vLLM /metrics page.  Its cgroup is made the one
Docker makes (``.../docker/<64 hex>``), or with ``pod_namespace`` the one the kubelet makes
(``.../kubepods/besteffort/pod<uid>/<64 hex>``), where a cgroup hierarchy is writable, and
a fake Docker state directory or containerd task bundle (CRI annotations) names it, under
``tmp/hostroot`` (``INFERTOP_HOST_ROOT``): there is no Docker engine or kubelet here.  ``Proxy`` is a fake docker-proxy: docker-proxy's own
argument names, forwarding a host port to the container's port.

Everything made is removed by ``close`` (use ``with``): the names carry the test's pid and
a counter so parallel runs never collide; addresses are in 10.231.0.0/16, only on the
veths made here.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

_count = itertools.count()

FAKE_VLLM = """\
import sys
from infertop.cli.main import main
port = sys.argv[sys.argv.index("--port") + 1]
host = sys.argv[sys.argv.index("--host") + 1] if "--host" in sys.argv else "0.0.0.0"
sys.exit(main(["demo-server", "--host", host, "--port", port, "--speed", "1"]))
"""

FAKE_PROXY = """\
import socket, sys, threading
a = sys.argv
def arg(name):
    return a[a.index(name) + 1]
target = (arg("-container-ip"), int(arg("-container-port")))
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind((arg("-host-ip"), int(arg("-host-port"))))
ls.listen(16)
def pipe(src, dst):
    try:
        while True:
            b = src.recv(65536)
            if not b:
                break
            dst.sendall(b)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
while True:
    c, _ = ls.accept()
    try:
        u = socket.create_connection(target, timeout=5)
    except OSError:
        c.close()
        continue
    threading.Thread(target=pipe, args=(c, u), daemon=True).start()
    threading.Thread(target=pipe, args=(u, c), daemon=True).start()
"""


def why_not_root() -> str:
    """'' when namespaces can be built here, else why not (the tests' skip reason)."""
    if os.geteuid() != 0:
        return "needs root: builds network namespaces and veth pairs (CI runs as root)"
    for tool in ("ip", "unshare"):
        if shutil.which(tool) is None:
            return f"needs {tool} (iproute2 / util-linux)"
    return _cannot_add_netns()


@functools.lru_cache(maxsize=1)
def _cannot_add_netns() -> str:
    """Root in a container without CAP_NET_ADMIN/CAP_SYS_ADMIN cannot make namespaces."""
    name = f"infertop-probe-{os.getpid()}"
    r = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        return f"cannot create a network namespace here: {r.stderr.strip()[:200]}"
    subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)
    return ""


def _run(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True, timeout=30)


def wait_port(host: str, port: int, deadline: float = 60.0, netns: str = "") -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        cmd = ["ip", "netns", "exec", netns] if netns else []
        probe = subprocess.run([*cmd, sys.executable, "-c",
                                f"import socket; socket.create_connection(({host!r}, {port}), 2)"],
                               capture_output=True, timeout=30)
        if probe.returncode == 0:
            return
        time.sleep(0.3)
    raise TimeoutError(f"nothing listens on {host}:{port} after {deadline:g} s")


def _cgroup_dir() -> Path | None:
    """A cgroup hierarchy we may make Docker's cgroup in (v1 pids, or v2's root)."""
    for base in ("/sys/fs/cgroup/pids", "/sys/fs/cgroup/unified", "/sys/fs/cgroup"):
        p = Path(base)
        if (p / "cgroup.procs").exists():
            try:
                probe = p / f"infertop-probe-{os.getpid()}"
                probe.mkdir()
                probe.rmdir()
                return p
            except OSError:
                continue
    return None


class Pod:
    """A server in its own network and PID namespaces behind a veth pair."""

    def __init__(self, tmp: Path, port: int = 8000, name: str = "",
                 pod_namespace: str = "", listen: str = "0.0.0.0") -> None:
        n = next(_count)
        self.tag = f"it{os.getpid() % 100000}x{n}"
        self.netns = self.tag
        self.host_if, self.ns_if = f"h{self.tag}"[:15], f"c{self.tag}"[:15]
        subnet = (os.getpid() * 7 + n * 13) % 250 + 1
        self.host_ip, self.addr = f"10.231.{subnet}.1", f"10.231.{subnet}.2"
        self.port = port
        self.id = uuid.uuid4().hex + uuid.uuid4().hex
        self.name = name or f"vllm-{self.tag}"
        # a Kubernetes pod (kubepods cgroup, containerd's CRI annotations) when given
        self.pod_namespace = pod_namespace
        self.listen = listen     # 127.0.0.1: its port on the namespace's loopback only
        self.uid = str(uuid.uuid4())
        self.tmp = tmp
        self.proc: subprocess.Popen | None = None
        self.cgroup: Path | None = None
        self.made: list[str] = []

    def __enter__(self) -> Pod:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> None:
        _run("ip", "netns", "add", self.netns)
        self.made.append("netns")
        _run("ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if)
        self.made.append("veth")
        _run("ip", "link", "set", self.ns_if, "netns", self.netns)
        _run("ip", "addr", "add", f"{self.host_ip}/24", "dev", self.host_if)
        _run("ip", "link", "set", self.host_if, "up")
        _run("ip", "-n", self.netns, "addr", "add", f"{self.addr}/24", "dev", self.ns_if)
        _run("ip", "-n", self.netns, "link", "set", self.ns_if, "up")
        _run("ip", "-n", self.netns, "link", "set", "lo", "up")
        self._start_server()
        self._docker_cgroup()

    def _start_server(self) -> None:
        bindir = self.tmp / self.tag
        bindir.mkdir(parents=True, exist_ok=True)
        (bindir / "vllm").write_text(FAKE_VLLM)
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", self.netns, "unshare", "--pid", "--fork", "--kill-child",
             sys.executable, str(bindir / "vllm"), "serve", "m", "--port", str(self.port),
             "--host", self.listen],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
            start_new_session=True)
        wait_port("127.0.0.1", self.port, netns=self.netns)

    def restart(self) -> None:
        """The server exits and a new one starts in the same namespace (a pod's container
        restarting: a new pid, the pod's network namespace kept)."""
        self._stop_server()
        self._start_server()

    def server_pid(self) -> int:
        """The fake vllm's pid as the host sees it (the child of unshare)."""
        assert self.proc is not None
        import psutil
        for c in psutil.Process(self.proc.pid).children(recursive=True):
            if any(a.endswith("/vllm") for a in c.cmdline()[:2]):
                return c.pid
        raise LookupError("the server process is not running")

    def _docker_cgroup(self) -> None:
        """Put the server in a cgroup named as Docker (or the kubelet) names one, and write
        the runtime's state file that names it (under tmp: INFERTOP_HOST_ROOT points there)."""
        base = _cgroup_dir()
        rel = Path("kubepods", "besteffort", f"pod{self.uid}", self.id) if self.pod_namespace \
            else Path("docker", self.id)
        if base is not None:
            cg = base / rel
            cg.mkdir(parents=True)
            self.cgroup = cg
            (cg / "cgroup.procs").write_text(str(self.server_pid()))
        root = self.tmp / "hostroot"
        if self.pod_namespace:
            state = root / "run/containerd/io.containerd.runtime.v2.task/k8s.io" / self.id
            state.mkdir(parents=True)
            (state / "config.json").write_text(json.dumps({"annotations": {
                "io.kubernetes.cri.sandbox-namespace": self.pod_namespace,
                "io.kubernetes.cri.sandbox-name": self.name,
                "io.kubernetes.cri.container-name": "vllm"}}))
            return
        state = root / "var/lib/docker/containers" / self.id
        state.mkdir(parents=True)
        (state / "config.v2.json").write_text(f'{{"Name": "/{self.name}", "Config": {{}}}}')

    @property
    def label(self) -> str:
        """What infertop should call it: namespace/pod, or the Docker container's name."""
        return f"{self.pod_namespace}/{self.name}" if self.pod_namespace else self.name

    @property
    def place(self) -> str:
        return f"pod {self.label}" if self.pod_namespace else f"container {self.label}"

    def _stop_server(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 9)
            except OSError:
                pass
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                pass

    def close(self) -> None:
        self._stop_server()
        if self.cgroup is not None:
            for _ in range(50):    # empty once the killed process is reaped
                try:
                    self.cgroup.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)
            up = self.cgroup.parent    # docker/ or kubepods/besteffort/podUID/, when empty
            for _ in range(3 if self.pod_namespace else 1):
                try:
                    up.rmdir()
                except OSError:
                    break
                up = up.parent
        if "veth" in self.made:
            subprocess.run(["ip", "link", "del", self.host_if], capture_output=True, timeout=30)
        if "netns" in self.made:
            subprocess.run(["ip", "netns", "del", self.netns], capture_output=True, timeout=30)


class Proxy:
    """A fake docker-proxy publishing ``host_port`` on 127.0.0.1 for the pod's port."""

    def __init__(self, tmp: Path, pod: Pod, host_port: int) -> None:
        script = tmp / "docker-proxy"
        script.write_text("#!" + sys.executable + "\n" + FAKE_PROXY)
        script.chmod(0o755)
        self.host_port = host_port
        self.proc = subprocess.Popen(
            [str(script), "-proto", "tcp", "-host-ip", "127.0.0.1", "-host-port", str(host_port),
             "-container-ip", pod.addr, "-container-port", str(pod.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def __enter__(self) -> Proxy:
        wait_port("127.0.0.1", self.host_port)
        return self

    def __exit__(self, *exc) -> None:
        self.proc.kill()
        self.proc.wait(30)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
