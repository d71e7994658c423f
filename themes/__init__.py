"""infertop.themes: .tcss files using theme variables only."""
