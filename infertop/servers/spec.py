"""What one server kind declares: ``ServerKind`` (and the profiler endpoint it offers).

Each module beside this one (vllm.py, sglang.py, ...) builds one ``KIND = ServerKind(...)``
holding everything infertop knows about that server: its /metrics dialect, how its
processes are recognised and which roles they play, its default port and port flags, the
settings read from its command line, its profiler endpoint, its KV-cache semantics,
whether it runs Python, and which demo renderer shows it.  The registry (registry.py)
collects them; discovery, settings, captures, rules, panes and the demo ask the registry.

Pure data plus small pure functions: no I/O, nothing from probes/, tui/ or cli/.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .mapping import Dialect

# One (how, program, arguments) of a command line -> (kind, role), or None when the
# program is not this kind's.  ``how`` is discovery's split_program: "module" (python -m X),
# "exe" (basename of argv[0]), "code" (python -c) or "script"; the arguments are all those
# after the program (``lmdeploy serve api_server`` is told from ``lmdeploy serve proxy`` by
# the second).  A kind may also disown a program it names: ``vllm bench`` is ("unknown", "").
ArgvMatcher = Callable[[str, str, Sequence[str]], "tuple[str, str] | None"]


@dataclass(frozen=True)
class Titles:
    """Process titles set with setproctitle ("PREFIX::Name", e.g. ``VLLM::EngineCore_DP1``).

    ``names``: (start of the part after '::', role), first match wins.  Titles under
    ``prefix`` (any case) are this kind's even when no name matches (``default_role``).
    ``any_prefix``: the names are matched under any prefix too (vLLM's prefix is set by
    VLLM_PROCESS_NAME_PREFIX); such matches come after every kind's own prefix.
    ``/proc/PID/comm`` cuts a title to 15 characters: a cut name matches the start of a
    listed one (3 characters at least).
    """

    prefix: str
    names: tuple[tuple[str, str], ...]
    default_role: str = "helper"
    any_prefix: bool = False


@dataclass(frozen=True)
class ProfilerEndpoint:
    """The server's own profiler over HTTP (probes/capture/profiler_endpoint.py drives it).

    Two shapes exist: start, hold for some seconds, stop (vLLM), or start for a number of
    forward steps that stops by itself (``steps``: SGLang).
    """

    confirm: Callable[[float, int | None], str]   # the dialog's question (seconds, steps)
    trace_dir: Callable[[Sequence[str]], str | None]  # where traces go, from the cmdline
    not_found_fix: str          # what to do when /start_profile is 404/405
    steps: int = 0              # > 0: profile this many steps by default, no /stop_profile
    enabled_by: str = ""        # command-line flag (prefix) that turns the routes on;
    #                             "": always served (a kind without routes has profiler=None)

    @property
    def stops_by_itself(self) -> bool:
        return self.steps > 0

    def served(self, cmdlines: Sequence[Sequence[str]]) -> bool:
        """Whether the routes exist for a server started with these command lines."""
        if not self.enabled_by:
            return True
        return any(str(a).startswith(self.enabled_by) for argv in cmdlines for a in argv)


@dataclass(frozen=True)
class ServerKind:
    """Everything infertop knows about one kind of inference server."""

    name: str                   # the kind's id: process labels, Sample meta, --dialect
    title: str                  # how people write it ("vLLM")
    order: int                  # position among kinds (dialect ties, listings): unique
    dialect: Dialect            # /metrics family -> reading key rules (mapping.py)
    # -- processes --
    roles: Mapping[str, int]    # role -> display priority (0 first: does the work)
    match_argv: ArgvMatcher     # command line -> (kind, role)
    titles: Titles | None = None
    default_port: int | None = None
    port_flags: tuple[str, ...] = ("--port",)
    # -- command line -> settings (the arguments after the program; "" values for flags) --
    settings: Callable[[list[str]], dict[str, str]] | None = None
    # -- behaviour the rules and captures rely on --
    python: bool = False        # its processes run Python (threads share a GIL)
    python_roles: tuple[str, ...] = ()   # roles that run Python when the kind is not
    preallocating: bool = False  # reserves most of a GPU for its KV cache at start-up
    profiler: ProfilerEndpoint | None = None
    nsys_env: str = ""          # environment to prefix a restart under nsys with
    # -- the demo: "module:function" rendering a SimFrame as this kind's /metrics page --
    demo_render: str = ""
    demo_health: str = ""       # the body its /health answers (demo-server mimics it)
    # a response header giving the process start time in Unix seconds, when the page has
    # no process_start_time_seconds (llama.cpp); the demo sends it as the server does
    start_time_header: str = ""
    # where its facts come from (docs/metrics.md section), for the contributor reading it
    reference: str = ""
