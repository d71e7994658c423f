"""Where snapshots come from and go: the live hub of probes, replay of a recording, the
recorder, and the ``SnapshotSource`` interface every source (demo included) implements."""
