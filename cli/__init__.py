"""infertop.cli: the ``infertop`` command.  Headless commands (snapshot, doctor, record,
demo-server) live here and import no Textual; the screen (``infertop.tui``) is imported
only by the interactive commands."""
