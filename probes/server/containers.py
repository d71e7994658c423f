"""Which container or pod a process runs in: its name for the panes, from the host.

``/proc/PID/cgroup`` holds the container's id in the path the runtime made for it:

- Docker: ``/docker/<id>`` (cgroupfs) or ``/system.slice/docker-<id>.scope`` (systemd)
- podman: ``.../libpod-<id>.scope`` (or ``/libpod_parent/libpod-<id>``)
- Kubernetes (containerd, CRI-O, cri-dockerd): ``/kubepods/<qos>/pod<uid>/<id>`` or
  ``/kubepods.slice/kubepods-<qos>.slice/kubepods-<qos>-pod<uid>.slice/cri-containerd-<id>.scope``
  (``crio-<id>.scope``, ``docker-<id>.scope``)

The id names nothing a person knows; the runtime's own state on the host does, where it
can be read (root): Docker's ``/var/lib/docker/containers/<id>/config.v2.json`` (``Name``,
and the ``io.kubernetes.*`` labels under cri-dockerd); the OCI bundle containerd and CRI-O
keep for a running container (``config.json``: the CRI annotations
``io.kubernetes.cri.sandbox-namespace``/``sandbox-name``/``container-name``, or CRI-O's
``io.kubernetes.pod.namespace``/``pod.name``/``container.name``); else the kubelet's pod
directory (``/var/lib/kubelet/pods/<uid>``: the pod's hostname and namespace).  With none readable the
label is the runtime and the short id (``docker 3f2a9c1b0d4e``), or ``pod <uid>``.

Pure parsers (``parse_cgroup``, ``name_from_*``) are tested as tables; ``container_of``
reads files, each at most ``READ_MAX`` bytes, under ``root`` (``/`` on a host).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

from infertop.textclean import one_line

READ_MAX = 1 << 20
LABEL_MAX = 80

_ID = r"([0-9a-f]{64})"
_PATTERNS = (
    # (runtime, regex on one cgroup path); the pod uid, when any, is read separately
    ("cri-containerd", re.compile(r"cri-containerd-" + _ID + r"\.scope")),
    ("crio", re.compile(r"crio-(?:conmon-)?" + _ID + r"\.scope")),
    ("docker", re.compile(r"docker-" + _ID + r"\.scope")),
    ("podman", re.compile(r"libpod-(?:conmon-)?" + _ID + r"(?:\.scope)?")),
    ("docker", re.compile(r"/docker/" + _ID + r"(?:/|$)")),
    ("containerd", re.compile(r"/kubepods[^:]*/pod[0-9a-f_-]+/" + _ID + r"(?:/|$)")),
)
_POD = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})")


@dataclass(frozen=True)
class Container:
    """A process's container: runtime, full id, pod uid (Kubernetes) and the names the
    runtime's metadata gave (empty when unread)."""

    runtime: str
    id: str
    pod_uid: str = ""
    name: str = ""          # the container's name (Docker's, or the pod's container)
    pod: str = ""           # namespace/pod, Kubernetes only

    @property
    def label(self) -> str:
        """What the panes show: ``namespace/pod`` (``/container`` when the pod has one of
        that name), the container's name, or the runtime and short id."""
        if self.pod:
            return self.pod
        if self.name:
            return self.name
        if self.pod_uid:
            return f"pod {self.pod_uid[:8]}"
        return f"{self.runtime} {self.id[:12]}"

    def to_dict(self) -> dict[str, str]:
        d = {"runtime": self.runtime, "id": self.id, "label": self.label}
        for k in ("pod_uid", "name", "pod"):
            if getattr(self, k):
                d[k] = getattr(self, k)
        return d


def parse_cgroup(text: str) -> Container | None:
    """The container a ``/proc/PID/cgroup`` text names, or None (a host process)."""
    for line in text.splitlines():
        path = line.split(":", 2)[-1]
        for runtime, rx in _PATTERNS:
            m = rx.search(path)
            if m:
                pod = _POD.search(path)
                uid = pod.group(1).replace("_", "-") if pod else ""
                if runtime == "containerd" and not uid:
                    continue
                return Container(runtime, m.group(1), uid)
    return None


def _read_json(path: str) -> dict:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return {}
    try:
        with os.fdopen(fd, "rb") as f:
            raw = f.read(READ_MAX + 1)
    except OSError:
        return {}
    if len(raw) > READ_MAX:
        return {}
    try:
        got = json.loads(raw)
    except ValueError:
        return {}
    return got if isinstance(got, dict) else {}


def _text(v: object) -> str:
    return one_line(v, LABEL_MAX) if isinstance(v, str) else ""


def name_from_docker(config: dict) -> tuple[str, str]:
    """(name, namespace/pod) from Docker's config.v2.json (pod from cri-dockerd's labels)."""
    name = _text(config.get("Name")).lstrip("/")
    labels = (config.get("Config") or {}).get("Labels") if isinstance(config.get("Config"), dict) else None
    labels = labels if isinstance(labels, dict) else {}
    return name, _pod(labels.get("io.kubernetes.pod.namespace"),
                      labels.get("io.kubernetes.pod.name"),
                      labels.get("io.kubernetes.container.name"))


def name_from_oci(config: dict) -> tuple[str, str]:
    """(container name, namespace/pod) from an OCI bundle's annotations (containerd's CRI
    plugin, CRI-O)."""
    ann = config.get("annotations")
    ann = ann if isinstance(ann, dict) else {}
    ns = ann.get("io.kubernetes.cri.sandbox-namespace") or ann.get("io.kubernetes.pod.namespace")
    pod = ann.get("io.kubernetes.cri.sandbox-name") or ann.get("io.kubernetes.pod.name")
    name = ann.get("io.kubernetes.cri.container-name") or ann.get("io.kubernetes.container.name")
    return _text(name), _pod(ns, pod, name)


def _pod(ns: object, pod: object, container: object) -> str:
    ns_t, pod_t = _text(ns), _text(pod)
    if not pod_t:
        return ""
    label = f"{ns_t}/{pod_t}" if ns_t else pod_t
    return one_line(label, LABEL_MAX)


# where each runtime keeps a running container's metadata, relative to the host's root
_DOCKER = ("var/lib/docker/containers/{id}/config.v2.json",)
_OCI = ("run/containerd/io.containerd.runtime.v2.task/k8s.io/{id}/config.json",
        "run/containerd/io.containerd.runtime.v2.task/moby/{id}/config.json",
        "run/containers/storage/overlay-containers/{id}/userdata/config.json",
        "var/lib/containers/storage/overlay-containers/{id}/userdata/config.json")


def _read_text(path: str, limit: int = 64 * 1024) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        with os.fdopen(fd, "rb") as f:
            return f.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


def hostname_from_etc_hosts(text: str) -> str:
    """The pod's hostname from the kubelet's ``etc-hosts`` (its last entry: the pod's own
    address and hostname; the pod's name unless its spec sets another)."""
    last = ""
    for line in text.splitlines():
        f = line.split("#", 1)[0].split()
        if len(f) >= 2 and not f[0].startswith(("127.", "::", "fe", "ff")):
            last = f[-1]
    return _text(last)


def name_from_kubelet(root: str, uid: str) -> str:
    """``namespace/pod`` from the kubelet's pod directory: the hostname in ``etc-hosts``
    and the namespace of the service-account volume (``.../kube-api-access-*/namespace``;
    only that file is read, never the token beside it)."""
    pod_dir = os.path.join(root, "var/lib/kubelet/pods", uid)
    pod = hostname_from_etc_hosts(_read_text(os.path.join(pod_dir, "etc-hosts")))
    if not pod:
        return ""
    ns = ""
    projected = os.path.join(pod_dir, "volumes", "kubernetes.io~projected")
    try:
        volumes = sorted(os.listdir(projected))[:32]
    except OSError:
        volumes = []
    for v in volumes:
        if v.startswith("kube-api-access-"):
            ns = _read_text(os.path.join(projected, v, "namespace"), 256).strip()
            if ns:
                break
    return _pod(ns, pod, "")


def named(c: Container, root: str = "/") -> Container:
    """``c`` with the names its runtime's metadata on the host gives, where readable."""
    for rel in _DOCKER:
        name, pod = name_from_docker(_read_json(os.path.join(root, rel.format(id=c.id))))
        if name or pod:
            return Container(c.runtime, c.id, c.pod_uid, name, pod)
    for rel in _OCI:
        name, pod = name_from_oci(_read_json(os.path.join(root, rel.format(id=c.id))))
        if name or pod:
            return Container(c.runtime, c.id, c.pod_uid, name, pod)
    if c.pod_uid:
        pod = name_from_kubelet(root, c.pod_uid)
        if pod:
            return Container(c.runtime, c.id, c.pod_uid, "", pod)
    return c


def container_of(pid: int, proc: str = "/proc", root: str | None = None) -> Container | None:
    """The container ``pid`` runs in, named from the runtime's metadata where readable;
    None for a host process or an unreadable cgroup file.  ``root``: where the host's
    runtime state is (``INFERTOP_HOST_ROOT``, else ``/``: infertop in a debug container
    that mounts the node's root elsewhere sets it)."""
    try:
        with open(f"{proc}/{pid}/cgroup", "rb") as f:
            text = f.read(READ_MAX).decode("utf-8", "replace")
    except OSError:
        return None
    c = parse_cgroup(text)
    if c is None:
        return None
    return named(c, root if root is not None else os.environ.get("INFERTOP_HOST_ROOT", "/"))
