"""One pane per layer."""
