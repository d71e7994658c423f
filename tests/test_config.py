"""Diagnosis config: defaults, TOML loading, and errors that name the bad key."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, fields

import pytest

from infertop.config import (
    SECTIONS,
    ConfigError,
    DiagnosisConfig,
    Thresholds,
    config_from_dict,
    default_config_path,
    load_config,
)
from infertop.rules.engine import Diagnoser


def write(tmp_path, text: str):
    p = tmp_path / "config.toml"
    p.write_text(text)
    return str(p)


def test_every_field_has_a_default_and_a_doc():
    for cls in SECTIONS.values():
        for f in fields(cls):
            assert f.metadata.get("doc"), f.name
            assert f.metadata.get("kind"), f.name


def test_defaults_when_no_file(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    cfg = load_config(None)
    assert cfg == DiagnosisConfig()
    assert cfg.slo.ttft_p99_seconds == 0.2 and cfg.diagnosis.raise_after == 5.0


def test_a_default_location_that_cannot_be_searched_is_one_line_not_a_traceback(
        tmp_path, monkeypatch):
    # uid 65534 under a HOME it may not search: is_file() raises PermissionError (root, as
    # the tests run, searches anything: the refusal is made here as the kernel makes it)
    from pathlib import Path
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    real = Path.is_file

    def refused(self):
        if str(self).startswith(str(tmp_path)):
            raise PermissionError(13, "Permission denied")
        return real(self)
    monkeypatch.setattr(Path, "is_file", refused)
    with pytest.raises(ConfigError, match=r"cannot read: Permission denied \(pass --config"):
        load_config(None)


def test_xdg_default_path_is_used_when_present(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    (tmp_path / "infertop").mkdir()
    (tmp_path / "infertop" / "config.toml").write_text("[slo]\nttft_p99_seconds = 0.5\n")
    assert default_config_path() == tmp_path / "infertop" / "config.toml"
    cfg = load_config(None)
    assert cfg.slo.ttft_p99_seconds == 0.5
    assert cfg.path.endswith("config.toml")


def test_home_fallback_without_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_config_path() == tmp_path / ".config" / "infertop" / "config.toml"


def test_full_file_overrides(tmp_path):
    cfg = load_config(write(tmp_path, """
[diagnosis]
raise_after = 3
clear_after = 20
disabled = ["HW-004"]

[slo]
ttft_p99_seconds = 0.35
error_ratio = 0.01

[thresholds]
kv_pressure_ratio = 0.95
error_reasons = ["error", "abort"]
ttft_fit_windows = 8

[rules.MEM-002]
raise_after = 60

[rules.DEC-002]
enabled = false

[ui]
theme = "dark"   # another part of infertop's config: left alone
"""))
    assert cfg.diagnosis.raise_after == 3.0 and cfg.diagnosis.clear_after == 20.0
    assert cfg.slo.ttft_p99_seconds == 0.35 and cfg.thresholds.kv_pressure_ratio == 0.95
    assert cfg.thresholds.error_reasons == ("error", "abort")
    assert cfg.thresholds.ttft_fit_windows == 8 and isinstance(cfg.thresholds.ttft_fit_windows, int)
    assert not cfg.enabled("HW-004") and not cfg.enabled("DEC-002") and cfg.enabled("HW-001")
    cat = {s.code: s for s in Diagnoser(cfg).catalogue()}
    assert cat["MEM-002"].raise_after == 60 and cat["HW-001"].raise_after == 3
    assert cat["HW-005"].raise_after == 0        # a rule's own default beats the global one
    assert cat["MEM-001"].thresholds["thresholds.kv_pressure_ratio"] == 0.95
    assert {r.code for r in Diagnoser(cfg).rules} == set(cat) - {"HW-004", "DEC-002"}


@pytest.mark.parametrize("text,message", [
    ('[thresholds]\nkv_pressure_ratio = "high"\n',
     "thresholds.kv_pressure_ratio: expected a number between 0 and 1, got 'high'"),
    ("[thresholds]\nkv_pressure_ratio = 1.5\n",
     "thresholds.kv_pressure_ratio: expected a number between 0 and 1, got 1.5"),
    ("[slo]\nttft_p99_seconds = 0\n", "slo.ttft_p99_seconds: expected a number > 0, got 0"),
    ("[diagnosis]\nraise_after = -1\n",
     "diagnosis.raise_after: expected a number of seconds >= 0, got -1"),
    ("[thresholds]\nttft_fit_windows = 2.5\n",
     "thresholds.ttft_fit_windows: expected a whole number >= 0, got 2.5"),
    ("[thresholds]\nkv_pressure_ratio = true\n",
     "thresholds.kv_pressure_ratio: expected a number between 0 and 1, got True"),
    ("[thresholds]\nerror_reasons = \"error\"\n",
     "thresholds.error_reasons: expected a list of strings, got 'error'"),
    ("[rules.MEM-002]\nenabled = 1\n", "rules.MEM-002.enabled: expected true or false, got 1"),
    ("[thresholds]\ngil_cpu_min = 2.0\n", "thresholds.gil_cpu_min: must not exceed"),
])
def test_bad_values_name_the_key(tmp_path, text, message):
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, text))
    assert message in str(e.value)
    assert "config.toml" in str(e.value)   # and the file


def test_unknown_key_lists_the_valid_ones(tmp_path):
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, "[thresholds]\nkv_presure_ratio = 0.9\n"))
    msg = str(e.value)
    assert "thresholds.kv_presure_ratio: unknown key (did you mean kv_pressure_ratio?)" in msg
    assert "valid: " in msg and "busy_util_ratio" in msg and "restart_window" in msg


def test_unknown_section_and_code(tmp_path):
    with pytest.raises(ConfigError, match=r"treshold: unknown section.*valid: diagnosis, rules"):
        load_config(write(tmp_path, "[treshold]\nx = 1\n"))
    with pytest.raises(ConfigError, match=r"rules.HW-999: unknown finding code.*HW-001"):
        load_config(write(tmp_path, "[rules.HW-999]\nenabled = false\n"))
    with pytest.raises(ConfigError, match=r"diagnosis.disabled: 'XYZ-1': unknown finding code"):
        load_config(write(tmp_path, '[diagnosis]\ndisabled = ["XYZ-1"]\n'))


def test_syntax_error_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match=r"not valid TOML"):
        load_config(write(tmp_path, "[thresholds\n"))
    with pytest.raises(ConfigError, match=r"not found"):
        load_config(str(tmp_path / "nope.toml"))


def test_section_must_be_a_table():
    with pytest.raises(ConfigError, match=r"slo: expected a table"):
        config_from_dict({"slo": 3})


def test_thresholds_are_frozen():
    with pytest.raises(FrozenInstanceError):
        Thresholds().kv_pressure_ratio = 0.5  # type: ignore[misc]
