"""One typed source interface (issue 34 item 4): the optional facts a source may have
(clock, position, fleet, errors) are declared on ``SnapshotSource`` with the value of a
source that lacks them, and cli/ and tui/ read them as attributes, never through
``getattr(source, name, default)`` (a misspelt name there was a silent default)."""

from __future__ import annotations

import ast
from pathlib import Path

from infertop.cli.sources import no_snapshot, pace_of
from infertop.model import Snapshot
from infertop.probes.sources.demo import DemoSource
from infertop.source import SnapshotSource
from infertop.tui.widgets.history_plot import timeline_origin

ROOT = Path(__file__).resolve().parent.parent


class Bare(SnapshotSource):
    """A source with nothing but the required method."""

    async def next(self) -> Snapshot | None:
        return None


def test_a_bare_source_answers_every_optional_fact_with_its_absence():
    s = Bare()
    assert (s.tick_seconds, s.epoch, s.pinned, s.current_time, s.elapsed) == (None,) * 5
    assert (s.fleet, s.last_error, s.refresh_interval, s.skipped, s.lines_total) == \
        (False, "", 0.0, 0, 0)
    # the readers take the absent values as "none of that": the wall clock, no position
    s.kind = "demo"      # not realtime: its own clock would be used, but it has none
    assert pace_of(s, 2.0, 4.0) == 0.5
    assert timeline_origin(s) is None
    assert "no snapshot" in str(no_snapshot(s))


def test_a_source_that_has_the_facts_is_read_through_them():
    demo = DemoSource("healthy")
    assert demo.epoch == 0 and demo.tick_seconds == 1.0
    assert pace_of(demo, 2.0, 4.0) == 0.25     # one scenario second at speed 4


def _getattr_on_sources(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr") and node.args):
            continue
        target = ast.unparse(node.args[0])
        if target.split(".")[-1] in ("source", "src", "_source"):
            out.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    return out


def test_cli_and_tui_read_no_source_fact_through_getattr():
    found = [hit for folder in ("cli", "tui") for p in sorted((ROOT / folder).rglob("*.py"))
             for hit in _getattr_on_sources(p)]
    assert found == [], "declare the fact on SnapshotSource instead:\n" + "\n".join(found)
