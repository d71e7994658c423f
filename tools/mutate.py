#!/usr/bin/env python3
"""Mutation run for infertop's core: do the fast unit tests notice a small bug?

Line coverage says a line ran; it does not say that a test checked what the line
computed.  This tool plants one small bug at a time (a *mutant*) in a core module and runs
only the fast unit tests of that module: if they still pass, the bug would have shipped.

Mutations (the classic, cheap ones):

* ``boundary``  ``<`` <-> ``<=``, ``>`` <-> ``>=``
* ``negate``    a comparison turned around: ``<`` -> ``>=``, ``==`` -> ``!=``, ``is`` ->
  ``is not``, ``in`` -> ``not in`` (and back)
* ``boolop``    ``and`` <-> ``or``
* ``maxmin``    ``max(...)`` <-> ``min(...)``
* ``const``     a number constant + 1 (``0`` -> ``1``, ``0.5`` -> ``1.5``)
* ``delete``    a statement inside a function replaced by ``pass``

The source tree is never written: each mutant runs in a child process (forked, POSIX)
whose import hook compiles the mutated AST (keeping the real file name and line numbers)
when the module is imported.  An interrupted run (Ctrl-C, SIGTERM, a timeout) leaves
nothing behind.  Tests that spawn a new Python process would import the unmutated module;
the mapped tests (TARGETS: each module's fast unit tests, no end-to-end run) do not.

Each module has a sampling rate (``Target.rate``): a mutant is part of the run when the
hash of its stable id (file, function, mutation, code text and the statement around it;
not the line number) falls under it, so editing one function does not reshuffle the
sample of the others.  ``--all`` runs every mutant.  Mutants that cannot change behaviour
are listed in EQUIVALENT with the reason and are not counted.

    python tools/mutate.py                      # every module (~30-50 mutants a module,
                                                # ~840 in all; the rule modules and
                                                # findings run ~48 test files each:
                                                # run them per module)
    python tools/mutate.py -m derive -m history # some modules
    python tools/mutate.py --list -m promtext   # the sample, without running it
    python tools/mutate.py --only derive.py:_throughput_steps  # ids containing a text
    python tools/mutate.py --show 'ID'          # one mutant's test run, with its output

The score is killed (a test failed, or the tests hung past the timeout) over the mutants
that are not equivalent.  Exit status: 0 when every module reaches ``--min-score``
(default 0: report only), 1 when one does not, 2 when the unmutated tests fail.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import CodeType, ModuleType

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Target:
    module: str             # import name
    path: str               # relative to ROOT
    tests: tuple[str, ...]  # fast unit tests that cover it (no end-to-end runs); () found
    rate: float             # share of the module's mutants in the default run (1: all)
    keyword: str = ""       # pytest -k: the rows of shared table tests that are its own
    via: str = ""           # found tests: also those of this module (a rule module runs
    #                         inside the engine: infertop.rules.registry imports it)

    def test_files(self) -> tuple[str, ...]:
        """The mapped tests, or (none mapped) every test file that exercises the module:
        imports it, or imports a test helper that does (rulekit's Feed runs the whole
        Diagnoser), whatever the file is called.  Slow and integration tests are left
        out when the tests run (``-m``).  Order only, never the selection: the files
        that import the module itself come first, then those named for it
        (test_rules_parallelism.py runs PAR rules through rulekit), then the rest;
        pytest runs them in this order and stops at the first failure (``-x``), so a
        killed mutant of a rule module costs its own tests, not the engine's 48 files."""
        if self.tests:
            return self.tests
        short = self.module.rsplit(".", 1)[-1]

        def named_first(files: Sequence[str]) -> tuple[str, ...]:
            named = [f for f in files if short in Path(f).stem]
            return tuple(named) + tuple(f for f in files if f not in named)
        own = exercising(self.module)
        rest = sorted(set(exercising(self.via)) - set(own) if self.via else ())
        return named_first(own) + named_first(rest)


_IMPORT_RE = r"(?m)^[ \t]*(?:from|import)[ \t]+([\w.]+)(?:[ \t]+import[ \t]+(\([^)]*\)|[\w, \t]+))?"


def _imports(path: Path) -> set[str]:
    """Dotted names a file imports (``from a.b import c`` gives a.b and a.b.c)."""
    import re
    out: set[str] = set()
    for mod, names in re.findall(_IMPORT_RE, path.read_text(errors="replace")):
        out.add(mod)
        for n in re.split(r"[\s,()]+", names or ""):
            if n:
                out.add(f"{mod}.{n}")
    return out


def exercising(module: str) -> tuple[str, ...]:
    """tests/test_*.py files that import ``module`` or a tests/helpers module that does."""
    helpers = ROOT / "tests" / "helpers"

    def hits(names: set[str]) -> bool:
        return module in names or any(n.startswith(module + ".") for n in names)
    via = {f"helpers.{p.stem}" for p in helpers.glob("*.py") if hits(_imports(p))}
    out = []
    for p in sorted((ROOT / "tests").glob("test_*.py")):
        names = _imports(p)
        if hits(names) or names & via or any(n.rsplit(".", 1)[0] in via for n in names):
            out.append(str(p.relative_to(ROOT)))
    return tuple(out)


TARGETS = {
    # issue 31 round 2 (mutB): found by what exercises them, like the modules below
    "windowstat": Target("infertop.windowstat", "infertop/windowstat.py", (), 1.0),
    "derive": Target("infertop.derive", "infertop/derive.py", (), 0.1),
    "history": Target("infertop.history", "infertop/history.py", (), 0.05),
    "promtext": Target("infertop.promtext", "infertop/promtext.py", (), 0.05),
    # issue 31: the modules that decide a severity, each with every fast test that
    # exercises it (Target.test_files: found by imports, not by file name)
    "engine": Target("infertop.rules.engine", "infertop/rules/engine.py", (), 0.09),
    "hardware": Target("infertop.rules.hardware", "infertop/rules/hardware.py", (), 0.11,
                       via="infertop.rules.engine"),
    "promrules": Target("infertop.promrules", "infertop/promrules.py", (), 0.16),
    "promtool_asserts": Target("infertop.promtool_asserts", "infertop/promtool_asserts.py",
                               (), 0.3),
    "findings": Target("infertop.findings", "infertop/findings.py", (), 0.6),
    # --- mutB (issue 31 round 2): the data side, each with the tests found by what
    # exercises it; rates give a sample of ~30-40 mutants per module (all of the small ones)
    "compare": Target("infertop.compare", "infertop/compare.py", (), 0.1),
    "dialects": Target("infertop.dialects", "infertop/dialects.py", (), 0.1),
    "pdsplit": Target("infertop.pdsplit", "infertop/pdsplit.py", (), 0.3),
    "mapping_plan": Target("infertop.mapping_plan", "infertop/mapping_plan.py", (), 0.5),
    "kvevents": Target("infertop.kvevents", "infertop/kvevents.py", (), 0.13),
    "reading_index": Target("infertop.reading_index", "infertop/reading_index.py", (), 1.0),
    # the rule tables' vocabulary: the tests that import it (the dialect engine's 17 files,
    # via="infertop.dialects", took 46 s a mutant on the shared two cores)
    "servers_mapping": Target("infertop.servers.mapping", "infertop/servers/mapping.py", (),
                              0.6),
    "servers_registry": Target("infertop.servers.registry", "infertop/servers/registry.py",
                               (), 0.4),
    # --- mutA (issue 31 round 2): every rule module with the tests found by what
    # exercises it (its own importers and the engine's: the registry runs it there), at
    # a rate that samples ~30 mutants each; memory and decoding were mapped to their
    # layer's file and a -k of the rule table, which missed the engine-level tests
    "memory": Target("infertop.rules.memory", "infertop/rules/memory.py", (), 0.09,
                     via="infertop.rules.engine"),
    "decoding": Target("infertop.rules.decoding", "infertop/rules/decoding.py", (), 0.1,
                       via="infertop.rules.engine"),
    "scheduling": Target("infertop.rules.scheduling", "infertop/rules/scheduling.py", (),
                         0.11, via="infertop.rules.engine"),
    "parallelism": Target("infertop.rules.parallelism", "infertop/rules/parallelism.py", (),
                          0.14, via="infertop.rules.engine"),
    "kernels": Target("infertop.rules.kernels", "infertop/rules/kernels.py", (), 0.11,
                      via="infertop.rules.engine"),
    "base": Target("infertop.rules.base", "infertop/rules/base.py", (), 0.1,
                   via="infertop.rules.engine"),
    "fleet": Target("infertop.rules.fleet", "infertop/rules/fleet.py", (), 0.5,
                    via="infertop.rules.engine"),
    "promtool_input": Target("infertop.promtool_input", "infertop/promtool_input.py", (),
                             0.16),
}

# Mutants that behave exactly like the original (no test can kill them), by id, with why.
# An id names no line number, so it survives edits elsewhere in the file; one that no
# longer matches a mutant is reported as stale.
EQUIVALENT: dict[str, str] = {
    # windowstat
    "windowstat.py:recent_values:delete:if series.kind is Kind.HISTOGRAM: -> pass":
        "Series.window_values gives (None, []) for a histogram, so the next test returns "
        "None as well: the check only saves the call",
    "windowstat.py:recent_values:delete:return None -> pass in "
    "`if series.kind is Kind.HISTOGRAM:`":
        "as above: window_values gives (None, []) for a histogram",
    # derive
    "derive.py:derive:delete:continue -> pass in `if s.key == 'server.iteration_tokens':`":
        "the next test skips it anyway ('server.iteration_tokens' does not start with "
        "'latency.')",
    "derive.py:derive:const:0.0 -> 1.0 in `out.append(_reading(new_key, s.labels, "
    "inc[0] if inc is not None el...`":
        "unreachable: a series of two points or more always has an increase over any "
        "window (its baseline is the newest point at or before the window's start)",
    "derive.py:derive:delete:if len(pts) < 2 or pts[0][1] == pts[-1][1]: -> pass in "
    "`for s in history.find(counter):`":
        "a shortcut: without it the increase over the event window is computed, and is "
        "None (read 0.0) or 0.0 in exactly the cases it skips",
    "derive.py:derive:boolop:len(pts) < 2 or pts[0][1] == pts[-1][1] -> "
    "len(pts) < 2 and pts[0][1] == pts[-1][1]":
        "the same shortcut, taken less often: the increase it then computes is 0.0 too",
    "derive.py:_throughput_steps:delete:return None -> pass in `if not series:`":
        "with no series the loop adds nothing and the three-step guard returns None",
    "derive.py:_throughput_steps:delete:if first_t is None: -> pass in `for s in series:`":
        "unreachable: the series were chosen by covered(), so each has a first point",
    "derive.py:_throughput_steps:delete:continue -> pass in `if first_t is None:`":
        "as above: unreachable after covered()",
    # promtext
    "promtext.py:clear_caches:delete:_COMMENTS[''] = _SKIP_EVENT -> pass in `with _LOCK:`":
        "a pre-seeded cache entry only: the first page with a blank line caches the same "
        "skip event for it",
    "promtext.py:_duplicate:boundary:len(set(fast_heads)) < len(fast_heads) -> "
    "len(set(fast_heads)) <= len(fast_heads)":
        "it only gates a loop that finds no duplicate when the set is as long as the list",
    # rules/decoding
    "decoding.py:_note_restart:boundary:prev[0] > when -> prev[0] >= when":
        "equal times never get here: the test before returns for times within 1e-6",
    # findings
    "findings.py:_json_num:boundary:v > 0 -> v >= 0":
        "v is an infinity there (not finite, not NaN): never 0, so > and >= agree",
    # rules/engine: the re-judgement of an escalation that leaned on a relaxed threshold
    "engine.py:Diagnoser._hold_not_lift:delete:if not lifted: -> pass":
        "a shortcut: with nothing lifted the strict re-run replaces no candidate",
    "engine.py:Diagnoser._hold_not_lift:delete:return got -> pass in `if not lifted:`":
        "as above: with nothing lifted the loop after the re-run returns got unchanged",
    "engine.py:Diagnoser._hold_not_lift:boundary:c.severity > raised.get((rule.code, "
    "c.subject), c.severity) -> c.severity >= raised.get((rule.code, c.subject), "
    "c.severity)":
        "a candidate at its raised level is re-judged too, and kept at that level unless "
        "the strict verdict is higher, which a relaxed check never undercuts",
    "engine.py:Diagnoser._hold_not_lift:boundary:c.severity > old.severity -> "
    "c.severity >= old.severity":
        "two strict candidates of one subject at the same severity: either is the verdict "
        "(the engine keeps the first, as evaluate does; same severity either way)",
    # rules/memory
    "memory.py:_growth:delete:if len(vals) < len(at): -> pass":
        "value_at is None only for an empty series, and covered() has just said it is not",
    "memory.py:_growth:delete:if first_t is None: -> pass":
        "first_time() is None only for an empty series, and covered() has just said it "
        "is not",
    "memory.py:_growth:delete:return None -> pass in `if first_t is None:`":
        "as above: unreachable after covered()",
    "memory.py:weights_twice:delete:if pid not in ctx.procs: -> pass in `for r in rs:`":
        "a pid with no process info groups alone (no model, root_of gives the pid "
        "itself, and a GPU lists a pid once), so it can never make a pair",
    # --- mutB (issue 31 round 2)
    "pdsplit.py:derive_split:delete:if not decode: -> pass":
        "a shortcut: with no decode instance the loop skips every TTFT series (`inst not "
        "in decode`) and returns [] as well",
    "dialects.py:_mapped:const:0 -> 1 in `if hit is not None and hit[0] is lab:`":
        "the memo then never hits (hit[1] is the mapped tuple, never the labels): every "
        "sample's labels are mapped afresh by the same pure _map_labels, with the same "
        "result (a cost, not a behaviour)",
    "dialects.py:_finish:boolop:fresh is not None and last is not None and (n < len(fresh)) "
    "-> fresh is not None or last is not None or n < len(fresh)":
        "the one caller (readings_from_families) passes the plan and _run's fresh list, "
        "one entry per series: the condition is true for every series either way",
    "kvevents.py:KvEventTracker.add:boundary:seq > s.last_seq + 1 -> seq >= s.last_seq + 1":
        "the next sequence number in order then adds seq - last - 1 = 0 dropped batches",
    "kvevents.py:KvEventTracker.add:boundary:self._evicted_n > self.max_evicted -> "
    "self._evicted_n >= self.max_evicted":
        "at the cap exactly the trim loop inside pops nothing (it runs only while over it)",
    "reading_index.py:ReadingIndex.__init__:delete:if key not in cumulative: -> pass in "
    "`for key, lst in raw.items():`":
        "a shortcut: a key with no cumulative reading keeps all of them in the filter "
        "below, which then stores the same list (len(kept) == len(lst))",
    "reading_index.py:ReadingIndex.__init__:delete:continue -> pass in "
    "`if key not in cumulative:`":
        "as above: the filter below stores the same list again for such a key",
    "registry.py:_load:boolop:__package__ or 'infertop.servers' -> __package__ and "
    "'infertop.servers'":
        "imported as a package module __package__ is 'infertop.servers', and both "
        "expressions give it",
    "registry.py:register:const:1 -> 2 in `_version += 1`":
        "_version is only a stamp compared for equality (_cached): a step of 2 changes it "
        "as surely as a step of 1",
    "history.py:_HistStore.__init__:const:0 -> 1 in `self.cbase = 0`":
        "an offset only: a point's start is stored as len(c) + cbase and read back less "
        "cbase, so any starting cbase gives the same counts",
    # --- mutA (issue 31 round 2)
    "engine.py:_own_title:const:1 -> 2 in `return f.title.split(': caused by ', 1)[0]`":
        "the first piece of str.split is the same whatever maxsplit (>= 1) is: it only "
        "limits how the rest is cut",
    "promrules.py:_alerts.add:const:0.0 -> 1.0 in `out.append(Alert(code, sev, e_strict, "
    "value_text, 0.0, 0.0, tuple(s...`":
        "a placeholder: build(), _alerts' only caller, sets every kept alert's for_s from "
        "the catalogue",
    "promrules.py:_alerts.add:const:0.0 -> 1.0 in `out.append(Alert(code, sev, e_strict, "
    "value_text, 0.0, 0.0, tuple(s...` #2":
        "a placeholder: build(), _alerts' only caller, sets every kept alert's keep_s from "
        "the catalogue",
    "promtool_input.py:_server_reading:delete:return -> pass in "
    "`if r.key == 'server.process_start_seconds':`":
        "a shortcut: process_start_time_seconds is dialects.GENERIC, in no Dialect.rules, "
        "so _family_for finds no family for it and the function returns just after",
    "promtool_asserts.py:expectations:boundary:s <= e.worst -> s < e.worst":
        "the generator runs only when e.worst is not among the code's exported levels, so "
        "no s equals e.worst there",
    "findings.py:Severity.__lt__:delete:if isinstance(other, Severity): -> pass":
        "a < b then returns NotImplemented, and Python asks the reflected b.__gt__(a), "
        "which compares the same ranks (a number: TypeError either way)",
    "findings.py:Severity.__lt__:delete:return self.rank < other.rank -> pass in "
    "`if isinstance(other, Severity):`":
        "as above: NotImplemented, then the reflected __gt__ gives the same answer",
    "findings.py:Severity.__le__:delete:return self.rank <= other.rank -> pass in "
    "`if isinstance(other, Severity):`":
        "NotImplemented, then the reflected b.__ge__(a) gives the same answer",
    "findings.py:_json_num:const:0 -> 1 in `return 'NaN' if math.isnan(v) else '+Inf' if "
    "v > 0 else '-Inf'`":
        "v is an infinity there (not finite, not NaN): > 0 and > 1 agree",
    "memory.py:_growth:const:1 -> 2 in `at = [value_at(s, start_t + span * k / n) for k in "
    "range(n + 1)]`":
        "the extra point is past now, where value_at gives the newest value: one more "
        "step of 0, which neither goes down nor counts as rising (the count is held to n)",
    "kernels.py:ttft_superlinear:delete:continue -> pass in `if ts is None or not ts.points:`":
        "a shortcut: _fit reads a missing TTFT series as no points (at() gives None, "
        "_delta None), so the fit is None and the loop continues just after",
    "kernels.py:_delta:delete:if points is None: -> pass":
        "unreachable: _fit calls it for the prompt series (has points: series_of), the "
        "TTFT series (checked by the caller) and the queue only when it is not None",
}

# --- finding the mutation sites ----------------------------------------------------------

_BOUNDARY = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}
_NEGATE = {ast.Lt: ast.GtE, ast.LtE: ast.Gt, ast.Gt: ast.LtE, ast.GtE: ast.Lt,
           ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
           ast.In: ast.NotIn, ast.NotIn: ast.In}
_SYMBOL = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==",
           ast.NotEq: "!=", ast.Is: "is", ast.IsNot: "is not", ast.In: "in",
           ast.NotIn: "not in"}
_DELETABLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return, ast.Continue,
              ast.Break, ast.If, ast.For, ast.While, ast.Raise, ast.With, ast.Try)
# functions whose text is for people reading a debugger, not behaviour
_SKIP_FUNCS = {"__repr__"}


@dataclass
class Site:
    """One mutation of one node: ``apply`` changes the node in place."""
    kind: str
    func: str        # qualified name of the enclosing function ("" at module level)
    line: int
    before: str
    after: str
    apply: Callable[[], None]
    where: str = ""  # constants and deletions: the statement around them (for the id)
    id: str = ""


def _short(node: ast.AST, limit: int = 70) -> str:
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _sites(tree: ast.Module) -> list[Site]:
    """Every mutation site of the module, in a fixed walk order."""
    out: list[Site] = []

    def visit(node: ast.AST, func: str, in_def: bool, in_fstring: bool, head: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name in _SKIP_FUNCS:
                return
            func = f"{func}.{node.name}" if func else node.name
            in_def = not isinstance(node, ast.ClassDef)
        if isinstance(node, ast.JoinedStr):
            in_fstring = True
        if isinstance(node, ast.stmt):
            head = _head(node)
        _node_sites(node, func, in_def, in_fstring, head, out)
        for child in ast.iter_child_nodes(node):
            visit(child, func, in_def, in_fstring, head)

    visit(tree, "", False, False, "")
    seen: dict[str, int] = {}
    for s in out:
        base = f"{s.func}:{s.kind}:{s.before} -> {s.after}"
        if s.where:
            base += f" in `{s.where}`"
        n = seen.get(base, 0)
        seen[base] = n + 1
        s.id = base if n == 0 else f"{base} #{n + 1}"
    return out


def _head(stmt: ast.stmt) -> str:
    """A statement's first line, shortened: ``if x > 0:``, ``return a + b``."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return ""   # the function is in the id already
    first = " ".join(ast.unparse(stmt).splitlines()[0].split())
    return first if len(first) <= 70 else first[:67] + "..."


def _node_sites(node: ast.AST, func: str, in_def: bool, in_fstring: bool, head: str,
                out: list[Site]) -> None:
    """The sites of ``node`` itself; numbers and statements only inside a function (a
    module's or class's constants are the configuration, not the logic).  ``head`` is
    the enclosing statement's first line: a constant's or a deleted statement's context,
    so their ids do not depend on how many alike come before them."""
    line = getattr(node, "lineno", 0)
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            for kind, table in (("boundary", _BOUNDARY), ("negate", _NEGATE)):
                new = table.get(type(op))
                if new is None:
                    continue
                before = _short(node)
                copy = ast.Compare(node.left, list(node.ops), node.comparators)
                copy.ops[i] = new()
                out.append(Site(kind, func, line, before, _short(copy),
                                _setter(node.ops, i, new)))
    elif isinstance(node, ast.BoolOp):
        new_op = ast.Or if isinstance(node.op, ast.And) else ast.And
        copy = ast.BoolOp(new_op(), node.values)
        out.append(Site("boolop", func, line, _short(node), _short(copy),
                        _attr_setter(node, "op", new_op)))
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id in ("max", "min"):
        other = "min" if node.func.id == "max" else "max"
        copy = ast.Call(ast.Name(other), node.args, node.keywords)
        out.append(Site("maxmin", func, line, _short(node), _short(copy),
                        _name_setter(node.func, other)))
    elif isinstance(node, ast.Constant) and not in_fstring and in_def \
            and type(node.value) in (int, float):
        value = node.value + 1
        out.append(Site("const", func, line, repr(node.value), repr(value),
                        _attr_value(node, value), where=head))
    for field in ("body", "orelse", "finalbody"):
        body = getattr(node, field, None)
        if not in_def or not isinstance(body, list):
            continue
        for i, stmt in enumerate(body):
            if not isinstance(stmt, _DELETABLE):
                continue
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                continue  # a docstring
            out.append(Site("delete", func, stmt.lineno, _head(stmt), "pass",
                            _replacer(body, i), where=head if field == "body" else
                            f"{head} (else)"))


def _setter(ops: list, i: int, new: type) -> Callable[[], None]:
    def apply() -> None:
        ops[i] = new()
    return apply


def _attr_setter(node: ast.AST, attr: str, new: type) -> Callable[[], None]:
    def apply() -> None:
        setattr(node, attr, new())
    return apply


def _attr_value(node: ast.Constant, value: object) -> Callable[[], None]:
    def apply() -> None:
        node.value = value
    return apply


def _name_setter(name: ast.Name, new: str) -> Callable[[], None]:
    def apply() -> None:
        name.id = new
    return apply


def _replacer(body: list, i: int) -> Callable[[], None]:
    def apply() -> None:
        old = body[i]
        body[i] = ast.copy_location(ast.Pass(), old)
    return apply


def prefix(name: str) -> str:
    """The file part of target ``name``'s mutant ids: its file name (``compare.py``), or,
    when another target's file has the same name (rules/registry.py, servers/registry.py),
    its path under the package (``servers/registry.py``), so that an id, an EQUIVALENT
    entry and ``--show`` name one file."""
    path = Path(TARGETS[name].path)
    if sum(Path(t.path).name == path.name for t in TARGETS.values()) > 1:
        parts = path.parts[1:] if path.parts[0] == "infertop" else path.parts
        return "/".join(parts)
    return path.name


def mutants(name: str) -> list[Site]:
    """Every mutant of target ``name`` (ids prefixed with ``prefix(name)``)."""
    target = TARGETS[name]
    tree = ast.parse((ROOT / target.path).read_text(), target.path)
    sites = _sites(tree)
    head = prefix(name)
    for s in sites:
        s.id = f"{head}:{s.id}"
    return sites


# Deleted statements far outnumber the other sites (a nested block gives one per
# statement): the sample takes them at a lower rate, so comparisons, and/or, max/min and
# constants, where the quiet bugs live, are not crowded out.
KIND_WEIGHT = {"delete": 0.6}
EXPRESSION_WEIGHT = 1.6


def selected(name: str, run_all: bool) -> list[Site]:
    """The default sample of target ``name`` (every mutant with ``run_all``)."""
    rate = TARGETS[name].rate
    if run_all or rate >= 1.0:
        return mutants(name)
    return [s for s in mutants(name)
            if _fraction(s.id) < rate * KIND_WEIGHT.get(s.kind, EXPRESSION_WEIGHT)]


def _fraction(ident: str) -> float:
    return int(hashlib.sha1(ident.encode()).hexdigest()[:8], 16) / 0x100000000


def mutated_code(name: str, ident: str) -> CodeType:
    """The compiled module with mutant ``ident`` applied."""
    target = TARGETS[name]
    path = ROOT / target.path
    tree = ast.parse(path.read_text(), str(path))
    head = prefix(name)
    for s in _sites(tree):
        if f"{head}:{s.id}" == ident:
            s.apply()
            break
    else:
        raise SystemExit(f"no mutant {ident!r} in {target.path}")
    ast.fix_missing_locations(tree)
    return compile(tree, str(path), "exec")


# --- running one mutant (in a child process) -----------------------------------------------

class _MutantFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves the mutated code for one module; every other import goes the usual way."""

    def __init__(self, module: str, path: Path, code: CodeType) -> None:
        self.module, self.path, self.code = module, path, code

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.module:
            return None
        return importlib.util.spec_from_file_location(fullname, self.path, loader=self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        exec(self.code, module.__dict__)


def run_one(name: str, ident: str | None, tests: Sequence[str]) -> int:
    """In the child: install the hook (unless ``ident`` is None: the baseline) and run
    the module's tests."""
    sys.dont_write_bytecode = True   # never cache a mutant's bytecode
    if ident is not None:
        target = TARGETS[name]
        sys.meta_path.insert(0, _MutantFinder(target.module, ROOT / target.path,
                                              mutated_code(name, ident)))
    import pytest
    keyword = TARGETS[name].keyword
    return int(pytest.main(["-x", "-q", "-p", "no:cacheprovider", "--no-header", "-o",
                            "console_output_style=classic", "-m", "not slow and not integration",
                            *(["-k", keyword] if keyword else []), *tests]))


# --- the run -----------------------------------------------------------------------------

def _child(name: str, ident: str | None, tests: Sequence[str],
           timeout: float) -> tuple[str, float]:
    """'killed' | 'survived' | 'timeout' | 'error', and the seconds it took.

    The child is forked from this process, which has imported pytest and the third-party
    modules the tests use (``_warm_up``) but nothing of infertop: a mutant costs its tests,
    not an interpreter start (half the time of a small test file)."""
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:   # the child: its own session, so a timeout kills its whole tree
        rc = 3
        try:
            os.setsid()
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            rc = run_one(name, ident, tests)
        finally:
            os._exit(rc)
    try:
        rc = _wait(pid, t0 + timeout)
    except BaseException:
        _kill(pid)
        raise
    took = time.monotonic() - t0
    if rc is None:
        _kill(pid)
        return "timeout", took
    # 1: a test failed; 2: interrupted, e.g. the mutant broke an import at collection
    return {0: "survived", 1: "killed", 2: "killed"}.get(rc, "error"), took


def _wait(pid: int, deadline: float) -> int | None:
    """The child's exit status, or None at the deadline."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            return None
        time.sleep(0.05)


def _kill(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


_OURS = ("infertop", "helpers", "conftest", "tests", "__main__", "mutate")


def _warm_up(tests: Sequence[str]) -> None:
    """Import here what the tests import from outside the project (pytest, its plugins,
    textual...), found by a collect-only run in a throwaway process; infertop itself is
    left for each mutant's child to import."""
    code = ("import sys, pytest; pytest.main(['-q', '--collect-only', '-p', "
            "'no:cacheprovider', *sys.argv[1:]]); print('\\n'.join(sys.modules), "
            "file=sys.stderr)")
    got = subprocess.run([sys.executable, "-c", code, *tests], cwd=ROOT, text=True,
                         capture_output=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    for mod in got.stderr.split():
        if mod.split(".")[0] in _OURS or mod.startswith("test_") or mod in sys.modules:
            continue
        try:
            importlib.import_module(mod)
        except Exception:  # noqa: BLE001  (a module that only imports in context: skip it)
            pass


@dataclass
class Result:
    module: str
    site: Site
    outcome: str   # killed | survived | timeout | error | equivalent


def run(names: list[str], run_all: bool, only: str | None, timeout: float | None,
        verbose: bool, tests: Sequence[str] | None) -> tuple[list[Result], dict[str, float]]:
    results: list[Result] = []
    baselines: dict[str, float] = {}
    for name in names:
        todo = [s for s in selected(name, run_all) if only is None or only in s.id]
        if not todo:
            continue
        files = tests or TARGETS[name].test_files()
        _warm_up(files)
        outcome, took = _child(name, None, files, 600.0)
        if outcome != "survived":
            print(f"{name}: the unmutated tests do not pass ({outcome}); "
                  f"run: python -m pytest -q {' '.join(files)}", file=sys.stderr)
            raise SystemExit(2)
        baselines[name] = took
        limit = timeout if timeout is not None else max(30.0, 4 * took)
        print(f"{name}: {len(todo)} mutants, tests take {took:.1f} s unmutated "
              f"(timeout {limit:.0f} s)", flush=True)
        for i, s in enumerate(todo, 1):
            if s.id in EQUIVALENT:
                results.append(Result(name, s, "equivalent"))
                continue
            outcome, took = _child(name, s.id, files, limit)
            if outcome == "error":   # a child killed from outside (OOM on a busy box): again
                outcome, took = _child(name, s.id, files, limit)
            results.append(Result(name, s, outcome))
            if verbose or outcome != "killed":
                print(f"  [{i}/{len(todo)}] {outcome:8} {_where(name, s)}", flush=True)
    return results, baselines


def _where(name: str, s: Site) -> str:
    inside = f" in `{s.where}`" if s.where else ""
    return (f"{TARGETS[name].path}:{s.line} [{s.kind}] {s.before} -> {s.after}{inside}"
            f"  ({s.func})")


def summary(results: list[Result]) -> dict[str, dict[str, float]]:
    table: dict[str, dict[str, float]] = {}
    for r in results:
        row = table.setdefault(r.module, {"killed": 0, "survived": 0, "timeout": 0,
                                          "error": 0, "equivalent": 0})
        row[r.outcome] += 1
    for row in table.values():
        counted = row["killed"] + row["survived"] + row["timeout"] + row["error"]
        row["score"] = (row["killed"] + row["timeout"]) / counted if counted else 1.0
    return table


def report(results: list[Result]) -> dict[str, dict[str, float]]:
    table = summary(results)
    print()
    print(f"{'module':12} {'mutants':>7} {'killed':>6} {'survived':>8} {'timeout':>7} "
          f"{'error':>5} {'equiv':>5} {'score':>6}")
    for name, row in table.items():
        total = sum(int(row[k]) for k in ("killed", "survived", "timeout", "error",
                                           "equivalent"))
        print(f"{name:12} {total:>7} {row['killed']:>6} {row['survived']:>8} "
              f"{row['timeout']:>7} {row['error']:>5} {row['equivalent']:>5} "
              f"{row['score']:>6.1%}")
    survivors = [r for r in results if r.outcome in ("survived", "error")]
    if survivors:
        print("\nsurviving mutants (a bug of this shape would pass the tests):")
        for r in survivors:
            print(f"  {_where(r.module, r.site)}" + ("  [error]" if r.outcome == "error" else ""))
            print(f"      id: {r.site.id}")
    return table


def stale_equivalents() -> list[str]:
    ids = {s.id for name in TARGETS for s in mutants(name)}
    return [i for i in EQUIVALENT if i not in ids]


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    os.chdir(ROOT)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-m", "--module", action="append", choices=sorted(TARGETS),
                   help="a module to mutate (repeatable; default: all)")
    p.add_argument("--all", action="store_true", help="every mutant, not the sample")
    p.add_argument("--only", metavar="TEXT", help="only mutants whose id contains TEXT")
    p.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    p.add_argument("--timeout", type=float,
                   help="seconds per mutant (default: 4x the unmutated run, at least 30)")
    p.add_argument("--min-score", type=float, default=0.0,
                   help="exit 1 when a module scores below this (0..1)")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    p.add_argument("--tests", metavar="FILES",
                   help="comma-separated test files instead of the module's own")
    p.add_argument("-v", "--verbose", action="store_true", help="print every mutant")
    p.add_argument("--show", metavar="ID",
                   help="run the tests against one mutant, with pytest's output")
    args = p.parse_args(argv)
    if args.show:
        name = next((n for n in TARGETS if args.show.startswith(prefix(n) + ":")), None)
        if name is None:
            p.error(f"--show: no module for {args.show!r}")
        tests = args.tests.split(",") if args.tests else TARGETS[name].test_files()
        return run_one(name, args.show, tests)
    names = args.module or list(TARGETS)
    if args.list:
        for name in names:
            for s in selected(name, args.all):
                if args.only is None or args.only in s.id:
                    mark = "  [equivalent]" if s.id in EQUIVALENT else ""
                    print(f"{_where(name, s)}{mark}\n    id: {s.id}")
        return 0
    # a SIGTERM ends the run like Ctrl-C: the running mutant's process group goes too
    signal.signal(signal.SIGTERM, _interrupt)
    for ident in stale_equivalents():
        print(f"note: EQUIVALENT names no mutant any more: {ident}", file=sys.stderr)
    t0 = time.monotonic()
    try:
        results, _ = run(names, args.all, args.only, args.timeout, args.verbose,
                         args.tests.split(",") if args.tests else None)
    except KeyboardInterrupt:
        print("\ninterrupted (the source tree was never changed)", file=sys.stderr)
        return 130
    table = report(results)
    print(f"\n{len(results)} mutants in {time.monotonic() - t0:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "summary": table,
            "mutants": [{"module": r.module, "file": TARGETS[r.module].path,
                         "line": r.site.line, "kind": r.site.kind, "id": r.site.id,
                         "before": r.site.before, "after": r.site.after,
                         "outcome": r.outcome} for r in results]}, indent=1))
    low = [n for n, row in table.items() if row["score"] < args.min_score]
    return 1 if low else 0


if __name__ == "__main__":
    sys.exit(main())
