"""infertop.themes: the stylesheet and the mapping from semantic roles to theme colours.

Colours come only from here: the .tcss uses Textual theme variables ($warning, $error...),
and Rich-rendered pane content asks ``roles(theme_vars)`` for the same colours, so a
``--theme`` switch recolours everything consistently.
"""

from __future__ import annotations

from importlib import resources

from textual.theme import Theme

# The default: dark, high contrast, readable over SSH in 256 colours.
INFERTOP_THEME = Theme(
    name="infertop",
    primary="#4FA3E0",
    secondary="#2E6A99",
    accent="#E5B567",
    warning="#F0A030",
    error="#E0506A",
    success="#5FBF7F",
    foreground="#D8DEE4",
    background="#101418",
    surface="#161C22",
    panel="#1E2730",
    dark=True,
)

# For projectors and bright rooms (`--theme projector`): pure black on white, saturated
# severity colours that survive a washed-out beamer, no dim greys (a projector drops them).
PROJECTOR_THEME = Theme(
    name="projector",
    primary="#0044CC",
    secondary="#000000",
    accent="#8A2BE2",
    warning="#B35900",
    error="#CC0000",
    success="#006400",
    foreground="#000000",
    background="#FFFFFF",
    surface="#FFFFFF",
    panel="#E0E0E0",
    dark=False,
)

THEMES = (INFERTOP_THEME, PROJECTOR_THEME)

DEFAULT_THEME = "infertop"


def stylesheet_path() -> str:
    return str(resources.files(__package__) / "infertop.tcss")


def roles(theme_vars: dict[str, str]) -> dict[str, str]:
    """Semantic roles -> Rich styles, from a theme's CSS variables."""
    def v(name: str, fallback: str) -> str:
        val = theme_vars.get(name, fallback)
        return val[:7] if isinstance(val, str) and val.startswith("#") else fallback

    # a light theme (projector): no `dim` (greys vanish on a beamer), muted is plain
    light = str(theme_vars.get("background", "#000000")).upper().startswith("#FFFFFF")
    dim = "" if light else "dim "
    return {
        "notice": f"bold {v('primary', '#4FA3E0')}",
        "warn": f"bold {v('warning', '#F0A030')}",
        "crit": f"bold reverse {v('error', '#E0506A')}",
        "ok": v("success", "#5FBF7F"),
        "stale": f"{dim}italic {v('foreground', '#D8DEE4')}",
        "muted": f"{dim}{v('foreground', '#D8DEE4')}",
        "header": f"bold {v('secondary', '#2E6A99')}",
        "spark": v("primary", "#4FA3E0"),
        "accent": f"bold {v('accent', '#E5B567')}",
    }
