"""SnapshotSource lives in the core now (infertop/source.py): the core implements it (the
demo) and the app reads it.  Kept so imports of the old place keep working."""

from infertop.source import SnapshotSource as SnapshotSource
