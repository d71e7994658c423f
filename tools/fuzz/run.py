"""Coverage-guided fuzzing of infertop's parsers with atheris (libFuzzer for Python).

    python tools/fuzz/run.py TARGET [libFuzzer flags] [CORPUS_DIR...]
    python tools/fuzz/run.py --list

The targets are tools/fuzz/targets.py's; the seed corpus of each is
tools/fuzz/corpus/TARGET/ (in the repo).  libFuzzer writes the new inputs it finds into
the FIRST corpus directory given, so pass a scratch directory first and the seeds after
it (`make fuzz` and tests/test_fuzz.py do).  A crash is written to -artifact_prefix and
the run exits non-zero; turn it into a plain regression test beside the parser's tests.

The infertop modules are instrumented for coverage when imported (atheris'
instrument_imports): Textual and the other libraries are not, so the fuzzer's coverage is
infertop's own branches.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")


def main(argv: list[str]) -> int:
    sys.path.insert(0, HERE)
    if not argv or argv[0] in ("-h", "--help", "--list"):
        from targets import TARGETS
        print("targets: " + ", ".join(TARGETS))
        return 0 if argv else 2
    import atheris
    name, rest = argv[0], argv[1:]
    with atheris.instrument_imports(include=["infertop"]):
        import targets  # noqa: F401  (imports the parsers it drives, instrumented)

        # the lazy imports inside each target, done here so they are instrumented too
        import infertop.cli.args  # noqa: F401
        import infertop.config  # noqa: F401
        import infertop.credentials  # noqa: F401
        import infertop.kvevents  # noqa: F401
        import infertop.probes.prometheus.aggregates  # noqa: F401
        import infertop.probes.prometheus.client  # noqa: F401
        import infertop.probes.prometheus.source  # noqa: F401
        import infertop.probes.server.metrics  # noqa: F401
        import infertop.prom_findings  # noqa: F401
        import infertop.promtext  # noqa: F401
        import infertop.recording  # noqa: F401
        import infertop.report  # noqa: F401
    target = targets.TARGETS.get(name)
    if target is None:
        print(f"unknown fuzz target {name!r}; targets: {', '.join(targets.TARGETS)}",
              file=sys.stderr)
        return 2
    atheris.Setup([sys.argv[0], *rest], target)
    atheris.Fuzz()   # exits the process
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
