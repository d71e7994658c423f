"""Coverage-guided fuzzing of infertop's parsers with atheris (libFuzzer for Python).

    python tools/fuzz/run.py TARGET [libFuzzer flags] [CORPUS_DIR...]
    python tools/fuzz/run.py --list
    python tools/fuzz/run.py --minimise [TARGET...]     (make fuzz-minimise)

The targets are tools/fuzz/targets.py's; the seed corpus of each is
tools/fuzz/corpus/TARGET/ (in the repo).  libFuzzer writes the new inputs it finds into
the FIRST corpus directory given, so pass a scratch directory first and the seeds after
it (`make fuzz` and tests/test_fuzz.py do).  A crash is written to -artifact_prefix and
the run exits non-zero; turn it into a plain regression test beside the parser's tests.

``--minimise`` keeps, of each target's seed corpus, the inputs libFuzzer's ``-merge=1`` picks
(the fewest, smallest, that reach all the coverage the whole corpus reaches) and removes the
rest; the kept files keep their names.  libFuzzer's merge re-runs the program it was given
as ``argv[0]`` in a child for each pass: atheris hands it this script's path, which is
neither executable nor told the target, so each merge runs through a small wrapper script
(``exec python run.py TARGET "$@"``) given as ``argv[0]`` instead.

The infertop modules are instrumented for coverage when imported (atheris'
instrument_imports): Textual and the other libraries are not, so the fuzzer's coverage is
infertop's own branches.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")


def main(argv: list[str]) -> int:
    sys.path.insert(0, HERE)
    if not argv or argv[0] in ("-h", "--help", "--list"):
        from targets import TARGETS
        print("targets: " + ", ".join(TARGETS))
        return 0 if argv else 2
    if argv[0] == "--minimise":
        from targets import TARGETS
        return minimise(argv[1:] or list(TARGETS))
    import atheris
    name, rest = argv[0], argv[1:]
    with atheris.instrument_imports(include=["infertop"]):
        import targets  # noqa: F401  (imports the parsers it drives, instrumented)

        # the lazy imports inside each target, done here so they are instrumented too
        import infertop.cli.args  # noqa: F401
        import infertop.config  # noqa: F401
        import infertop.credentials  # noqa: F401
        import infertop.kvevents  # noqa: F401
        import infertop.meta  # noqa: F401
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
    # a merge's children run argv[0] again: the wrapper minimise() names, when there is one
    atheris.Setup([os.environ.get("INFERTOP_FUZZ_ARGV0") or sys.argv[0], *rest], target)
    atheris.Fuzz()   # exits the process
    return 0


def _files(folder: str) -> dict[str, str]:
    """sha1 of the content -> path, of the plain files in ``folder``."""
    out: dict[str, str] = {}
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if entry.is_file(follow_symlinks=False):
            with open(entry.path, "rb") as f:
                out.setdefault(hashlib.sha1(f.read()).hexdigest(), entry.path)
    return out


def minimise(names: list[str], root: str = CORPUS) -> int:
    """Each target's seed corpus cut to what libFuzzer's merge keeps; prints files and
    bytes before and after.  A merge that fails leaves the corpus as it was."""
    for name in names:
        corpus = os.path.join(root, name)
        before = _files(corpus)
        n_files = sum(1 for p in os.scandir(corpus) if p.is_file())
        size = sum(os.path.getsize(p) for p in os.scandir(corpus) if p.is_file())
        with tempfile.TemporaryDirectory(prefix=f"fuzz-merge-{name}-") as tmp:
            wrapper = os.path.join(tmp, "target")
            with open(wrapper, "w") as f:
                f.write(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} "
                        f"{shlex.quote(os.path.abspath(__file__))} {shlex.quote(name)} "
                        '"$@"\n')
            os.chmod(wrapper, 0o755)
            merged = os.path.join(tmp, "merged")
            os.mkdir(merged)
            got = subprocess.run(
                [wrapper, "-merge=1", "-timeout=20", "-rss_limit_mb=2048",
                 f"-merge_control_file={tmp}/control", merged, corpus],
                cwd=tmp, capture_output=True, text=True,
                env={**os.environ, "INFERTOP_FUZZ_ARGV0": wrapper})
            kept = _files(merged)
            if got.returncode != 0 or not kept or not set(kept) <= set(before):
                print(f"{name}: merge failed (exit {got.returncode}); corpus left as it was\n"
                      + got.stderr[-2000:], file=sys.stderr)
                return 1
        for digest, path in before.items():
            if digest not in kept:
                os.remove(path)
        for path in {p.path for p in os.scandir(corpus)} - set(before.values()):
            os.remove(path)   # a duplicate of a kept input (same content, another name)
        after = sum(os.path.getsize(p) for p in os.scandir(corpus))
        print(f"{name}: {n_files} inputs, {size} bytes -> {len(kept)} inputs, {after} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
