"""Settings as every view shows them: a default read off a command line is a guess.

``cuda_graphs on (default)`` comes from the server's command line (no flag: vLLM's default).
With no GPU seen (a CPU build) there are no CUDA graphs to speak of, and a server that does
not answer may not run with that line.  The screen's kernels pane and doctor's report say
the same through this one function.
"""

from __future__ import annotations

from dataclasses import replace

from .model import Reading, Status

NO_GPU = "n/a (no GPU seen)"


def cuda_graphs_text(text: str, *, gpus_seen: bool, device: str | None,
                     server_down: bool) -> str:
    """The cuda_graphs setting's text as shown."""
    if "default" not in text:
        return text
    if (device or "").lower().startswith("cpu") or not gpus_seen:
        return NO_GPU
    if server_down:
        return f"{text}? (server not answering)"
    return text


def shown_layers(frame) -> dict[str, list[Reading]]:
    """``frame.layers()`` with guessed settings qualified as the screen qualifies them."""
    layers = frame.layers()
    gpus = any(r.key.startswith("gpu.") and r.ok for r in frame.snapshot.readings())
    device = next((r.text for r in frame.by_key("server.setting")
                   if r.label("name") == "device"), None)
    down = any(name.startswith("server") and s.status is not Status.OK
               for name, s in frame.snapshot.samples.items())
    out: dict[str, list[Reading]] = {}
    for layer, rs in layers.items():
        out[layer] = [
            replace(r, text=cuda_graphs_text(r.text, gpus_seen=gpus, device=device,
                                             server_down=down))
            if r.key == "server.setting" and r.label("name") == "cuda_graphs" and r.text
            else r for r in rs]
    return out
