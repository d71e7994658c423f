"""A small command-line flag reader (argparse's rules) shared by every kind's settings
table and by discovery's port lookup.  Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def norm_flag(tok: str) -> str:
    """'--max_num_seqs' -> '--max-num-seqs' (vLLM and SGLang accept both spellings)."""
    if tok.startswith("--"):
        return "--" + tok[2:].replace("_", "-")
    return tok


def parse_flags(args: list[str], with_value: Iterable[str],
                boolean: Iterable[str] = ()) -> dict[str, str]:
    """Flag -> value for ``--flag value`` and ``--flag=value``; boolean flags map to "".

    The last occurrence wins, as with argparse.  Unknown flags are skipped without taking
    the next token, so a positional after an unknown boolean flag is not swallowed.
    """
    takes = {norm_flag(f) for f in with_value}
    flags = {norm_flag(f) for f in boolean}
    out: dict[str, str] = {}
    i = 0
    while i < len(args):
        tok = args[i]
        if tok.startswith("-") and "=" in tok:
            k, v = tok.split("=", 1)
            k = norm_flag(k)
            if k in takes or k in flags:
                out[k] = v
            i += 1
            continue
        k = norm_flag(tok)
        if k in takes and i + 1 < len(args):
            out[k] = args[i + 1]
            i += 2
            continue
        if k in flags:
            out[k] = ""
        i += 1
    return out


def pick(found: Mapping[str, str], *flags: str) -> str | None:
    """The value of the first of ``flags`` that was given."""
    for f in flags:
        if f in found:
            return found[f]
    return None


def settings_from(args: list[str], table: Mapping[str, tuple[str, ...]],
                  boolean: Iterable[str] = ()) -> tuple[dict[str, str], dict[str, str]]:
    """(setting name -> value for each ``table`` entry given, every flag found)."""
    flags = [f for fs in table.values() for f in fs]
    found = parse_flags(args, flags, boolean)
    out = {}
    for name, fs in table.items():
        v = pick(found, *(norm_flag(f) for f in fs))
        if v is not None:
            out[name] = v
    return out, found
