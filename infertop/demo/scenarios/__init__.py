"""Demo scenarios shipped as TOML data files (see infertop.demo.scenario)."""
