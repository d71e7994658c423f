"""One poll path: the fleet app ticks through the app's _poll (its daemon thread, its
NoMatches handling at shutdown, its first-tick GC settle) and changes only what a tick
feeds and what an ended source says."""

from infertop.tui.app import InfertopApp
from infertop.tui.modes import FleetApp, ReplayApp


def test_fleet_app_polls_through_the_apps_poll():
    assert FleetApp._poll is InfertopApp._poll
    assert FleetApp._feed is not InfertopApp._feed     # no whole-fleet Frame.prepare
    assert FleetApp.end_note == "end of recording: q to quit"
    assert "[" in ReplayApp.end_note                   # replay keys go back
