"""Reading keys as typed symbols, and a rule's required inputs built from them.

A rule names the readings it needs as symbols (``K.gpu.util_ratio`` from
infertop/key_symbols.py, one per key of keys.py's SPECS), not as text: mypy then rejects a
misspelt key at ``make typecheck`` time instead of a parser at load.  ``Key`` is a ``str``
(its key), so a symbol goes wherever a key string does; two constructors build what a
plain key cannot say:

* ``any_of(K.a, K.b)``: the input is there when either reading is;
* ``K.server.setting.where(name="dtype")``: only readings with that label count.

The text form the catalogue shows (``a|b``, ``key{name=value}``) is rendered from these.
Rules written against the old string form (``"a|b{name=v}"``) still load through
``as_input``: deprecated (a DeprecationWarning, and mypy flags a ``str`` there), with the
same load-time check that every key is declared.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable

from .keys import SPECS, KeySpec
from .model import Labels

# the deprecated text form: key, or key{label=value}; alternatives joined by "|"
_TEXT_ALT = re.compile(r"([\w.]+)(?:\{(\w+)=([^}]*)\})?")


class Key(str):
    """A declared reading key as a symbol (a ``str`` equal to the key)."""

    __slots__ = ()

    @property
    def spec(self) -> KeySpec:
        return SPECS[self]

    def where(self, **labels: str) -> Input:
        """This key's readings that carry these labels (``server.setting{name=dtype}``)."""
        if not labels:
            raise ValueError(f"{self}.where() needs a label")
        bad = [n for n, v in labels.items() if not isinstance(v, str)]
        if bad:   # a label value is text: 1 would never equal a reading's "1"
            raise TypeError(f"{self}.where(): the value of {', '.join(bad)} is not a str")
        return Input(((str(self), tuple(sorted(labels.items()))),))


class Input:
    """One required input: present when any of its alternatives (key, labels) has a
    reading with a value.  Built by ``Key.where``, ``any_of`` and ``as_input``."""

    __slots__ = ("alternatives",)

    def __init__(self, alternatives: tuple[tuple[str, Labels], ...]) -> None:
        if not alternatives:
            raise ValueError("an input needs at least one key")
        self.alternatives = alternatives

    @property
    def text(self) -> str:
        """The catalogue's form: ``a|b{name=value}``."""
        return "|".join(key + ("{" + ",".join(f"{n}={v}" for n, v in labels) + "}"
                               if labels else "")
                        for key, labels in self.alternatives)

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(key for key, _ in self.alternatives)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Input({self.text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Input) and other.alternatives == self.alternatives

    def __hash__(self) -> int:
        return hash(self.alternatives)


def any_of(*alternatives: Key | Input) -> Input:
    """An input any one of these satisfies (``server.disagg_role|server.setting{...}``)."""
    alts: list[tuple[str, Labels]] = []
    for a in alternatives:
        alts += as_input(a).alternatives
    return Input(tuple(alts))


def as_input(item: Key | Input | str, stacklevel: int = 2) -> Input:
    """A rule's input declaration as an ``Input``, its keys checked against SPECS.  A plain
    string is the deprecated text form (``"a|b{name=value}"``), parsed here; its warning
    points ``stacklevel`` frames up (the caller's line)."""
    if isinstance(item, Input):
        got = item
    elif isinstance(item, Key):
        got = Input(((str(item), ()),))
    elif isinstance(item, str):
        warnings.warn(f"rule input {item!r} as text is deprecated: use the key symbols "
                      "(infertop.key_symbols.K, any_of, .where)", DeprecationWarning,
                      stacklevel=stacklevel)
        got = _parse(item)
    else:
        raise TypeError(f"a rule input is a Key or an Input, not {type(item).__name__}")
    for key in got.keys:
        if key not in SPECS:
            raise ValueError(f"input {key!r} is not a declared reading key")
    return got


def as_inputs(items: Iterable[Key | Input | str]) -> tuple[Input, ...]:
    """``as_input`` of each, for RuleSpec: a warning points at the line that made the spec
    (as_inputs, __post_init__ and the dataclass's __init__ in between)."""
    out = []
    for i in items:
        out.append(as_input(i, stacklevel=5))
    return tuple(out)


def _parse(text: str) -> Input:
    alts: list[tuple[str, Labels]] = []
    for part in text.split("|"):
        m = _TEXT_ALT.fullmatch(part.strip())
        if not m:
            raise ValueError(f"bad input spec {text!r}")
        key, lname, lval = m.groups()
        alts.append((key, ((lname, lval),) if lname else ()))
    return Input(tuple(alts))


# ---- infertop/key_symbols.py is generated from SPECS ---------------------------------
HEADER = '''"""Every declared reading key as a typed symbol: ``K.<namespace>.<name>``.

GENERATED from infertop/keys.py's SPECS by ``python -m infertop.keysym >
infertop/key_symbols.py``; do not edit (tests/test_key_symbols.py fails while it is stale).
mypy knows each attribute, so a misspelt key is an error at ``make typecheck`` time.
"""

from __future__ import annotations

from typing import Final

from .keysym import Key


class K:
    """The reading keys of infertop/keys.py, by namespace."""
'''


def render_symbols(keys: Iterable[str] | None = None) -> str:
    """The module's text for ``keys`` (all of SPECS by default)."""
    by_ns: dict[str, list[str]] = {}
    for key in SPECS if keys is None else keys:
        ns, name = key.split(".", 1)
        by_ns.setdefault(ns, []).append(name)
    out = [HEADER]
    for ns in sorted(by_ns):
        out.append(f"    class {ns}:")
        for name in sorted(by_ns[ns]):
            line = f'        {name}: Final = Key("{ns}.{name}")'
            out.append(line if len(line) <= 99 else
                       f'        {name}: Final = Key(\n            "{ns}.{name}")')
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


if __name__ == "__main__":
    import sys
    sys.stdout.write(render_symbols())
