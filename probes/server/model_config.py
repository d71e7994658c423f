"""The served model's shape, from its config.json, for the speed-of-light estimate.

The server's ``model`` setting is a local directory (``vllm serve /models/llama``) or a
Hugging Face id (``meta-llama/Llama-3.1-8B``) whose files sit in the HF cache
(``$HF_HUB_CACHE``, ``$HF_HOME/hub``, ``~/.cache/huggingface/hub``:
``models--ORG--NAME/snapshots/REV/config.json``).  A server in a container sees its own
root: ``/proc/PID/root`` + path is tried too.  Nothing is downloaded.

The file is hostile input: read at most ``MAX_CONFIG_BYTES``, parsed as JSON, and only
numbers are taken from it (infertop.speedoflight.model_facts); the architecture name is
cut to 80 characters.  The result is cached per (model, dtype, kv dtype); a miss is
retried every ``RETRY_SECONDS`` (the model may still be downloading).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from infertop.model import Reading, Status, make_labels
from infertop.speedoflight import ConfigError, model_facts

MAX_CONFIG_BYTES = 1 << 20
RETRY_SECONDS = 60.0
MODEL_KEYS = ("model.params", "model.active_params", "model.weight_bytes",
              "model.kv_bytes_per_token")


def hf_cache_dirs(env: Mapping[str, str]) -> list[Path]:
    out = []
    if env.get("HF_HUB_CACHE"):
        out.append(Path(env["HF_HUB_CACHE"]))
    if env.get("HF_HOME"):
        out.append(Path(env["HF_HOME"]) / "hub")
    home = env.get("HOME")
    if home:
        out.append(Path(home) / ".cache" / "huggingface" / "hub")
    return out


def candidates(model: str, *, env: Mapping[str, str], pid: int | None = None) -> list[Path]:
    """Where config.json may be, most specific first."""
    out: list[Path] = []
    if model.startswith("/") or model.startswith("."):
        p = Path(model)
        out.append(p / "config.json")
        if pid is not None and p.is_absolute():
            out.append(Path(f"/proc/{pid}/root") / p.relative_to("/") / "config.json")
        return out
    parts = model.strip("/").split("/")
    if len(parts) == 2 and all(parts) and ".." not in parts:
        repo = "models--" + "--".join(parts)
        for cache in hf_cache_dirs(env):
            snaps = cache / repo / "snapshots"
            try:
                revs = sorted(snaps.iterdir(), key=lambda d: d.stat().st_mtime, reverse=True)
            except OSError:
                continue
            out += [r / "config.json" for r in revs[:8]]
    return out


def read_config(path: Path) -> dict:
    """config.json as a dict; OSError/ValueError say why not."""
    with open(path, "rb") as f:
        data = f.read(MAX_CONFIG_BYTES + 1)
    if len(data) > MAX_CONFIG_BYTES:
        raise ValueError(f"{path.name} is larger than {MAX_CONFIG_BYTES} bytes")
    obj = json.loads(data.decode("utf-8", errors="replace"))
    if not isinstance(obj, dict):
        raise ValueError("config.json is not a JSON object")
    return obj


_r = Reading.of   # the unit and kind its key is declared with


class ModelConfigReader:
    def __init__(self, *, env: Mapping[str, str] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._env = env if env is not None else os.environ
        self._clock = clock
        self._cache: dict[tuple, tuple[float, list[Reading]]] = {}

    def readings(self, settings: Mapping[str, str], pid: int | None = None) -> list[Reading]:
        model = (settings.get("model") or "").strip()
        if not model:
            return []
        key = (model, settings.get("dtype"), settings.get("kv_cache_dtype"), pid)
        now = self._clock()
        got = self._cache.get(key)
        if got is not None and (got[0] == float("inf") or now < got[0]):
            return got[1]
        readings, found = self._read(model[:400], settings, pid)
        self._cache = {key: (float("inf") if found else now + RETRY_SECONDS, readings)}
        return readings

    def _read(self, model: str, settings: Mapping[str, str],
              pid: int | None) -> tuple[list[Reading], bool]:
        lab = make_labels(model=model[:200])
        why = f"no config.json for {model[:200]} (not a local directory, not in the HF cache)"
        for path in candidates(model, env=self._env, pid=pid):
            try:
                cfg = read_config(path)
            except FileNotFoundError:
                continue
            except (OSError, ValueError) as e:
                why = f"{path}: {type(e).__name__}: {str(e)[:200]}"
                continue
            try:
                f = model_facts(cfg, served_dtype=settings.get("dtype"),
                                kv_cache_dtype=settings.get("kv_cache_dtype"))
            except ConfigError as e:
                why = f"{path}: {e}"
                continue
            note = "; ".join(f.notes)
            info = make_labels(model=model[:200], dtype=f.dtype[:40])
            return [
                _r("model.info", 1.0, info, text=f"{f.architecture} ({path})"[:400]),
                _r("model.params", f.params, lab, reason=note),
                _r("model.active_params", f.active_params, lab),
                _r("model.weight_bytes", f.weight_bytes, lab, reason=note),
                _r("model.kv_bytes_per_token", f.kv_bytes_per_token, lab),
            ], True
        return [_r(k, None, lab, Status.NODATA, why) for k in MODEL_KEYS], False
