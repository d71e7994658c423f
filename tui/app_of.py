"""The app a widget or screen of infertop runs in, with its type (Textual types it ``App``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from textual.dom import DOMNode

if TYPE_CHECKING:    # the app imports the widgets and screens that call this
    from .app import InfertopApp


def infertop_app(node: DOMNode) -> InfertopApp:
    """``node.app`` as the InfertopApp it is: every screen and widget of infertop is
    mounted by one (FleetApp, LiveApp... are InfertopApps).  Raises as ``node.app`` does
    when no app is running."""
    return cast("InfertopApp", node.app)
