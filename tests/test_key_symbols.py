"""Rule inputs are declared symbols, not a string language (issue 34 item 3).

``K.<ns>.<name>`` (infertop/key_symbols.py, generated from keys.py's SPECS), ``any_of`` and
``Key.where`` build a rule's inputs; mypy rejects a misspelt key; the text form still loads
(deprecated) with the same load-time check; no built-in rule spells a key in a string.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from infertop import key_symbols, keysym
from infertop.findings import RuleSpec
from infertop.key_symbols import K
from infertop.keys import SPECS
from infertop.keysym import Input, Key, any_of, as_input
from infertop.model import Layer
from infertop.rules.base import Rule
from infertop.rules.engine import Diagnoser
from infertop.rules.registry import all_rules

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _symbol_keys() -> list[str]:
    return [v for ns in vars(K).values() if isinstance(ns, type)
            for v in vars(ns).values() if isinstance(v, Key)]


def _rule_block() -> str:
    text = (ROOT / "docs" / "contributing.md").read_text()
    (code,) = [b for b in FENCE.findall(text) if "RULE = Rule(RuleSpec(" in b]
    return code


def test_the_symbols_module_is_the_generators_text_and_names_declared_keys() -> None:
    keys = _symbol_keys()
    assert keys and not set(keys) - set(SPECS), "a symbol names an undeclared key: " \
        "python -m infertop.keysym > infertop/key_symbols.py"
    assert Path(key_symbols.__file__).read_text() == keysym.render_symbols(keys), \
        "key_symbols.py is not the generator's text: python -m infertop.keysym > " \
        "infertop/key_symbols.py"
    # each symbol is the key it is named after (K.gpu.util_ratio == "gpu.util_ratio")
    for ns, cls in vars(K).items():
        if isinstance(cls, type):
            for name, v in vars(cls).items():
                if isinstance(v, Key):
                    assert v == f"{ns}.{name}" and v.spec is SPECS[v]


def test_constructors_render_the_catalogues_text() -> None:
    assert str(as_input(K.gpu.util_ratio)) == "gpu.util_ratio"
    assert K.server.setting.where(name="dtype").text == "server.setting{name=dtype}"
    both = any_of(K.server.disagg_role, K.server.setting.where(name="disagg_role"))
    assert both.text == "server.disagg_role|server.setting{name=disagg_role}"
    assert both.alternatives == (("server.disagg_role", ()),
                                 ("server.setting", (("name", "disagg_role"),)))
    with pytest.raises(ValueError):
        K.server.setting.where()
    with pytest.raises(TypeError):
        K.server.setting.where(name=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        any_of()


def test_the_text_form_still_loads_deprecated_with_the_same_check() -> None:
    with pytest.warns(DeprecationWarning, match="deprecated") as got:
        spec = RuleSpec("HW-991", Layer.HARDWARE, "t", "", (  # type: ignore[arg-type]
            "gpu.util_ratio|server.setting{name=dtype}",), {}, "")
    assert got[0].filename == __file__     # it points at the plug-in's own line
    assert spec.inputs == (any_of(K.gpu.util_ratio, K.server.setting.where(name="dtype")),)
    with pytest.raises(ValueError, match="gpu.util_ration"), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        RuleSpec("HW-991", Layer.HARDWARE, "t", "", ("gpu.util_ration",),  # type: ignore[arg-type]
                 {}, "")
    with pytest.raises(ValueError, match="not a declared reading key"):   # at load, too
        RuleSpec("HW-991", Layer.HARDWARE, "t", "", (Key("gpu.nope"),), {}, "")
    with pytest.raises(ValueError, match="bad input spec"), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        as_input("gpu.util_ratio{name}")


def test_the_catalogue_json_keeps_the_text_form() -> None:
    d = {s.code: s.to_dict() for s in Diagnoser().catalogue()}
    assert d["PAR-005"]["inputs"] == ["server.requests_running",
                                      "server.disagg_role|server.setting{name=disagg_role}"]
    assert d["HW-002"]["inputs"][-1] == "server.setting{name=dtype}"
    assert d["SCH-002"]["optional"][1] == "gpu.sm_active_ratio|gpu.util_ratio"


def test_no_rule_spells_a_key_in_a_string() -> None:
    """The built-in rules' inputs and optional readings are symbols in the source (a
    string there would load, deprecated, and escape mypy's check)."""
    texts = []
    for path in sorted((ROOT / "infertop" / "rules").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "RuleSpec"):
                continue
            decl = node.args[4:5] + [k.value for k in node.keywords
                                     if k.arg in ("inputs", "optional")]
            label_values = {id(k.value) for d in decl for c in ast.walk(d)
                            if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                            and c.func.attr == "where" for k in c.keywords}
            texts += [f"{path.name}:{c.lineno}" for d in decl for c in ast.walk(d)
                      if isinstance(c, ast.Constant) and isinstance(c.value, str)
                      and id(c) not in label_values]
    assert not texts, f"rule inputs spelt as text: {texts}"
    assert all(isinstance(i, Input) for r in all_rules()
               for i in r.spec.inputs + r.spec.optional + r.required)


def test_the_docs_rule_example_loads_and_needs_its_inputs() -> None:
    ns: dict[str, object] = {}
    exec(compile(_rule_block(), "<contributing.md>", "exec"), ns)
    rule = ns["RULE"]
    assert isinstance(rule, Rule)
    assert [i.text for i in rule.required] == ["gpu.mem_temp_celsius"]
    assert [str(i) for i in rule.spec.optional] == [
        "gpu.throttle_reasons|server.setting{name=dtype}"]


@pytest.mark.slow
def test_mypy_rejects_a_misspelt_key_and_a_text_input(tmp_path: Path) -> None:
    """A typo in a key is a type checker's error, before anything loads; the docs'
    example passes the same check."""
    pytest.importorskip("mypy")
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import typecheck  # the package's import layout (folders mapped onto names)
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    tree = typecheck.build_tree()
    (tmp_path / "docs_example_rule.py").write_text(_rule_block())
    (tmp_path / "misspelt_rule.py").write_text(
        "from infertop.findings import RuleSpec\n"
        "from infertop.key_symbols import K\n"
        "from infertop.keysym import any_of\n"
        "from infertop.model import Layer\n"
        "A = any_of(K.gpu.util_ration, K.gpu.sm_active_ratio)\n"        # line 5: typo
        "B = K.server.setting.where(name=1)\n"                           # line 6: not a str
        'C = RuleSpec("HW-1", Layer.HARDWARE, "t", "", ("gpu.util_ratio",), {}, "")\n')
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
         "--cache-dir", str(ROOT / "build" / "mypy_cache"),
         str(tmp_path / "docs_example_rule.py"), str(tmp_path / "misspelt_rule.py")],
        cwd=tree, capture_output=True, text=True, env={**os.environ, "MYPYPATH": str(tree)})
    out = run.stdout + run.stderr
    errors = [ln for ln in out.splitlines() if ": error:" in ln]
    assert not [e for e in errors if "docs_example_rule" in e], out
    lines = {int(m.group(1)) for e in errors
             if (m := re.search(r"misspelt_rule\.py:(\d+): error", e))}
    assert lines == {5, 6, 7}, out
    assert 'has no attribute "util_ration"' in out, out
