"""Secrets on a server's command line or in a URL never reach a snapshot, a recording or a
report: the probes redact them before anything keeps them.  The server is a real process
whose argv carries the secrets; recordings and reports are written 0600."""

from __future__ import annotations

import gzip
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.hostile_server import Route, evil_vllm_page, hostile_server
from infertop.cli.main import main
from infertop.redact import REDACTED, redact_argv, redact_text, redact_url

SK = "sk-proj-AbCdEf0123456789xyzSECRET1"
HF = "hf_QwErTyUiOpAsDfGhJkLzXcVbNm123456"
ENV_TOKEN = "envtokenvalue-0451"
PASSWORD = "correct-horse-battery-7"
URL_PASS = "hunter2-urlpass"
SECRETS = (SK, HF, ENV_TOKEN, PASSWORD, URL_PASS, "apikey-eq-form-99")


@pytest.mark.parametrize("argv, want", [
    (["vllm", "serve", "m", "--api-key", SK], ["vllm", "serve", "m", "--api-key", REDACTED]),
    (["x", "--api-key=abc"], ["x", f"--api-key={REDACTED}"]),
    (["x", "--hf-token", "abc", "--port", "8000"], ["x", "--hf-token", REDACTED, "--port", "8000"]),
    (["x", "--hf_token=abc"], ["x", f"--hf_token={REDACTED}"]),
    (["x", "--db-password", "pw"], ["x", "--db-password", REDACTED]),
    (["env", "HF_TOKEN=abc", "OPENAI_API_KEY=k", "CUDA_VISIBLE_DEVICES=0"],
     ["env", f"HF_TOKEN={REDACTED}", f"OPENAI_API_KEY={REDACTED}", "CUDA_VISIBLE_DEVICES=0"]),
    (["x", "--model", "https://bob:pw@hub.example/m"],
     ["x", "--model", f"https://{REDACTED}@hub.example/m"]),
    (["x", f"--note={SK}"], ["x", f"--note={REDACTED}"]),            # a key shape anywhere
    (["x", "--max-num-batched-tokens", "8192", "--tokenizer", "t", "--kv-cache-dtype", "fp8"],
     ["x", "--max-num-batched-tokens", "8192", "--tokenizer", "t", "--kv-cache-dtype", "fp8"]),
    (["x", "--api-key", "--port", "1"], ["x", "--api-key", "--port", "1"]),  # no value given
])
def test_redact_argv_table(argv, want):
    assert redact_argv(argv) == want
    assert redact_argv(want) == want   # idempotent


def test_redact_url_and_text():
    assert redact_url("http://u:p@127.0.0.1:8000/metrics?token=abc&x=1") == \
        f"http://{REDACTED}@127.0.0.1:8000/metrics?token={REDACTED}&x=1"
    assert redact_text(f"Authorization: Bearer {SK}") == f"Authorization: Bearer {REDACTED}"
    assert redact_text("plain text stays") == "plain text stays"


# ---- a real process with secrets on its command line ------------------------------------
@pytest.fixture
def secret_server(tmp_path):
    """A real process whose argv looks like ``vllm serve`` with secrets in every form."""
    exe = tmp_path / "vllm"
    exe.write_text(f"#!{sys.executable}\nimport sys\nsys.stdin.read()\n")
    exe.chmod(0o755)
    argv = [str(exe), "serve", "tiny-model", "--api-key", SK, "--hf-token", HF,
            f"HF_TOKEN={ENV_TOKEN}", "--db-password", PASSWORD,
            "--api-key=apikey-eq-form-99", "--max-num-seqs", "64",
            f"--download-dir=https://bob:{URL_PASS}@hub.example/x"]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE)
    assert proc.stdin is not None   # piped above
    try:
        for _ in range(200):   # wait until /proc shows the exec'd command line
            try:
                if SK.encode() in Path(f"/proc/{proc.pid}/cmdline").read_bytes():
                    break
            except OSError:
                pass
            import time
            time.sleep(0.01)
        yield proc.pid
    finally:
        proc.stdin.close()
        proc.kill()
        proc.wait(5)


def assert_no_secret(text: str) -> None:
    leaked = [s for s in SECRETS if s in text]
    assert leaked == [], leaked


def test_process_probe_readings_hold_no_secret(secret_server):
    from infertop.probes.server.process import ProcessProbe
    probe = ProcessProbe(pid=secret_server)
    probe.open_blocking()
    s = probe.collect_blocking()
    text = json.dumps(s.to_dict())
    assert REDACTED in text and "--max-num-seqs 64" in text   # read, and redacted
    assert any(r.key == "server.setting" and r.label("name") == "max_num_seqs"
               for r in s.readings)
    assert_no_secret(text)


def test_snapshot_record_and_doctor_hold_no_secret(secret_server, tmp_path, capsys):
    with hostile_server({"/metrics": Route(evil_vllm_page)}) as base:
        url = base.replace("http://", f"http://admin:{URL_PASS}@") + "/metrics?token=" + HF
        common = ["--pid", str(secret_server), "--url", url, "--no-gpu", "--interval", "0.1"]
        assert main(["snapshot", "--json", "--window", "0.3", *common]) == 0
        snap_out = capsys.readouterr()
        rec = tmp_path / "rec.jsonl.gz"
        assert main(["record", "-o", str(rec), "--duration", "0.3", *common]) == 0
        rec_out = capsys.readouterr()
        main(["doctor", "--duration", "0.3", "--format", "json", *common])
        doc_out = capsys.readouterr()
    assert REDACTED in snap_out.out
    for out in (snap_out, rec_out, doc_out):
        assert_no_secret(out.out + out.err)
    recorded = gzip.decompress(rec.read_bytes()).decode()
    assert '"process.info"' in recorded
    assert_no_secret(recorded)
    assert stat.S_IMODE(os.stat(rec).st_mode) == 0o600


def test_pyspy_dump_command_line_is_redacted(secret_server):
    from infertop.probes.capture.pyspy_run import _read_cmdline
    line = _read_cmdline(secret_server)
    assert "serve tiny-model" in line and REDACTED in line
    assert_no_secret(line)
