"""Each --url's P/D role read from the command line of the process on its port
(probes/server/roles.py): a prefill and a decode vLLM on one box each get their role on
their own instance; a hostile command line gives no role and no exception; a remote URL
says why its role is unknown, and the TTFT split repeats it."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from infertop.history import History
from infertop.model import Kind, Reading, Status, make_labels
from infertop.pdsplit import derive_split, roles
from infertop.probes.server import roles as roles_mod
from infertop.probes.server.metrics import ServerMetricsProbe
from infertop.probes.server.roles import (
    REMOTE_WHY,
    Owner,
    RoleReader,
    find_owner,
    role_from_argv,
)

PRODUCER = '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
CONSUMER = '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'

# a fake `vllm serve`: a script named vllm that serves a small vLLM page on a free port and
# prints it, then lives until its stdin closes
FAKE_VLLM = textwrap.dedent('''
    import http.server, sys, threading
    PAGE = (b'# TYPE vllm:num_requests_running gauge\\n'
            b'vllm:num_requests_running{model_name="m"} 0\\n')
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(PAGE)))
            self.end_headers()
            self.wfile.write(PAGE)
        def log_message(self, *a):
            pass
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    print(srv.server_address[1], flush=True)
    sys.stdin.read()
''')


@contextmanager
def fake_vllm(tmp: Path, *args: str) -> Iterator[int]:
    script = tmp / "vllm"
    script.write_text(FAKE_VLLM)
    p = subprocess.Popen([sys.executable, str(script), "serve", "m", *args],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        yield int(p.stdout.readline())
    finally:
        assert p.stdin is not None
        p.stdin.close()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


async def _scrape_until_role(probe: ServerMetricsProbe) -> list[Reading]:
    """Scrape until the role appears (its look runs in a worker thread between ticks)."""
    for _ in range(200):
        sample = await probe.collect()
        got = [r for r in sample.readings if r.key == "server.disagg_role"]
        if got:
            return got
        await asyncio.sleep(0.05)
    return []


def test_a_prefill_and_a_decode_vllm_on_one_box_each_get_their_role(tmp_path):
    (tmp_path / "p").mkdir()
    (tmp_path / "d").mkdir()
    with fake_vllm(tmp_path / "p", "--kv-transfer-config", PRODUCER) as p_port, \
            fake_vllm(tmp_path / "d", "--kv-transfer-config", CONSUMER) as d_port:
        async def scrape_both():
            probes = [ServerMetricsProbe(f"http://127.0.0.1:{p}") for p in (p_port, d_port)]
            try:
                return [await _scrape_until_role(pr) for pr in probes]
            finally:
                for pr in probes:
                    await pr.close()
        p_roles, d_roles = asyncio.run(scrape_both())
    assert [(r.label("instance"), r.text, r.status) for r in p_roles] == \
        [(f"127.0.0.1:{p_port}", "prefill", Status.OK)]
    assert [(r.label("instance"), r.text, r.status) for r in d_roles] == \
        [(f"127.0.0.1:{d_port}", "decode", Status.OK)]
    # what the TTFT split reads: one role per instance, not one host-wide setting
    h = History()
    h.add_readings(1.0, [*p_roles, *d_roles])
    assert roles(h) == {f"127.0.0.1:{p_port}": "prefill", f"127.0.0.1:{d_port}": "decode"}


def test_the_port_owner_is_found_by_port_with_its_command_line(tmp_path):
    with fake_vllm(tmp_path, "--kv-transfer-config", CONSUMER) as port:
        owner, why = find_owner(port)
    assert why == "" and owner is not None and owner.kind == "vllm"
    assert CONSUMER in owner.argv
    assert role_from_argv(owner.kind, owner.argv) == "decode"


def test_a_vllm_without_a_kv_transfer_config_is_unified_and_no_server_has_no_role():
    assert role_from_argv("vllm", ["vllm", "serve", "m"]) == "unified"
    assert role_from_argv("vllm", ["vllm", "serve", "m", "--kv-transfer-config",
                                   '{"kv_role":"kv_both"}']) == "both"
    assert role_from_argv("python", ["python", "x.py", "--kv-transfer-config",
                                     PRODUCER]) is None


@pytest.mark.parametrize("config", [
    '{"kv_role":"kv_producer\x1b[31m"}',             # escapes in the role
    "\x1b]0;pwned\x07" + PRODUCER,                    # a terminal escape before the JSON
    "[" * 100_000 + "]" * 100_000,                    # deeper than json can recurse
    json.dumps({"kv_role": "kv_producer", "pad": "x" * 2_000_000})[:-3],  # huge, cut
    json.dumps({"kv_role": ["kv_producer"]}),         # not a string
    json.dumps(["kv_role", "kv_producer"]),           # not an object
    "kv_role=kv_producer",                            # not JSON
    "",
])
def test_a_hostile_kv_transfer_config_gives_no_role_and_no_exception(config):
    role = role_from_argv("vllm", ["vllm", "serve", "m", "--kv-transfer-config", config])
    assert role == "unified"   # a vLLM whose command line names no readable role


def test_a_huge_valid_config_still_reads():
    big = json.dumps({"kv_role": "kv_consumer", "pad": "x" * 2_000_000})
    assert role_from_argv("vllm", ["vllm", "serve", "m", "--kv-transfer-config", big]) \
        == "decode"


def test_the_command_line_is_read_once_per_owner_and_again_when_its_pid_changes():
    found: list[int] = []
    owners = iter([Owner(10, 1.0, "vllm", ("vllm", "serve", "m", "--kv-transfer-config",
                                           PRODUCER)),
                   Owner(11, 2.0, "vllm", ("vllm", "serve", "m", "--kv-transfer-config",
                                           CONSUMER))])
    alive = {10: True}

    def find(port):
        found.append(port)
        return next(owners), ""

    r = RoleReader("http://127.0.0.1:8100", "127.0.0.1:8100", find=find,
                   alive=lambda o: alive.get(o.pid, False))
    for _ in range(3):
        r.check()
    assert found == [8100] and r._role == "prefill"
    alive.update({10: False, 11: True})   # the prefill server restarted as a decode one
    r.check()
    r.check()
    assert found == [8100, 8100] and r._role == "decode"


def test_a_failing_owner_lookup_gives_no_role_and_no_exception():
    def find(port):
        raise PermissionError("no /proc")
    r = RoleReader("http://127.0.0.1:8100", "127.0.0.1:8100", find=find)
    r.check()
    assert r._role is None and r.local is True


def test_the_event_loop_never_waits_for_the_look():
    """poll starts the look in a worker thread and returns what is known: nothing yet,
    though the look is stuck (a slow /proc)."""
    import threading
    started, release = [], threading.Event()

    def find(port):
        started.append(port)
        assert release.wait(10)
        return Owner(1, 1.0, "vllm", ("vllm", "serve", "--kv-transfer-config", CONSUMER)), ""

    async def go():
        r = RoleReader("http://127.0.0.1:8200", "127.0.0.1:8200", find=find)
        first = r.poll()
        assert r.poll() == []      # a second tick while the look is stuck: no second look
        release.set()
        fut = r._running
        assert fut is not None
        await fut
        return first, r.poll()
    first, second = asyncio.run(go())
    assert first == [] and started == [8200]
    assert [(x.text, x.label("instance")) for x in second] == [("decode", "127.0.0.1:8200")]


def test_a_remote_url_says_why_its_role_is_unknown(monkeypatch):
    monkeypatch.setattr(roles_mod.discovery, "is_local_host", lambda host: False)
    looked: list[int] = []

    def find(port: int) -> tuple[None, str]:
        looked.append(port)
        return None, ""
    r = RoleReader("http://10.9.9.9:8100", "10.9.9.9:8100", find=find)
    r.check()
    got = r.poll()
    assert looked == []   # no local process is looked for
    assert [(x.status, x.text, x.reason) for x in got] == [(Status.NODATA, None, REMOTE_WHY)]
    assert "page carries none" in REMOTE_WHY and "not on this host" in REMOTE_WHY


def test_the_split_says_a_remote_prefill_role_is_unknown():
    """A local decode instance (role read) and a remote one whose role is unknown: the
    prefill part is 'not measured' and says why, not 'add its /metrics with --url'."""
    from helpers.rulekit import Hist, make_reading
    ttft, xfer = Hist((0.1, 0.25, 0.5, 1.0, 2.5)), Hist((0.001, 0.01, 0.1, 0.5))
    dec = make_labels(instance="127.0.0.1:8200", model="m")
    rem = make_labels(instance="10.9.9.9:8100", model="m")
    h = History()
    for i in range(10):
        ttft.observe(1.0, 10)
        xfer.observe(0.2, 10)
        h.add_readings(float(i), [
            Reading("server.disagg_role", 1.0, "", dec, kind=Kind.INFO, text="decode"),
            Reading("server.disagg_role", None, "", rem, Status.NODATA, REMOTE_WHY,
                    Kind.INFO),
            make_reading("latency.ttft_seconds", dec, ttft.value()),
            make_reading("latency.ttft_seconds", rem, ttft.value()),
            make_reading("latency.kv_transfer_seconds", dec, xfer.value())])
    split = {r.label("part"): r for r in derive_split(h, 60.0)
             if r.label("instance") == "127.0.0.1:8200"}
    assert split["prefill"].value is None
    assert split["prefill"].reason == f"not measured: 10.9.9.9:8100's {REMOTE_WHY}"


def test_the_probe_adds_a_remote_unknown_role_only_for_a_page_in_a_pd_pair():
    """A remote unified vLLM gets no role reason on every tick; one with KV-transfer
    families (NIXL) does; a page that names its own role (SGLang engine_type) keeps it."""
    probe = ServerMetricsProbe("http://10.9.9.9:8100")
    assert probe._roles is not None
    probe._roles.local = False
    lab = make_labels(instance="10.9.9.9:8100")
    plain = [Reading("server.requests_running", 1.0, "", lab)]
    nixl = [*plain, Reading("kv.transfer_bytes_total", 0.0, "bytes", lab)]
    own = [*nixl, Reading("server.disagg_role", 1.0, "", lab, kind=Kind.INFO, text="prefill")]
    assert probe._role_readings(plain) == []
    got = probe._role_readings(nixl)
    assert [(r.key, r.label("instance"), r.reason) for r in got] == \
        [("server.disagg_role", "10.9.9.9:8100", REMOTE_WHY)]
    assert probe._role_readings(own) == []


def test_two_local_urls_give_the_pane_the_pair_and_a_measured_prefill_side():
    """What the server probes emit for --url :8100 --url :8200, through the real
    pipeline: the pane pairs them and the split's prefill part is measured; the process
    probe's host-wide setting (the one server it follows: the prefill one) no longer
    names the decode instance."""
    from helpers.panes import pane_text
    from helpers.rulekit import Hist, tick
    from infertop.pipeline import Pipeline
    from infertop.rules.engine import Diagnoser

    p_lab, d_lab = "instance=127.0.0.1:8100,model=m", "instance=127.0.0.1:8200,model=m"
    p_ttft, d_ttft = Hist((0.1, 0.25, 0.5, 1.0, 2.5)), Hist((0.1, 0.25, 0.5, 1.0, 2.5))
    xfer = Hist((0.001, 0.01, 0.1, 0.5))
    pipe = Pipeline(Diagnoser(), window=60.0)
    for i in range(20):
        p_ttft.observe(0.3, 10)
        d_ttft.observe(0.5, 10)
        xfer.observe(0.05, 10)
        frame = pipe.feed(tick(1_000_000.0 + i, {
            "server.disagg_role": {"instance=127.0.0.1:8100": "prefill",
                                   "instance=127.0.0.1:8200": "decode"},
            "server.setting": {"name=disagg_role": "prefill"},
            "latency.ttft_seconds": {p_lab: p_ttft.value(), d_lab: d_ttft.value()},
            "latency.kv_transfer_seconds": {d_lab: xfer.value()},
            "server.requests_running": {p_lab: 1.0, d_lab: 4.0}}))
    split = {r.label("part"): r for r in frame.derived if r.key == "pd.ttft_split_seconds"}
    assert split["prefill"].ok and split["prefill"].value == pytest.approx(0.3)
    assert split["prefill"].label("instance") == "127.0.0.1:8200"
    assert split["total"].ok
    text = pane_text("parallelism", frame, width=160, height=40)
    assert "P/D prefill :8100  →  decode :8200" in text
    line = next(ln for ln in text.splitlines() if ln.startswith("TTFT split :8200"))
    assert "not measured" not in line


def test_a_port_with_no_owner_is_looked_at_less_and_less_often_then_again_every_5_s():
    """Each look lists every socket and process on the host: a port whose owner is not
    found (another user's, or the server not up yet) backs off to MISS_MAX_S between
    looks; once found, the owner is watched every recheck_every again."""
    now = [0.0]
    looks: list[float] = []
    owner = Owner(7, 1.0, "vllm", ("vllm", "serve", "--kv-transfer-config", CONSUMER))
    up_at = 200.0

    def find(port):
        looks.append(now[0])
        return (owner, "") if now[0] >= up_at else (None, "no local process listens")

    async def go():
        r = RoleReader("http://127.0.0.1:8300", "127.0.0.1:8300", find=find,
                       alive=lambda o: True, clock=lambda: now[0])
        r.local = True
        while now[0] < 300:
            r.poll()
            if r._running is not None:
                await r._running
            now[0] += 1.0
        return r.poll()
    last = asyncio.run(go())
    before = [t for t in looks if t < up_at]
    gaps = [b - a for a, b in zip(before, before[1:])]
    assert gaps == sorted(gaps) and max(gaps) <= roles_mod.MISS_MAX_S   # backs off, capped
    assert len(before) <= 12              # every 5 s would have been 40 looks
    assert looks[-1] - up_at <= roles_mod.MISS_MAX_S + 1   # found within one capped wait
    assert [x.text for x in last] == ["decode"]
