"""infertop.tui: the Textual screen and the command line. Never does I/O in panes."""
