"""The one place infertop reaches into Textual's private parts, and the switch back to stock
Textual when they are not what this code was written against.

Four fast paths lean on Textual internals (issue 23 bought the CPU result with them):
tui/compositor.py (partial updates that render only what they write), tui/repaint.py (a
repaint handed straight to the screen), tui/panes/styles_cache.py (pane rows joined from
pieces) and tui/driver.py (an input thread that sleeps until input, and survives a lost
terminal).  Every private Textual module they use is imported HERE and nowhere else, and
only when the installed Textual is a version in KNOWN_VERSIONS whose private names are all
found with the signatures below.  On any mismatch (another version, an ImportError, a
missing name, a changed signature), or when INFERTOP_STOCK_TEXTUAL=1 is set, ``FAST`` is
False and each fast path steps aside for stock Textual: more CPU, more bytes, never a
broken screen.  ``REASON`` says why (``infertop doctor`` and the tests print it).

Re-check on a Textual upgrade, then add the version to KNOWN_VERSIONS (run the suite
twice, once with INFERTOP_STOCK_TEXTUAL=1; tests/test_textual_gate.py does that for the
snapshots):
  - textual._compositor: Compositor (``_dirty_regions``, ``_regions_to_spans``, ``cuts``,
    ``visible_widgets``, ``render_partial_update``), ChopsUpdate(chops, spans, chop_ends)
    and its ``render_segments``; Screen keeps its compositor in ``_compositor``.
  - Widget.refresh's repaint branch: ``_layout_cache``, ``_set_dirty``,
    ``clear_cached_dimensions``, ``_rich_style_cache``, then Screen's Update handler
    (``_dirty_widgets``, ``check_idle``); Widget ``_parent``, ``_is_mounted``, ``_closing``.
  - textual._styles_cache.StylesCache: ``render``/``render_line`` signatures, ``_width``,
    ``clear``, ``get_inner_outer``; Widget keeps it in ``_styles_cache``.
  - LinuxDriver: ``run_input_thread`` (tui/driver.py copies its loop), ``_writer_thread``
    and its ``_queue``, ``_file``, ``_loop``, ``_app``, ``_debug``, ``_auto_restart``,
    ``_sigtstp_application``, ``_sigcont_application``; textual._xterm_parser.XTermParser
    (``feed``, ``tick``, ``_timeout_time``), textual._loop.loop_last, textual._time.get_time.
  - Widget ``_content_height_cache`` (a (width, height) pair a content change resets;
    tui/widgets/boundary_wrap.py's auto height reuses it: ``content_height_cached``).
  - App ``_clipboard`` (what ``App.clipboard`` reads) and ``_driver`` (its ``write``):
    the finding copy writes its own OSC 52 (tmux passthrough, a size cap: ``copy_with``);
    the exit deadline restores the terminal from the driver (``app_driver``).
  - MessagePump ``_closing``, ``_closed`` (the app skips a poll that ends while it exits:
    ``closing``).
  - Widget ``_dirty_regions`` and ``_get_style`` (tui/panes/widget.py draws its own
    lines: ``mark_drawn``, ``style_parser``).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Versions whose private parts the fast paths were checked against (see the docstring).
KNOWN_VERSIONS = frozenset({"8.2.8"})
# Set to 1 to run on stock Textual even where the fast paths would apply.
STOCK_ENV = "INFERTOP_STOCK_TEXTUAL"

# private name -> the parameters its signature must have (None: it must only exist)
_EXPECTED: dict[str, tuple[str, ...] | None] = {
    "textual._compositor.Compositor._regions_to_spans": None,
    "textual._compositor.Compositor.render_partial_update": ("self",),
    "textual._compositor.Compositor.cuts": None,
    "textual._compositor.Compositor.visible_widgets": None,
    "textual._compositor.ChopsUpdate.__init__": ("self", "chops", "spans", "chop_ends"),
    "textual._compositor.ChopsUpdate.render_segments": ("self", "console"),
    "textual._styles_cache.StylesCache.render": (
        "self", "styles", "size", "base_background", "background", "render_content_line",
        "filters", "border_title", "border_subtitle", "content_size", "padding", "crop",
        "opacity", "ansi_theme", "native_ansi"),
    "textual._styles_cache.StylesCache.render_line": (
        "self", "styles", "y", "size", "content_size", "padding", "base_background",
        "background", "render_content_line", "border_title", "border_subtitle", "opacity",
        "ansi_theme", "native_ansi"),
    "textual._styles_cache.StylesCache.get_inner_outer": None,
    "textual._xterm_parser.XTermParser.feed": None,
    "textual._xterm_parser.XTermParser.tick": None,
    "textual._loop.loop_last": None,
    "textual._time.get_time": None,
    "textual.widget.Widget.refresh": ("self", "regions", "repaint", "layout", "recompose"),
    "textual.widget.Widget._set_dirty": None,
    "textual.widget.Widget.clear_cached_dimensions": None,
    "textual.drivers.linux_driver.LinuxDriver.run_input_thread": ("self",),
    "textual.drivers.linux_driver.LinuxDriver._sigtstp_application": None,
    "textual.drivers.linux_driver.LinuxDriver._sigcont_application": None,
}


class GateClosed(Exception):
    """The installed Textual is not one the fast paths know."""


def _resolve(dotted: str) -> Any:
    """The object at ``package.module.Class.attr`` (modules imported as needed)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = import_module(".".join(parts[:cut]))
        except ImportError:
            if cut == 1:
                raise
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
        return obj
    raise ImportError(dotted)


def check(installed: str | None, expected: dict[str, tuple[str, ...] | None] = _EXPECTED,
          resolve: Callable[[str], Any] = _resolve) -> str:
    """'' when the fast paths may run on Textual ``installed``; else why not (one line)."""
    if installed not in KNOWN_VERSIONS:
        return (f"Textual {installed or '(not found)'} is not a version the fast paths "
                f"know ({', '.join(sorted(KNOWN_VERSIONS))})")
    for dotted, params in expected.items():
        try:
            obj = resolve(dotted)
        except (ImportError, AttributeError) as err:
            return f"{dotted} is missing ({type(err).__name__})"
        if params is None:
            continue
        try:
            found = tuple(inspect.signature(obj).parameters)
        except (TypeError, ValueError):
            return f"{dotted} has no signature"
        if found != params:
            return f"{dotted} takes ({', '.join(found)}), not ({', '.join(params)})"
    return ""


def _installed() -> str | None:
    """Textual's installed version: the ``Version:`` of the one textual-*.dist-info beside
    the imported package (a listdir and a few lines: importing importlib.metadata and its
    search of sys.path cost 10-30 ms of the start, issue 35), else importlib.metadata's."""
    try:
        import textual
        site = Path(textual.__file__).resolve().parent.parent
        found = [d for d in os.listdir(site)
                 if d.startswith("textual-") and d.endswith(".dist-info")]
        if len(found) == 1:
            with open(site / found[0] / "METADATA", encoding="utf-8") as f:
                for line, _ in zip(f, range(40)):   # the headers come first
                    if line.startswith("Name:") and line.split(":", 1)[1].strip().lower() \
                            != "textual":
                        break
                    if line.startswith("Version:"):
                        return line.split(":", 1)[1].strip() or None
    except (ImportError, OSError, TypeError, UnicodeDecodeError):
        pass
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("textual")
    except PackageNotFoundError:
        return None


REASON = check(_installed())
FAST = not REASON and os.environ.get(STOCK_ENV, "") in ("", "0")
if not REASON and not FAST:
    REASON = f"{STOCK_ENV} is set"


class _Absent:
    """Stands in for a private class on stock Textual: subclasses of it may be defined
    (the fast paths' modules import either way) but never made."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise GateClosed(REASON)


def _absent(*args: Any, **kwargs: Any) -> Any:
    raise GateClosed(REASON)


if TYPE_CHECKING or not REASON:
    from textual._compositor import ChopsUpdate, Compositor
    from textual._loop import loop_last
    from textual._styles_cache import StylesCache
    from textual._time import get_time
    from textual._xterm_parser import XTermParser
else:
    ChopsUpdate = Compositor = StylesCache = XTermParser = _Absent
    loop_last = get_time = _absent


def set_compositor(screen: Any, compositor: Any) -> None:
    """Give ``screen`` its compositor (before it is first arranged)."""
    screen._compositor = compositor


def compositor_of(screen: Any) -> Any:
    return screen._compositor


def repaint_on_screen(widget: Any, screen: Any, regions: tuple[Any, ...]) -> None:
    """What Widget.refresh's plain repaint and Screen's Update handler do, in one step
    (tui/repaint.py: without the widget's own message round)."""
    widget._layout_cache.clear()
    widget._set_dirty(*regions)
    widget.clear_cached_dimensions()
    widget._rich_style_cache.clear()
    if widget.display and screen in screen._compositor:
        screen._dirty_widgets.add(widget)
        screen.check_idle()


def attached(widget: Any) -> bool:
    """The widget is mounted under a parent and not closing (a direct repaint applies)."""
    return widget._parent is not None and widget._is_mounted and not widget._closing


def closing(node: Any) -> bool:
    """The app, screen or widget is closing or closed (MessagePump's ``_closing`` and
    ``_closed``).  On any Textual: read with a default, False where the names are gone
    (the caller's public checks, ``is_running`` and the screen stack, remain)."""
    return bool(getattr(node, "_closing", False) or getattr(node, "_closed", False))


def mark_drawn(widget: Any) -> None:
    """A widget that drew its own lines clears Widget's ``_dirty_regions``, so Textual's
    whole-content render does not run again for them.  On any Textual: where the name is
    gone, nothing (that render then runs once more: slower, the same lines)."""
    regions = getattr(widget, "_dirty_regions", None)
    if regions is not None:
        regions.clear()


def style_parser(widget: Any) -> Callable[[Any], Any] | None:
    """The widget's ``parse_style`` for ``Content.render`` (Widget's ``_get_style``: a
    ``.class`` style from the CSS); None where the name is gone (Content's own parser)."""
    return getattr(widget, "_get_style", None)


def set_styles_cache(widget: Any, cache: Any) -> None:
    """Give ``widget`` its line cache (in its constructor)."""
    widget._styles_cache = cache


def content_height_cached(widget: Any, width: int) -> int | None:
    """The auto height Textual cached for ``widget`` at ``width`` (Widget's
    ``_content_height_cache``, reset when the content changes), or None: not cached at
    this width, or on stock Textual (the caller then measures every time)."""
    if not FAST:
        return None
    cached = getattr(widget, "_content_height_cache", None)
    if isinstance(cached, tuple) and len(cached) == 2 and cached[0] == width \
            and isinstance(cached[1], int):
        return cached[1]
    return None


def cache_content_height(widget: Any, width: int, height: int) -> None:
    """Keep ``height`` where ``content_height_cached`` finds it (nothing on stock)."""
    if FAST and hasattr(widget, "_content_height_cache"):
        widget._content_height_cache = (width, height)


def copy_with(app: Any, text: str, sequence: str) -> None:
    """Put ``text`` on the clipboard by writing ``sequence`` (tui/clipboard.osc52: tmux's
    passthrough, a size cap) to the terminal, as ``App.copy_to_clipboard`` does with its
    own; on stock Textual through that public method (a plain OSC 52)."""
    if not FAST:
        app.copy_to_clipboard(text)
        return
    app._clipboard = text            # where App.copy_to_clipboard keeps it (App.clipboard)
    if app._driver is not None:      # None before the app runs
        app._driver.write(sequence)


def app_driver(app: Any) -> Any | None:
    """The app's driver (App keeps it in ``_driver``), for the exit deadline's terminal
    restore.  On any Textual: a reading of one attribute, None when this Textual has no
    such name or no driver yet (the deadline then exits without restoring)."""
    return getattr(app, "_driver", None)


__all__ = ["FAST", "REASON", "KNOWN_VERSIONS", "STOCK_ENV", "GateClosed", "check",
           "ChopsUpdate", "Compositor", "StylesCache", "XTermParser", "loop_last",
           "get_time", "set_compositor", "compositor_of", "set_styles_cache",
           "repaint_on_screen", "attached", "content_height_cached", "cache_content_height",
           "copy_with", "app_driver", "closing", "mark_drawn", "style_parser"]


# ---- tui/driver.py's private parts of LinuxDriver, checked whole (issue 35) ----------------
# QuietLinuxDriver also calls ``_get_terminal_size`` (CellDiff's size on every write) and
# reads attributes Textual sets in __init__, which resolving the class cannot find: each is
# looked for as an assignment ``self.NAME =`` in the __init__ that sets it.  A mismatch
# closes the gate as any other (stock LinuxDriver, Textual's own bytes).
_EXPECTED_DRIVER_METHODS: dict[str, tuple[str, ...] | None] = {
    "textual.drivers.linux_driver.LinuxDriver._get_terminal_size": ("self",),
}
_EXPECTED_INIT_ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "textual.driver.Driver.__init__": ("_app", "_debug", "_loop", "_auto_restart"),
    "textual.drivers.linux_driver.LinuxDriver.__init__": ("_file", "_writer_thread"),
    "textual.drivers._writer_thread.WriterThread.__init__": ("_queue",),
    # copy_with's fast path writes these two (the stock path calls copy_to_clipboard)
    "textual.app.App.__init__": ("_driver", "_clipboard"),
}


def check_init_attributes(expected: dict[str, tuple[str, ...]] = _EXPECTED_INIT_ATTRIBUTES,
                          resolve: Callable[[str], Any] = _resolve) -> str:
    """'' when each __init__ in ``expected`` assigns each of its attributes; else why not."""
    for dotted, names in expected.items():
        try:
            source = inspect.getsource(resolve(dotted))
        except (ImportError, AttributeError, OSError, TypeError) as err:
            return f"{dotted} cannot be read ({type(err).__name__})"
        for name in names:
            if f"self.{name} =" not in source and f"self.{name}: " not in source:
                return f"{dotted} no longer sets self.{name}"
    return ""


if not REASON:
    REASON = check(_installed(), _EXPECTED_DRIVER_METHODS) or check_init_attributes()
    if REASON:
        FAST = False
