"""Each pane draws through a PaneContext of its own (tui/panes/context.py): the six panes
of a tick share only the Frame's lookups (FrameLookups), never one pane's layer, zoom,
table view or the finding subjects it tagged."""

from __future__ import annotations

import dataclasses

from helpers.panes import PANES, frames_of
from helpers.synthetic_source import SyntheticSource
from infertop.findings import Evidence, Finding, Severity
from infertop.model import Layer
from infertop.themes import roles
from infertop.tui.panes.context import FrameLookups, PaneContext
from infertop.tui.zoom_table import TableView


def frame_with_finding():
    """The synthetic source's frame with one hardware finding about GPU 0's utilisation
    (the hardware pane draws that reading and tags it)."""
    frame = frames_of(SyntheticSource(), 3)
    ev = Evidence("gpu.util_ratio", (("gpu", "0"),), 0.9, 0.5, ">=", "ratio")
    f = Finding("HW-999", Layer.HARDWARE, Severity.WARN, "test", (ev,), "", 0.0,
                (("gpu", "0"),))
    return dataclasses.replace(frame, findings=[f])


def capture_contexts(monkeypatch) -> list[tuple[str, PaneContext]]:
    """Every context a pane's render_frame is called with, by layer."""
    seen: list[tuple[str, PaneContext]] = []
    for cls in PANES.values():
        original = cls.render_frame

        def spy(self, ctx, _original=original):
            out = _original(self, ctx)
            seen.append((self.pane_layer.value, ctx))
            return out

        monkeypatch.setattr(cls, "render_frame", spy)
    return seen


def test_six_panes_draw_through_contexts_of_their_own(monkeypatch):
    seen = capture_contexts(monkeypatch)
    frame = frame_with_finding()
    lookups = FrameLookups(frame, roles({}))
    view = TableView()
    for name, cls in PANES.items():
        ctx = lookups.pane(wide=True, height=40, width=150)
        cls().draw(ctx, zoomed=name == "hardware", view=view)
        # the context handed in is left as it was
        assert ctx.layer is None and ctx.view is None and ctx.tagged == set()
    assert [n for n, _ in seen] == list(PANES)
    contexts = [c for _, c in seen]
    assert len({id(c) for c in contexts}) == len(PANES)      # one per pane
    for name, c in seen:
        assert c.layer is PANES[name].pane_layer
        # the frame's lookups are shared: computed once for the six panes
        assert c.extras_cache is lookups.extras_cache and c.trends is lookups.trends
        assert c.summaries is lookups.summaries
    by_name = dict(seen)
    # the zoomed pane's view and tags stay its own
    assert by_name["hardware"].view is view and by_name["hardware"].zoom_key == ""
    assert ("HW-999" in {code for _, code in by_name["hardware"].tagged})
    for name in PANES:
        if name != "hardware":
            assert by_name[name].view is None, name
            assert by_name[name].zoom_key == str(PANES[name].pane_layer.position + 1)
    # a pane's tags are its own set (parallelism shows per-GPU utilisation too, and tags
    # the same reading itself; memory and decoding do not show it)
    assert len({id(c.tagged) for c in contexts}) == len(PANES)
    assert by_name["memory"].tagged == set() and by_name["decoding"].tagged == set()


def test_frame_lookups_hold_nothing_of_a_pane():
    """What one pane's draw sets lives on its PaneContext; FrameLookups has no such field
    for a pane to write on and the next one to read."""
    lookups = FrameLookups(frame_with_finding(), roles({}))
    for name in ("layer", "zoom_key", "view", "tagged", "wide", "height", "width"):
        assert not hasattr(lookups, name), name
    ctx = lookups.pane(height=12)
    assert ctx.height == 12 and ctx.tagged == set() and ctx.frame is lookups.frame
