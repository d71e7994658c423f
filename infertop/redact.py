"""Secrets out of command lines and URLs before anything keeps them.

Inference servers are started with their credentials on the command line (``vllm serve m
--api-key sk-...``, ``--hf-token hf_...``, ``env HF_TOKEN=... python -m sglang...``, a model
URL with ``user:pass@``).  infertop shows command lines, records them and prints them in
reports, so the probes pass every argv and URL through here first: no output can hold what
was never kept.  Over-redacting is the safe side: ``--ssl-keyfile PATH`` loses its path.

* a flag whose name has a secret word (``key``, ``token``, ``secret``, ``password``...)
  as one of its ``-``/``_``-separated words: its value (``--api-key X`` or
  ``--api-key=X``) becomes ``<redacted>``.  ``--max-num-batched-tokens`` is not one
  ("tokens" is not "token").
* an environment-style ``NAME=value`` argument whose NAME holds KEY, TOKEN, SECRET,
  PASSWORD, PASSWD or CREDENTIAL (``HF_TOKEN=...``, ``OPENAI_API_KEY=...``).
* ``scheme://user:pass@host`` anywhere in an argument, and secret-named URL query
  parameters (``?token=...``).
* values that look like well-known key formats wherever they stand (``sk-...``, ``hf_...``,
  ``ghp_...``, ``Bearer ...``).

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["REDACTED", "redact_argv", "redact_text", "redact_url", "is_secret_flag"]

REDACTED = "<redacted>"

_SECRET_WORDS = frozenset({"key", "apikey", "token", "secret", "password", "passwd", "pwd",
                           "pass", "credential", "credentials", "auth"})
_ENV_SECRET = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
_ENV_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.I)
# userinfo in a URL: scheme://user:password@ or scheme://token@
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)([^/@\s]+)@")
_QUERY_SECRET = re.compile(r"(?i)([?&;](?:[a-z0-9_.-]*?)(?:key|token|secret|password|passwd|"
                           r"auth|sig|signature|credential)[a-z0-9_.-]*=)([^&#\s]+)")
# Well-known key shapes, redacted wherever they appear.
_KEY_SHAPES = re.compile(
    r"\b(?:sk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}|hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}"
    r"|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})")
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}")


def is_secret_flag(flag: str) -> bool:
    """``--api-key``, ``--hf_token``, ``-password``: a flag whose value is a secret."""
    if not flag.startswith("-"):
        return False
    name = flag.lstrip("-").lower()
    if not name:
        return False
    words = re.split(r"[-_.]", name)
    return any(w in _SECRET_WORDS for w in words) or name in ("apikey", "hftoken")


def redact_url(url: str) -> str:
    """A URL without ``user:pass@`` and without secret-named query values."""
    url = _USERINFO.sub(lambda m: m.group(1) + REDACTED + "@", url)
    return _QUERY_SECRET.sub(lambda m: m.group(1) + REDACTED, url)


def redact_text(text: str) -> str:
    """Free text (one argument, an error message): URLs' userinfo and query secrets, key
    shapes and ``Bearer ...`` tokens replaced."""
    if "://" in text:
        text = redact_url(text)
    text = _KEY_SHAPES.sub(REDACTED, text)
    return _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)


def redact_argv(argv: Iterable[str]) -> list[str]:
    """A command line with every secret value replaced by ``<redacted>`` (see module doc)."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            hide_next = False
            if not arg.startswith("-") or arg == "-":
                out.append(REDACTED)
                continue
        if arg.startswith("-"):
            flag, eq, _ = arg.partition("=")
            if is_secret_flag(flag):
                if eq:
                    out.append(f"{flag}={REDACTED}")
                else:
                    out.append(arg)
                    hide_next = True
                continue
        else:
            m = _ENV_SECRET.match(arg)
            if m and _ENV_SECRET_NAME.search(m.group(1)):
                out.append(f"{m.group(1)}={REDACTED}")
                continue
        out.append(redact_text(arg))
    return out
