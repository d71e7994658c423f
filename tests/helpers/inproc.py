"""`infertop ARGS` run inside the test process: the same ``main`` the console script calls,
with its exit code, stdout and stderr, shaped like ``subprocess.run``'s answer.

Why: a ``python -m infertop`` child costs 0.5-1 s of interpreter start and imports on a
two-core box, and most tests of a command are about what it prints and returns, not about
the process boundary.  Tests whose point is the process itself (signals, pipes, rlimits,
what a fresh interpreter imports, ``sys.exit(main())``) keep spawning one.

Not for commands that start the live screen or serve forever.  An exception ``main`` lets
through propagates into the test (a child would have printed a traceback: the test
fails either way); argparse's own exit (bad flags, ``--help``) becomes the return code.
"""

from __future__ import annotations

import contextlib
import io
import subprocess

from infertop.cli.main import main


def run_main(*args: str) -> subprocess.CompletedProcess:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as e:   # argparse: usage errors and --help
            if e.code is None or isinstance(e.code, int):
                code = e.code or 0
            else:                 # sys.exit("text"): Python prints it and exits 1
                print(e.code, file=err)
                code = 1
    return subprocess.CompletedProcess(["infertop", *args], code, out.getvalue(),
                                       err.getvalue())
