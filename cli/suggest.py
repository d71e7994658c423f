""""Did you mean": a mistyped flag or theme named with its nearest valid spelling
(`--duraton` -> `--duration`), as git and cargo do."""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Iterable


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """" (did you mean X?)" for the closest choice (as config errors say it), or ""."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


class SuggestingParser(argparse.ArgumentParser):
    """argparse's parser; an unrecognized flag's error names the nearest flag."""

    def error(self, message: str):  # argparse.NoReturn: super().error exits
        m = re.match(r"unrecognized arguments: (\S+)", message)
        if m and m.group(1).startswith("-"):
            flag = m.group(1).split("=", 1)[0]
            message += did_you_mean(flag, (s for a in self._actions for s in a.option_strings
                                           if s.startswith("--")))
        super().error(message)
