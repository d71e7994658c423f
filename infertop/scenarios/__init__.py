"""Demo scenarios shipped as TOML data files (see infertop.scenario)."""
