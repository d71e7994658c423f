"""The one number format and regex escape written into PromQL and promtool text."""

from __future__ import annotations

import re

from infertop.promql import number, re_literal


def test_numbers_are_integers_without_a_point_and_thresholds_without_float_noise():
    assert number(3.0) == "3" and number(-2) == "-2"
    assert number(0.7 * 0.8) == "0.56"                       # a threshold: 12 digits
    assert number(0.7 * 0.8, exact=True) == "0.5599999999999999"   # a recorded value
    assert number(1e16) == "1e+16"                            # past exact integers
    assert number(float("inf")) == "inf"


def test_a_regex_literal_matches_only_itself():
    for text in ("a.b", "x+y*z?", "(q)[r]{s}", "a|b", "^$", "back\\slash"):
        pat = re.compile(re_literal(text))
        assert pat.fullmatch(text) and not pat.fullmatch(text + "x")
    assert re_literal("stop|abort") == "stop\\|abort"
