"""nsys flow against tests/fakes/bin/nsys: sessions, start/stop, stats CSVs, summary, advice."""

from __future__ import annotations

import asyncio
import shlex
import stat
from pathlib import Path

import pytest

from infertop.probes.capture import nsys as N
from infertop.probes.capture.files import CaptureError

pytestmark = pytest.mark.integration   # a stand-in nsys run as a subprocess, with capture timeouts

FAKE = str(Path(__file__).resolve().parent / "fakes" / "bin" / "nsys")


@pytest.fixture
def fake_env(tmp_path, monkeypatch) -> Path:
    state = tmp_path / "state"
    monkeypatch.setenv("FAKE_NSYS_STATE", str(state))
    monkeypatch.delenv("FAKE_NSYS_FAIL", raising=False)
    monkeypatch.delenv("FAKE_NSYS_SESSIONS", raising=False)
    monkeypatch.delenv("FAKE_NSYS_OLD_HEADERS", raising=False)
    return state


def _calls(state: Path) -> list[list[str]]:
    return [ln.split("\t") for ln in (state / "calls.log").read_text().splitlines()]


async def _capture(tmp_path: Path, session: str = "infertop", **kw) -> N.NsysResult:
    cancel = asyncio.Event()
    # close the window at the first progress tick: the flow is the same, the test is fast
    return await N.nsys_capture(session, 5, tmp_path / "caps" / "win1", cancel, nsys=FAKE,
                                progress=lambda f: cancel.set(), **kw)


async def test_capture_runs_start_stop_stats_and_summarises(tmp_path, fake_env):
    (tmp_path / "caps").mkdir()
    res = await _capture(tmp_path)
    assert res.error is None, (res.error, res.fix)
    assert res.cancelled and res.seconds < 2
    assert res.report_path == tmp_path / "caps" / "win1.nsys-rep"
    assert res.summary is not None and res.report_path is not None
    assert stat.S_IMODE(res.report_path.stat().st_mode) == 0o600
    assert sorted(res.csv_paths) == sorted(N.STATS_REPORTS)
    calls = _calls(fake_env)
    assert [c[0] for c in calls] == ["start", "stop", "stats"]
    assert calls[0][1] == "--session=infertop" and f"--output={tmp_path / 'caps' / 'win1'}" in calls[0]
    assert calls[2] == ["stats", "--report", "cuda_gpu_kern_sum,cuda_api_sum,cuda_gpu_mem_time_sum",
                        "--format", "csv", "--output", str(tmp_path / "caps" / "win1"),
                        "--force-export=true", str(res.report_path)]
    s = res.summary
    assert s.top_kernels[0].name.startswith("void flash_fwd_kernel<")
    assert s.top_kernels[0].time_share == pytest.approx(0.625)
    assert s.top_kernels[0].instances == 10_000 and s.top_kernels[0].avg_ns == 5000.0
    assert s.kernel_instances == 22_000
    assert s.memcpy_share == pytest.approx(9 / 90)  # HtoD + DtoH over kernels + all memory ops
    signs = " | ".join(s.launch_overhead_signs)
    assert "22000 launches averaging 3.6 µs" in signs
    assert "55% of kernel launches are kernels under 5 µs" in signs
    assert "70% of GPU kernel time" in signs
    assert "CUDA graphs are off" in signs


async def test_old_average_header_and_missing_report(tmp_path, fake_env, monkeypatch):
    (tmp_path / "caps").mkdir()
    monkeypatch.setenv("FAKE_NSYS_OLD_HEADERS", "1")
    res = await _capture(tmp_path)
    assert res.summary is not None and res.summary.top_kernels[1].avg_ns == 2500.0
    monkeypatch.setenv("FAKE_NSYS_FAIL", "report")
    res = await _capture(tmp_path, report_timeout=0.6)
    assert res.report_path is None and res.error is not None
    assert "wrote no report" in res.error and "--capture-dir" in res.fix


async def test_a_stop_that_never_answers_is_an_error_not_an_exception(tmp_path, fake_env,
                                                                      monkeypatch):
    (tmp_path / "caps").mkdir()
    monkeypatch.setenv("FAKE_NSYS_FAIL", "stop-hang")
    res = await _capture(tmp_path, stop_timeout=1.0)
    assert res.report_path is None
    assert res.error == "nsys stop failed: no answer within 1 s"
    assert "nsys stop --session=infertop" in res.fix


async def test_start_failure_and_unknown_session(tmp_path, fake_env, monkeypatch):
    (tmp_path / "caps").mkdir()
    monkeypatch.setenv("FAKE_NSYS_FAIL", "start")
    res = await _capture(tmp_path)
    assert res.error is not None
    assert res.error.startswith("nsys start failed: nsys start: simulated failure")
    assert "nsys sessions list" in res.fix and res.report_path is None
    monkeypatch.delenv("FAKE_NSYS_FAIL")
    res = await _capture(tmp_path, session="other")
    assert res.error is not None and "not found" in res.error
    with pytest.raises(CaptureError):
        await N.nsys_capture("bad name; rm", 5, tmp_path / "x", nsys=FAKE)
    assert [c[0] for c in _calls(fake_env)] == ["start", "start"]  # no stop after a failed start


async def test_sessions_list(fake_env, monkeypatch):
    monkeypatch.setenv("FAKE_NSYS_SESSIONS", "infertop,profile-12345")
    got = await N.nsys_sessions(nsys=FAKE)
    assert [(s.name, s.id, s.state) for s in got] == [("infertop", "2361977", "Running"),
                                                      ("profile-12345", "2361978", "Running")]
    monkeypatch.setenv("FAKE_NSYS_SESSIONS", "")
    assert await N.nsys_sessions(nsys=FAKE) == []
    assert [s.name for s in N.parse_sessions("1234  profile-777\n")] == ["profile-777"]


async def test_nsys_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(N.glob, "glob", lambda pattern: [])
    monkeypatch.setattr(N.os.path, "isfile", lambda p: False)
    assert N.find_nsys() is None
    with pytest.raises(CaptureError) as ei:
        await N.nsys_sessions()
    assert "not installed" in ei.value.message and "nsight-systems-cli" in ei.value.fix
    plan = await N.plan_gpu_capture([["python", "-m", "vllm.entrypoints.openai.api_server"]],
                                    ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"],
                                    "vllm")
    assert plan.mode == "restart" and plan.message.startswith("nsys is not installed")
    assert "nsight-systems-cli" in plan.fix


def test_detect_launch_and_session_name():
    tree = [["/usr/local/bin/nsys", "launch", "--session-new=infer", "--trace=cuda,nvtx", "vllm", "serve", "m"],
            ["vllm", "serve", "m"], ["VLLM::EngineCore"]]
    assert N.detect_nsys_launch(tree)
    assert N.launch_session_name(tree) == "infer"
    assert N.launch_session_name([["nsys", "launch", "--session-new", "s2", "x"]]) == "s2"
    assert not N.detect_nsys_launch([["vllm", "serve", "nsys"], ["python", "nsys", "launch"]])
    assert N.detect_nsys_launch([["nsys", "profile", "-o", "r", "python", "x.py"]])


def test_restart_command_is_the_real_command_line_quoted():
    cmd = ["/opt/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server", "--model",
           "/models/My Model", "--served-model-name", "llama's"]
    line = N.restart_under_nsys_command(cmd, "vllm")
    assert line.startswith("VLLM_WORKER_MULTIPROC_METHOD=spawn nsys launch --session-new=infertop "
                           "--trace=cuda,nvtx --cuda-graph-trace=node --trace-fork-before-exec=true "
                           "--wait=all /opt/venv/bin/python -m vllm")
    assert shlex.split(line.split(" ", 1)[1])[7:] == cmd  # round-trips through a shell
    assert N.restart_under_nsys_command(["llama-server", "-m", "x.gguf"]).startswith("nsys launch ")
    with pytest.raises(ValueError):
        N.restart_under_nsys_command([])


async def test_plan_picks_nsys_then_endpoint_then_restart(fake_env, monkeypatch):
    launched = [["nsys", "launch", "--session-new=infertop", "vllm", "serve", "m"], ["vllm", "serve", "m"]]
    plan = await N.plan_gpu_capture(launched, launched[1], "vllm", nsys=FAKE)
    assert plan.mode == "nsys" and plan.session == "infertop"
    monkeypatch.setenv("FAKE_NSYS_SESSIONS", "")
    plain = [["python", "-m", "sglang.launch_server", "--model-path", "m"]]
    plan = await N.plan_gpu_capture(plain, plain[0], "sglang", nsys=FAKE)
    assert plan.mode == "endpoint"
    vllm_prof = [["vllm", "serve", "m", "--profiler-config", '{"profiler": "torch"}']]
    assert (await N.plan_gpu_capture(vllm_prof, vllm_prof[0], "vllm", nsys=FAKE)).mode == "endpoint"
    vllm = [["vllm", "serve", "m"]]
    plan = await N.plan_gpu_capture(vllm, vllm[0], "vllm", nsys=FAKE)
    assert plan.mode == "restart" and "not started under nsys" in plan.message
    assert plan.command is not None and plan.command.endswith("--wait=all vllm serve m")


def test_parse_stats_csv_from_stdout_with_noise():
    text = ("Generating SQLite file r.sqlite from r.nsys-rep\n"
            "Processing [r.sqlite] with [/opt/nsys/reports/cuda_gpu_kern_sum.py]... \n"
            ' ** CUDA GPU Kernel Summary (cuda_gpu_kern_sum):\n\n'
            '"Time (%)","Total Time (ns)","Instances","Avg (ns)","Med (ns)","Min (ns)","Max (ns)","StdDev (ns)","Name"\n'
            '80.0,800,4,200.0,200.0,100,300,50.0,"gemm_kernel<float, 4>"\n'
            '20.0,200,2,100.0,100.0,90,110,10.0,"relu"\n'
            "\n"
            "Processing [r.sqlite] with [cuda_api_sum.py]... \n")
    rows = N.parse_stats_csv(text)
    assert rows == [
        {"time%": 80.0, "totaltimens": 800.0, "instances": 4.0, "avgns": 200.0, "medns": 200.0,
         "minns": 100.0, "maxns": 300.0, "stddevns": 50.0, "name": "gemm_kernel<float, 4>"},
        {"time%": 20.0, "totaltimens": 200.0, "instances": 2.0, "avgns": 100.0, "medns": 100.0,
         "minns": 90.0, "maxns": 110.0, "stddevns": 10.0, "name": "relu"}]
    assert N.parse_stats_csv("no table here") == []
    s = N.summarize_stats(rows, [], [])
    assert s.memcpy_share == 0.0 and s.launch_overhead_signs == []
