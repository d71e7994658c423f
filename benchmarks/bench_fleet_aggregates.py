"""Fleet refresh cost against a real Prometheus, 64 to 512 nodes x 8 GPUs: every series
(series mode, the fleet screen before issue 24) against aggregates computed by Prometheus
(aggregate mode: the worst nodes by each column, quantiles, counts; probes/prometheus/
aggregates.py).

The fleet is backfilled, not scraped (a 512-node demo fleet scraped every 5 s would take
this box's two cores): the pages of ``infertop demo-server benchmarks/fleet-node.toml``
(8 H100s, TP 8, vLLM, 16 nodes played with their own seeds, repeated with other names and
addresses up to N) at 10 s steps over 70 s are written as OpenMetrics, turned into a TSDB
by ``promtool tsdb create-blocks-from openmetrics``, and served by Debian's ``prometheus``;
infertop's queries are evaluated at the last step (``PrometheusClient.at``).

Measured per refresh: infertop's wall time and its process CPU time (``process_time``: every
thread of this process, not the box's other load) for the fetch, the mapping and the fleet
pipeline; Prometheus's CPU for answering (from /proc, its own process).  Every refresh maps
and feeds every node it reads anew (no value is left unchanged to reuse): the cost of a
refresh at which every node was scraped since the last one.  The share of a core is at a
5 s scrape (one refresh per 2.5 s, half the scrape interval).

    .venv/bin/python benchmarks/bench_fleet_aggregates.py [--nodes 64,128,256,512]
        [--refreshes 6] [--out benchmarks/fleet-issue24.md]

Series mode's caps (MAX_SERIES 50k, 64 MB) refuse a fleet past ~200 nodes of this size;
they are raised here to measure it.  Numbers are printed and written, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from helpers.prom_fleet import INSTALL_HINT, free_port, prometheus_binary  # noqa: E402

TEMPLATES = 16       # distinct simulated nodes; node i plays template i % 16
STEP = 10            # seconds between backfilled samples
STEPS = 8            # 70 s of data: a 60 s rate has 7 points


def _esc(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def pages(steps: int) -> list[list[tuple[dict, dict]]]:
    """template -> step -> (server series, dcgm series), each {name: [(labels, value)]}."""
    from infertop.cli.demo_server import DemoServer
    from infertop.promtext import parse
    out = []
    for t in range(TEMPLATES):
        s = DemoServer(str(ROOT / "benchmarks" / "fleet-node.toml"), autoplay=False,
                       seed=1000 + t, dcgm_port=0, hostname=f"tpl-{t}")
        per_step = []
        for i in range(steps * STEP):
            s.advance()
            if (i + 1) % STEP == 0:
                got = []
                for body in (s._body, s._dcgm_body):
                    fams: dict[str, list] = {}
                    for f in parse(body.decode()):
                        for x in f.samples:
                            fams.setdefault(x.name, []).append((dict(x.labels), x.value))
                    got.append(fams)
                per_step.append((got[0], got[1]))
        out.append(per_step)
    return out


def write_openmetrics(path: Path, nodes: int, tpl: list, end: int) -> int:
    """Every node's server and dcgm series, and ``up`` for both targets, as OpenMetrics
    (each sample name its own ``unknown`` family, so counters and buckets need no typing)."""
    times = [end - STEP * (STEPS - 1 - k) for k in range(STEPS)]
    names: dict[str, int] = {}
    for which in (0, 1):
        for name in tpl[0][0][which]:
            names.setdefault(name, which)
    lines = 0
    with path.open("w") as f:
        for name, which in sorted(names.items()):
            f.write(f"# TYPE {name} unknown\n")
            for n in range(nodes):
                t = tpl[n % TEMPLATES]
                port = 9400 if which else 8000
                base = (f'node="node-{n + 1:03d}",instance="10.{n // 250}.{n % 250}.1:{port}",'
                        f'job="{"dcgm" if which else "server"}"')
                for k, ts in enumerate(times):
                    for labels, value in t[k][which].get(name, ()):
                        lab = ",".join(f'{a}="{_esc(b)}"' for a, b in labels.items()
                                       if a not in ("instance", "job", "node"))
                        f.write(f"{name}{{{base}{',' + lab if lab else ''}}} {value!r} {ts}\n")
                        lines += 1
        for metric, val in (("up", 1.0), ("scrape_duration_seconds", 0.01)):
            f.write(f"# TYPE {metric} unknown\n")
            for n in range(nodes):
                for port, job in ((8000, "server"), (9400, "dcgm")):
                    for ts in times:
                        f.write(f'{metric}{{node="node-{n + 1:03d}",'
                                f'instance="10.{n // 250}.{n % 250}.1:{port}",job="{job}"}} '
                                f"{val} {ts}\n")
                        lines += 1
        f.write("# EOF\n")
    return lines


def cpu_of(pid: int) -> float:
    """A process's user+system CPU seconds (/proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(url: str, at: float, mode: str, refreshes: int, prom_pid: int) -> dict:
    from infertop.fleet import FleetPipeline, diagnoser_factory
    from infertop.probes.prometheus.source import PrometheusSource, SampleCache
    src = PrometheusSource(url, timeout=60.0, refresh=1e-9, mode=mode,
                           max_bytes=1 << 30)
    src.client.at = at
    if mode == "series":
        # a backfill has no targets, whose bookkeeping would drop every series: the two
        # queries of a refresh at which every target was scraped since the last one
        async def every_series():
            t0 = time.perf_counter()
            dcgm, servers = await asyncio.gather(src.client.query(src._dcgm_query),
                                                 src.client.query(src._server_query))
            src.fetch_seconds = time.perf_counter() - t0
            return [], dcgm, servers
        src.fetch = every_series   # type: ignore[method-assign]
    got = [0]
    fetch_body = src.client._fetch

    async def counted(*a, **kw):
        body, status = await fetch_body(*a, **kw)
        got[0] += len(body)
        return body, status
    src.client._fetch = counted   # type: ignore[method-assign]
    pipe = FleetPipeline(diagnoser_factory())
    await src.start()
    rows = []
    try:
        for i in range(refreshes + 1):
            src.cache, src._by_instance = SampleCache(), {}    # every node read anew
            got[0] = 0
            w0, c0, p0 = time.perf_counter(), time.process_time(), cpu_of(prom_pid)
            snap = await src.next()
            frame = pipe.feed(snap)
            w1, c1, p1 = time.perf_counter(), time.process_time(), cpu_of(prom_pid)
            if src.last_error:
                raise RuntimeError(src.last_error)
            if i:   # the first builds every History
                rows.append((w1 - w0, c1 - c0, p1 - p0, got[0], src.fetch_seconds))
            await asyncio.sleep(0.3)
    finally:
        await src.stop()
    overview = frame.overview
    count = {r.key: r.value for r in overview.readings if not r.labels} if overview else {}
    return {"wall": statistics.median(r[0] for r in rows),
            "wall_max": max(r[0] for r in rows),
            "cpu": statistics.median(r[1] for r in rows),
            "prom_cpu": statistics.median(r[2] for r in rows),
            "bytes": max(r[3] for r in rows), "nodes_read": len(frame.nodes),
            "fetch": statistics.median(r[4] for r in rows),
            "fleet_nodes": int(count.get("fleet.nodes", len(frame.nodes))),
            "gpus": int(count.get("fleet.gpus", 0)) or sum(
                len({r.label("gpu") for r in fr.by_key("gpu.info")})
                for fr in frame.nodes.values())}


def run_size(nodes: int, tpl: list, refreshes: int, work: Path, promtool: str,
             binary: str) -> dict[str, dict]:
    end = int(time.time()) - 3 * 3600     # before the head block's range: a plain backfill
    end -= end % STEP
    om = work / f"fleet-{nodes}.om"
    lines = write_openmetrics(om, nodes, tpl, end)
    tsdb = work / f"tsdb-{nodes}"
    t0 = time.monotonic()
    subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", str(om), str(tsdb)],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    om.unlink()
    print(f"{nodes} nodes: {lines} samples backfilled in {time.monotonic() - t0:.0f} s",
          flush=True)
    import infertop.probes.prometheus.client as client
    client.MAX_SERIES = 10_000_000       # series mode's cap refuses 256+ nodes
    out = {}
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    prom = _prometheus(binary, work, tsdb, port, None)
    try:
        for mode in ("series", "aggregate"):     # the exported rules not loaded
            out[mode if mode == "series" else "inlined"] = asyncio.run(
                measure(url, float(end), mode, refreshes, prom.pid))
        # the exported rules loaded: their records backfilled over the same 70 s (promtool
        # evaluates each rule alone, so the screen's records are written inlined)
        from infertop.probes.prometheus.aggregates import SERVER_KEYS, inline
        rec = work / "records.yml"
        rec.write_text("groups:\n  - name: bench\n    rules:\n" + "".join(
            f"      - record: {name}\n        expr: {json.dumps(inline(name))}\n"
            for name, *_ in SERVER_KEYS.values() if name.startswith("infertop:")))
        t0 = time.monotonic()
        subprocess.run([promtool, "tsdb", "create-blocks-from", "rules", "-q",
                        f"--start={end - STEP * (STEPS - 1)}", f"--end={end + 1}",
                        f"--url={url}", "--eval-interval=10s",
                        f"--output-dir={work / f'rules-{nodes}'}", str(rec)],
                       check=True, stdout=subprocess.DEVNULL)
        print(f"  records backfilled in {time.monotonic() - t0:.0f} s", flush=True)
    finally:
        prom.terminate()
        prom.wait(20)
    for block in (work / f"rules-{nodes}").iterdir():
        shutil.move(str(block), str(tsdb / block.name))
    from infertop.promrules import export_text
    rules = work / "infertop-rules.yml"
    rules.write_text(export_text())
    prom = _prometheus(binary, work, tsdb, port, rules)
    try:
        out["records"] = asyncio.run(measure(url, float(end), "auto", refreshes, prom.pid))
        return out
    finally:
        prom.terminate()
        prom.wait(20)
        shutil.rmtree(tsdb, ignore_errors=True)


def _prometheus(binary: str, work: Path, tsdb: Path, port: int,
                rules: Path | None) -> subprocess.Popen:
    """Prometheus on the backfilled TSDB, scraping nothing; ``rules`` loaded (evaluated
    hourly: at now there is no data, and their cost is not the refresh's)."""
    config = work / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 5s\n  evaluation_interval: 1h\n"
                      + (f"rule_files: [{json.dumps(str(rules))}]\n" if rules else "")
                      + "scrape_configs: []\n")
    prom = subprocess.Popen(
        [binary, f"--config.file={config}", f"--storage.tsdb.path={tsdb}",
         f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=30d",
         "--log.level=warn", "--query.max-samples=200000000"],
        stdout=subprocess.DEVNULL, stderr=open(work / "prometheus.err", "w"))
    try:
        _wait_ready(f"http://127.0.0.1:{port}", prom)
    except BaseException:
        prom.kill()
        prom.wait(10)
        raise
    return prom


def _wait_ready(url: str, prom: subprocess.Popen) -> None:
    import urllib.request
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if prom.poll() is not None:
            raise RuntimeError("prometheus exited")
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError("prometheus not ready")


MODES = {"series": "every series (before)", "inlined": "aggregates, rules not loaded",
         "records": "aggregates, rules loaded"}


def table(results: dict[int, dict[str, dict]], load: str) -> str:
    out = [f"box load average at the end: {load} (2 cores shared with other work; CPU is "
           "this process's CPU time, not wall)", "",
           "| nodes x 8 GPUs | mode | nodes read | answer MB | refresh wall ms (median / max) "
           "| of which Prometheus's answers ms | infertop CPU ms | % of a core at 5 s scrape "
           "| Prometheus CPU ms |",
           "|---|---|---|---|---|---|---|---|---|"]
    for n, by_mode in sorted(results.items()):
        for mode, r in by_mode.items():
            out.append(f"| {n} | {MODES[mode]}"
                       f" | {r['nodes_read']} of {n} | {r['bytes'] / 1e6:.2f} "
                       f"| {r['wall'] * 1000:.0f} / {r['wall_max'] * 1000:.0f} "
                       f"| {r['fetch'] * 1000:.0f} "
                       f"| {r['cpu'] * 1000:.0f} | {r['cpu'] / 2.5:.1%} "
                       f"| {r['prom_cpu'] * 1000:.0f} |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", default="64,128,256,512")
    ap.add_argument("--refreshes", type=int, default=6)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    binary, promtool = prometheus_binary(), shutil.which("promtool")
    if binary is None or promtool is None:
        print(f"bench_fleet_aggregates: skipped: {INSTALL_HINT} (and promtool)")
        return 0
    tpl = pages(STEPS)
    work = Path(tempfile.mkdtemp(prefix="infertop-bench-agg-"))
    results = {}
    try:
        for n in (int(x) for x in args.nodes.split(",")):
            results[n] = run_size(n, tpl, args.refreshes, work, promtool, binary)
            for mode, r in results[n].items():
                print(f"  {MODES[mode]:28s}: read {r['nodes_read']:3d} nodes, answer "
                      f"{r['bytes'] / 1e6:6.2f} MB, wall {r['wall'] * 1000:6.0f} ms "
                      f"(max {r['wall_max'] * 1000:.0f}; answers {r['fetch'] * 1000:.0f}), CPU {r['cpu'] * 1000:6.0f} ms = "
                      f"{r['cpu'] / 2.5:6.1%} of a core at a 5 s scrape; Prometheus CPU "
                      f"{r['prom_cpu'] * 1000:.0f} ms", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = table(results, " ".join(Path("/proc/loadavg").read_text().split()[:3]))
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
