"""Server discovery: naming rules as tables (real names from the fixtures), settings parsed
from command lines, and a real process tree found by name, by port and by pid."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.spawn_tree import spawn
from infertop.probes.server.discovery import (
    ProcInfo,
    ServerProcess,
    classify,
    clean_cmdline,
    discover_all,
    find_server,
    group_servers,
    locate,
    port_from_cmdline,
    port_from_url,
    server_settings,
    split_program,
)

FIX = Path(__file__).resolve().parent / "fixtures" / "processes"
PAD = " " * 120  # setproctitle pads the title with spaces over the old argv area


def parse_tree(path: Path, section: str = "## (1)") -> list[ProcInfo]:
    """ProcInfo rows from a psutil section of a fixture ("PID n PPID m name='x'" + cmdline)."""
    text = path.read_text()
    start = text.index(section)
    end = text.find("\n## (", start + 5)
    rows, pending = [], None
    for line in text[start:end if end > 0 else None].splitlines():
        m = re.match(r"\s*PID (\d+) PPID (\d+) name='([^']*)'", line)
        if m:
            pending = (int(m[1]), int(m[2]), m[3])
            continue
        m = re.match(r"\s*cmdline: (.*)$", line)
        if m and pending:
            argv = m[1].split()
            if "-c" in argv:  # python -c CODE: CODE was one argument
                i = argv.index("-c")
                argv = argv[: i + 1] + [" ".join(argv[i + 1:])]
            pid, ppid, name = pending
            rows.append(ProcInfo(pid, ppid, name, tuple(argv), float(pid)))
            pending = None
    return rows


# ---- classify ------------------------------------------------------------------------------

VLLM_API = ["$ROOT/vllm/bin/python", "-m", "vllm.entrypoints.openai.api_server", "--model",
            "$ROOT/tiny-llama", "--served-model-name", "tiny-llama", "--host", "127.0.0.1",
            "--port", "50655", "--max-model-len", "512"]

LLAMA_ARGV = ["./build/bin/llama-server", "-m", "$LLAMA_ROOT/tiny-llama.gguf", "--alias",
              "tiny-llama", "--metrics", "--host", "127.0.0.1", "--port", "43703", "-np", "4",
              "-c", "4096", "-t", "2"]

CLASSIFY = [
    # the real vLLM 0.32 tree (fixture section 1)
    ("python", VLLM_API, ("vllm", "api_server")),
    ("VLLM::EngineCore", ["VLLM::EngineCore" + PAD], ("vllm", "engine_core")),
    ("VLLM::Worker", ["VLLM::Worker" + PAD], ("vllm", "worker")),
    ("python", ["$ROOT/vllm/bin/python", "-B", "-c",
                "from multiprocessing.resource_tracker import main;main(32)"],
     ("python", "helper")),
    # comm is cut to 15 chars; cmdline may be unreadable
    ("VLLM::EngineCor", [], ("vllm", "engine_core")),
    # psutil splitting a padded title on spaces
    ("VLLM::Worker_TP1", ["VLLM::Worker_TP1", "", "", ""], ("vllm", "worker")),
    ("VLLM::EngineCore_DP1", ["VLLM::EngineCore_DP1"], ("vllm", "engine_core")),
    ("VLLM::Worker_DP0_PP1_TP3", ["VLLM::Worker_DP0_PP1_TP3"], ("vllm", "worker")),
    ("VLLM::APIServer_0", ["VLLM::APIServer_0"], ("vllm", "api_server")),
    ("VLLM::DPCoordinator", ["VLLM::DPCoordinator"], ("vllm", "helper")),
    ("vllm", ["/opt/venv/bin/python3", "/opt/venv/bin/vllm", "serve", "Qwen/Qwen3-8B", "-tp", "2"],
     ("vllm", "api_server")),
    ("vllm", ["vllm", "serve", "m"], ("vllm", "api_server")),
    ("python3", ["python3", "-u", "-m", "vllm.entrypoints.api_server"], ("vllm", "api_server")),
    ("vllm", ["vllm", "bench", "serve", "--model", "m"], ("unknown", "")),  # a client
    # SGLang
    ("python3", ["python3", "-m", "sglang.launch_server", "--model-path", "m", "--tp", "2"],
     ("sglang", "api_server")),
    ("sglang::scheduler_TP0", ["sglang::scheduler_TP0"], ("sglang", "scheduler")),
    ("sglang::schedul", [], ("sglang", "scheduler")),  # comm, 15 chars
    ("sglang::detoken", [], ("sglang", "detokenizer")),
    ("sglang::scheduler_DP1_TP0", ["sglang::scheduler_DP1_TP0"], ("sglang", "scheduler")),
    ("sglang::detokenizer", ["sglang::detokenizer"], ("sglang", "detokenizer")),
    ("sglang::data_parallel_controller", [], ("sglang", "router")),
    # TGI (the shard's comm is cut to 'text-generation')
    ("text-generation-launcher",
     ["text-generation-launcher", "--model-id", "m", "--num-shard", "2"], ("tgi", "launcher")),
    ("text-generation-router", ["text-generation-router", "--port", "80"], ("tgi", "router")),
    ("text-generation", ["/opt/conda/bin/python3.11", "/opt/conda/bin/text-generation-server",
                         "serve", "bigscience/bloom-560m", "--uds-path", "/tmp/tgi"],
     ("tgi", "shard")),
    # llama.cpp (fixture), Triton, TRT-LLM
    ("llama-server", LLAMA_ARGV, ("llamacpp", "server")),
    ("python3", ["python3", "-m", "llama_cpp.server", "--model", "m.gguf"], ("llamacpp", "server")),
    ("tritonserver", ["/opt/tritonserver/bin/tritonserver", "--model-repository=/models"],
     ("triton", "server")),
    ("trtllm-serve", ["/usr/bin/python", "/usr/local/bin/trtllm-serve", "m"],
     ("trtllm", "api_server")),
    # helpers and things that only mention a server
    ("python", ["/v/bin/python", "/v/lib/python3.11/site-packages/torch/_inductor/compile_worker/"
                "__main__.py", "--workers=2"], ("python", "helper")),
    ("grep", ["grep", "-E", "vllm serve|llama-server"], ("unknown", "")),
    ("bash", ["bash", "-c", "vllm serve m --port 8000"], ("unknown", "")),
    ("tail", ["tail", "-f", "vllm.entrypoints.openai.api_server.log"], ("unknown", "")),
    ("less", ["less", "/var/log/tritonserver"], ("unknown", "")),
    ("python", ["python", "-m", "infertop", "--url", "http://localhost:8000"], ("unknown", "")),
    ("infertop", ["/v/bin/python", "/v/bin/infertop", "--pid", "5"], ("unknown", "")),
    ("python", ["python", "train.py", "--model", "vllm"], ("python", "")),
    ("cc1plus", ["/usr/lib/gcc/x86_64-linux-gnu/12/cc1plus", "-quiet"], ("unknown", "")),
    ("", [], ("unknown", "")),
]


@pytest.mark.parametrize("name,cmdline,expected", CLASSIFY,
                         ids=[f"{i}-{c[0] or 'empty'}" for i, c in enumerate(CLASSIFY)])
def test_classify(name, cmdline, expected):
    assert classify(name, cmdline) == expected


def test_split_program_finds_the_program_position():
    assert split_program(["python3", "-X", "dev", "-W", "ignore", "-m", "vllm.x", "--a"]) == \
        ("module", "vllm.x", ["--a"])
    assert split_program(["python", "-mvllm.entrypoints.openai.api_server"])[1] == \
        "vllm.entrypoints.openai.api_server"
    assert split_program(["/usr/bin/python3.11", "/usr/bin/vllm", "serve"]) == \
        ("script", "vllm", ["serve"])
    assert split_program(["/bin/llama-server", "-c", "1"]) == ("exe", "llama-server", ["-c", "1"])
    assert clean_cmdline(["VLLM::Worker" + PAD, "", "  "]) == ["VLLM::Worker"]


def test_fixture_vllm_tree_roles():
    rows = parse_tree(FIX / "vllm-0.32-tree.txt")
    roles = {p.pid: classify(p.name, p.cmdline) for p in rows}
    assert roles == {15092: ("vllm", "api_server"), 15570: ("python", "helper"),
                     15571: ("vllm", "engine_core"), 15683: ("vllm", "worker")}
    # the idle section names the same processes the same way
    idle_rows = parse_tree(FIX / "vllm-0.32-tree.txt", "## (2)")
    idle = {p.pid: classify(p.name, p.cmdline) for p in idle_rows}
    assert idle == roles


def test_fixture_vllm_tree_groups_under_the_api_server():
    (server,) = group_servers(parse_tree(FIX / "vllm-0.32-tree.txt"))
    assert (server.pid, server.kind, server.port) == (15092, "vllm", 50655)
    assert server.members == [15092, 15571, 15683]  # resource_tracker is no server process
    assert server.cmdline[2] == "vllm.entrypoints.openai.api_server"


def test_fixture_llamacpp_single_process():
    rows = parse_tree(FIX / "llamacpp-tree.txt")
    (server,) = group_servers(rows)
    assert (server.pid, server.kind, server.name, server.port) == (31025, "llamacpp",
                                                                     "llama-server", 43703)


# ---- grouping many processes -------------------------------------------------------------

def P(pid, ppid, name, argv, t=None):
    return ProcInfo(pid, ppid, name, tuple(argv), float(t if t is not None else pid))


def test_group_servers_several_servers_oldest_first_and_noise_ignored():
    procs = [
        P(1, 0, "init", ["/sbin/init"]),
        P(50, 1, "bash", ["bash"]),
        P(300, 50, "python", ["python", "-m", "vllm.entrypoints.openai.api_server",
                              "--port", "8001"], t=30),
        P(301, 300, "VLLM::EngineCore", ["VLLM::EngineCore"], t=31),
        P(302, 301, "VLLM::Worker_TP0", ["VLLM::Worker_TP0"], t=32),
        P(303, 301, "VLLM::Worker_TP1", ["VLLM::Worker_TP1"], t=32),
        P(200, 50, "vllm", ["/v/bin/python", "/v/bin/vllm", "serve", "m"], t=10),
        P(201, 200, "VLLM::EngineCore", ["VLLM::EngineCore"], t=11),
        P(400, 1, "text-generation-launcher", ["text-generation-launcher", "--port", "3001"], t=40),
        P(401, 400, "text-generation-router", ["text-generation-router", "--port", "3001"], t=41),
        P(402, 400, "text-generation",
          ["python", "/o/bin/text-generation-server", "serve", "m"], t=41),
        P(500, 50, "grep", ["grep", "vllm serve"]),
        P(600, 50, "python", ["python", "-m", "infertop"]),
        P(700, 1, "VLLM::EngineCore", ["VLLM::EngineCore"], t=5),   # orphan: its own root
        P(800, 50, "python", ["python", "my_app.py"], t=80),           # embeds an engine
        P(801, 800, "VLLM::EngineCore", ["VLLM::EngineCore"], t=81),
    ]
    servers = group_servers(procs)
    assert [(s.pid, s.kind) for s in servers] == [(700, "vllm"), (200, "vllm"), (300, "vllm"),
                                                   (400, "tgi"), (800, "vllm")]
    by_pid = {s.pid: s for s in servers}
    assert by_pid[300].members == [300, 301, 302, 303]
    assert by_pid[300].port == 8001
    assert by_pid[200].port is None  # not on the command line: discover_all fills it
    assert by_pid[400].members == [400, 401, 402] and by_pid[400].port == 3001
    assert by_pid[800].members == [800, 801]


def test_group_servers_never_picks_infertop_itself():
    procs = [P(10, 1, "VLLM::EngineCore", ["VLLM::EngineCore"]),
             P(11, 10, "VLLM::Worker", ["VLLM::Worker"])]
    assert [s.pid for s in group_servers(procs)] == [10]
    assert group_servers(procs, self_pids={10, 11}) == []


# ---- settings --------------------------------------------------------------------------------

def test_vllm_settings_both_flag_forms_and_defaults():
    argv = ["/v/bin/python", "/v/bin/vllm", "serve", "Qwen/Qwen3-8B", "--enforce-eager",
            "--max-num-seqs=64", "--max_num_batched_tokens", "8192", "-tp", "2", "-pp=2",
            "--data-parallel-size", "4", "--gpu-memory-utilization", "0.85",
            "--max-model-len", "32768", "--kv-cache-dtype", "fp8",
            "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3}',
            "-O3", "--no-enable-prefix-caching"]
    s = server_settings("vllm", argv)
    assert s == {"model": "Qwen/Qwen3-8B", "cuda_graphs": "off (--enforce-eager)",
                 "max_num_seqs": "64", "max_num_batched_tokens": "8192",
                 "tensor_parallel_size": "2", "pipeline_parallel_size": "2",
                 "data_parallel_size": "4", "gpu_memory_utilization": "0.85",
                 "max_model_len": "32768", "kv_cache_dtype": "fp8",
                 "speculative_config": '{"method": "ngram", "num_speculative_tokens": 3}',
                 "compilation_config": "3", "prefix_caching": "off (--no-enable-prefix-caching)"}


def test_vllm_settings_from_the_fixture_command_line():
    s = server_settings("vllm", VLLM_API)
    assert s == {"model": "$ROOT/tiny-llama", "served_model_name": "tiny-llama",
                 "max_model_len": "512", "cuda_graphs": "on (default)"}


def test_vllm_settings_compilation_config_and_prefix_cache_on():
    s = server_settings("vllm", ["vllm", "serve", "--model", "m", "--compilation-config",
                                 '{"cudagraph_mode": "NONE"}', "--enable-prefix-caching"])
    assert s["model"] == "m"
    assert s["cuda_graphs"].startswith("off")
    assert s["prefix_caching"] == "on (--enable-prefix-caching)"
    assert server_settings("vllm", ["vllm", "serve", "m", "-O", "0"])["compilation_config"] == "0"


def test_sglang_settings():
    s = server_settings("sglang", ["python3", "-m", "sglang.launch_server", "--model-path", "m",
                                   "--tp-size", "4", "--mem-fraction-static=0.8",
                                   "--max-running-requests", "128", "--chunked-prefill-size",
                                   "4096", "--disable-cuda-graph"])
    assert s == {"model": "m", "tensor_parallel_size": "4", "mem_fraction_static": "0.8",
                 "max_running_requests": "128", "chunked_prefill_size": "4096",
                 "cuda_graphs": "off (--disable-cuda-graph)"}
    assert server_settings("sglang", ["sglang", "serve", "--tp", "2"]) == {
        "tensor_parallel_size": "2", "cuda_graphs": "on (default)"}


def test_llamacpp_settings_from_the_fixture_and_long_forms():
    assert server_settings("llamacpp", LLAMA_ARGV) == {
        "model": "$LLAMA_ROOT/tiny-llama.gguf", "parallel": "4", "ctx_size": "4096",
        "threads": "2", "cont_batching": "on (default)", "ctx_per_slot": "1024"}
    s = server_settings("llamacpp", ["llama-server", "--parallel=2", "--ctx-size", "8192",
                                     "-ngl", "99", "--cont-batching", "-fa", "on"])
    assert s["parallel"] == "2" and s["ctx_size"] == "8192" and s["n_gpu_layers"] == "99"
    assert s["cont_batching"] == "on (--cont-batching)" and s["flash_attn"] == "on"
    assert s["ctx_per_slot"] == "4096"


def test_tgi_and_unknown_settings():
    s = server_settings("tgi", ["text-generation-launcher", "--model-id", "m",
                                "--max-concurrent-requests=512", "--num-shard", "2"])
    assert s == {"model": "m", "max_concurrent_requests": "512", "tensor_parallel_size": "2"}
    assert server_settings("python", ["python", "x.py", "--max-num-seqs", "3"]) == {}
    assert server_settings("vllm", []) == {}


def test_ports():
    assert port_from_url("http://127.0.0.1:8000/metrics") == 8000
    assert port_from_url("localhost:8080") == 8080
    assert port_from_url("https://example.org/v1") == 443
    assert port_from_cmdline("vllm", VLLM_API) == 50655
    assert port_from_cmdline("triton", ["tritonserver", "--http-port=8010"]) == 8010
    assert port_from_cmdline("vllm", ["vllm", "serve", "m", "--port", "nope"]) is None


# ---- the real thing ------------------------------------------------------------------------

def test_real_tree_found_by_name_port_and_pid():
    with spawn(listen=True) as t:
        mine = [s for s in discover_all() if s.pid == t["parent"]]
        assert len(mine) == 1, "the spawned tree (python parent + VLLM::EngineCor child)"
        assert mine[0].kind == "vllm" and t["child"] in mine[0].members
        assert mine[0].port == t["port"]  # from its listening socket

        by_port = find_server(url=f"http://127.0.0.1:{t['port']}/metrics")
        assert by_port is not None and by_port.pid == t["parent"]
        assert f"port {t['port']}" in by_port.reason and by_port.kind == "vllm"

        by_pid = find_server(pid=t["child"], url=f"http://127.0.0.1:{t['port']}")
        assert by_pid is not None
        assert (by_pid.pid, by_pid.kind, by_pid.reason) == (t["child"], "vllm",
                                                             f"--pid {t['child']}")


def test_pid_that_does_not_exist_says_so():
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    server, why = locate(pid=p.pid)
    assert server is None and why == f"no process with pid {p.pid} (--pid)"
    assert find_server(pid=p.pid) is None


def test_url_port_nobody_listens_on_never_falls_back_to_names():
    # another server runs here, found by name; --url names an empty port: not that one
    with spawn() as t:
        assert any(s.pid == t["parent"] for s in discover_all())
        server, why = locate(url="http://127.0.0.1:1")
    assert server is None
    assert why.startswith("no local process listens on port 1 (--url)") and "name" in why


def test_url_port_owner_unreadable_falls_back_to_names_and_says_so(monkeypatch):
    from infertop.probes.server import discovery
    with spawn():
        # port 1 listed as held by someone whose fds we may not read (another user's)
        monkeypatch.setattr(discovery, "listening_ports", lambda: {1: []})
        server, why = locate(url="http://127.0.0.1:1")
    assert server is not None and why == ""
    assert server.reason.startswith("found by name, not by port: port 1 is held by")
    assert server.to_meta().found_by == "name, not port"


def test_fill_ports_prefers_the_roots_socket_and_never_a_workers():
    from infertop.probes.server.discovery import _fill_ports
    tgi = ServerProcess(1, "tgi", "text-generation-launcher", [], None, "", [1, 2])
    vllm_root = ServerProcess(5, "vllm", "python", [], None, "", [5, 6])
    engine = ServerProcess(9, "vllm", "VLLM::EngineCore", [], None, "", [9, 10])
    llama = ServerProcess(20, "llamacpp", "llama-server", [], None, "", [20])
    # 2: TGI's router on the default port; 6/10: vLLM workers' gloo sockets
    _fill_ports([tgi, vllm_root, engine, llama],
                {3000: [2], 8123: [5], 40000: [6], 40001: [10], 9999: [20], 8080: [777]})
    assert (tgi.port, vllm_root.port, engine.port, llama.port) == (3000, 8123, None, 9999)
    # an owner we may not read (another user's) on the default port: a fair guess
    other = ServerProcess(30, "vllm", "python", [], None, "", [30])
    _fill_ports([other], {8000: []})
    assert other.port == 8000


def test_remote_url_is_not_looked_for_locally():
    from infertop.probes.server.discovery import host_from_url, is_local_host, locate
    assert is_local_host("127.0.0.1") and is_local_host("localhost") and is_local_host("::1")
    assert host_from_url("http://gpu-node-7.example:8000/metrics") == "gpu-node-7.example"
    assert not is_local_host("gpu-node-7.example")
    server, why = locate(url="http://gpu-node-7.example:8000")
    assert server is None and "another machine" in why


def test_fixture_sglang_tree_roles_and_grouping():
    """The real SGLang 0.5.23 tree (recipe-sglang.sh): launch_server, its resource
    tracker, sglang::scheduler and sglang::detokenizer (psutil names; /proc comm cuts them
    to 'sglang::schedul' / 'sglang::detoken', as the threads' comm in the fixture shows)."""
    for section in ("## (1)", "## (2)"):
        rows = parse_tree(FIX / "sglang-0.5.23-tree.txt", section)
        roles = {p.pid: classify(p.name, p.cmdline) for p in rows}
        assert roles == {2081: ("sglang", "api_server"), 5227: ("python", "helper"),
                         5228: ("sglang", "scheduler"), 5231: ("sglang", "detokenizer")}
        (server,) = group_servers(rows)
        assert (server.pid, server.kind, server.port) == (2081, "sglang", 30011)
        assert server.members == [2081, 5228, 5231]
    text = (FIX / "sglang-0.5.23-tree.txt").read_text()
    comms = set(re.findall(r"comm='(sglang::[^']*)'", text))
    assert comms == {"sglang::schedul", "sglang::detoken"}
    assert {classify(c, []) for c in comms} == {("sglang", "scheduler"),
                                                ("sglang", "detokenizer")}
