"""Typed views of the parsed command line (issue 34 item 4): the helpers several
subcommands share read ``SourceArgs``/``ScreenArgs`` instead of ``getattr(args, ...)``."""

from __future__ import annotations

import argparse
import ast
from dataclasses import fields
from pathlib import Path

from infertop.cli.args import SUBCOMMANDS, build_parser, build_sub_parser
from infertop.cli.options import ScreenArgs, SourceArgs, typed

ROOT = Path(__file__).resolve().parent.parent


def _dests(parser: argparse.ArgumentParser) -> set[str]:
    out = {a.dest for a in parser._actions}   # argparse keeps no public list of them
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for sub in a.choices.values():
                out |= _dests(sub)
    return out


def test_every_field_is_a_flag_some_command_defines():
    dests = _dests(build_parser())
    for cmd in SUBCOMMANDS:
        dests |= _dests(build_sub_parser(cmd))
    for cls in (SourceArgs, ScreenArgs):
        missing = [f.name for f in fields(cls) if f.name not in dests]
        assert missing == [], f"{cls.__name__}: no command has {missing}"


def test_a_flag_the_command_lacks_reads_as_its_default():
    assert typed(SourceArgs, argparse.Namespace()) == SourceArgs()
    given = typed(SourceArgs, argparse.Namespace(url=["a", "b"], speed=None, source="demo"))
    assert given == SourceArgs(source="demo", url=("a", "b"))
    args = build_sub_parser("snapshot").parse_args(["--url", "http://127.0.0.1:9/metrics"])
    assert typed(SourceArgs, args).url == ("http://127.0.0.1:9/metrics",)
    assert typed(ScreenArgs, argparse.Namespace(record="x.jsonl", force=True)) == \
        ScreenArgs(record="x.jsonl", force=True)


def test_cli_reads_no_flag_through_getattr():
    hits = []
    for p in sorted((ROOT / "cli").rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id == "getattr" and node.args \
                    and ast.unparse(node.args[0]) == "args":
                hits.append(f"{p.name}:{node.lineno}")
    assert hits == [], "read it through cli/options.py's typed views"
