"""What each pane shows, drawn from a Frame through ``render_frame`` (no App, no Pilot):
the Pilot tests keep keys and timing."""

from helpers.panes import frames_of, pane_text
from helpers.synthetic_source import SyntheticSource


def test_six_panes_show_their_layers_readings():
    frame = frames_of(SyntheticSource(), 3)
    hw = pane_text("hardware", frame)
    assert "H100" in hw and "90 %" in hw
    assert "70 %" in pane_text("kernels", frame)          # GPM SM active
    mem = pane_text("memory", frame)
    assert "KV cache" in mem and "40 %" in mem
    sched = pane_text("scheduling", frame)
    assert "VLLM::EngineCore" in sched and "95 %" in sched
    assert "spread" in pane_text("parallelism", frame)
    dec = pane_text("decoding", frame)
    assert "TTFT" in dec and "ms" in dec


def test_kv_reading_follows_the_source():
    assert "85 %" in pane_text("memory", frames_of(SyntheticSource(kv=0.85), 3))
    assert "85 %" not in pane_text("memory", frames_of(SyntheticSource(kv=0.4), 3))


def test_no_gpu_no_server_says_what_is_missing():
    frame = frames_of(SyntheticSource(gpus=0, server=False), 2)
    assert "NVML library not found" in pane_text("hardware", frame)
    assert "No decoding readings" in pane_text("decoding", frame)
