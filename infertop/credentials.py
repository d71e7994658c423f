"""Credentials for Prometheus and servers' /metrics, kept out of URLs and command lines.

A secret in ``--prometheus http://user:password@host`` sat in ``/proc/PID/cmdline`` for the
whole session and was printed by doctor, stored in the recording header and shown in the
fleet header (issue 36, case 8).  Now:

* a URL's ``user:password@`` is taken out of it at once (``split_url``): what infertop
  keeps, shows and records is the URL without it; the pair is sent as basic auth;
* the environment or a file can carry them instead, with the names of Prometheus' own
  ``basic_auth`` / ``authorization`` settings (``bearer_token_file`` as its older name),
  one prefix per target (``INFERTOP_PROMETHEUS_`` for ``--prometheus``,
  ``INFERTOP_SERVER_`` for every ``--url``)::

      INFERTOP_PROMETHEUS_USERNAME / _PASSWORD / _PASSWORD_FILE       basic_auth
      INFERTOP_PROMETHEUS_BEARER_TOKEN / _BEARER_TOKEN_FILE            authorization: Bearer

  A file is read once, at most ``MAX_FILE`` bytes, surrounding white space trimmed (as
  Prometheus trims it).  The URL's own userinfo wins over the environment.

``Credentials.__repr__`` says only which kind it is: a traceback's locals or a debug print
never shows the secret.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit, urlunsplit

MAX_FILE = 64 * 1024   # a token or password file; a larger one is not one


class CredentialsError(ValueError):
    """A credentials setting that cannot be used; the message names the variable."""


@dataclass(frozen=True)
class Credentials:
    username: str = ""
    password: str = field(default="", repr=False)
    bearer: str = field(default="", repr=False)

    def authorization(self) -> str:
        """The ``Authorization`` header's value."""
        if self.bearer:
            return f"Bearer {self.bearer}"
        pair = f"{self.username}:{self.password}".encode()
        return "Basic " + base64.b64encode(pair).decode("ascii")

    def __repr__(self) -> str:   # never the secret
        return f"Credentials({'bearer' if self.bearer else 'basic'}, <redacted>)"

    __str__ = __repr__


def split_url(url: str) -> tuple[str, Credentials | None]:
    """``http://user:pw@host:9090/x`` -> (``http://host:9090/x``, basic auth user/pw)."""
    bare = "://" not in url   # host:port forms (--url user:pw@host:8000)
    parts = urlsplit("//" + url if bare else url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    rest = urlunsplit(parts._replace(netloc=hostport))
    return (rest[2:] if bare else rest), Credentials(unquote(user), unquote(password))


def from_env(prefix: str, env: Mapping[str, str] | None = None) -> Credentials | None:
    """The credentials ``prefix``'s variables give (see the module doc), or None."""
    env = os.environ if env is None else env

    def value(name: str) -> str:
        direct, path = env.get(prefix + name, ""), env.get(prefix + name + "_FILE", "")
        if direct and path:
            raise CredentialsError(f"{prefix}{name} and {prefix}{name}_FILE are both set: "
                                   "use one")
        return _read(prefix + name + "_FILE", path) if path else direct

    bearer = value("BEARER_TOKEN")
    user, password = env.get(prefix + "USERNAME", ""), value("PASSWORD")
    if bearer and (user or password):
        raise CredentialsError(f"{prefix}BEARER_TOKEN and {prefix}USERNAME/PASSWORD are both "
                               "set: use one")
    if bearer:
        return Credentials(bearer=bearer)
    if user or password:
        return Credentials(user, password)
    return None


def _read(var: str, path: str) -> str:
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_FILE + 1)
    except OSError as e:
        raise CredentialsError(f"{var}: cannot read {path}: {e.strerror or e}") from None
    if len(data) > MAX_FILE:
        raise CredentialsError(f"{var}: {path} is larger than {MAX_FILE // 1024} KiB, "
                               "not a token or password")
    try:
        text = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise CredentialsError(f"{var}: {path} is not UTF-8 text") from None
    if not text or any(ord(c) < 32 or c == "\x7f" for c in text):
        raise CredentialsError(f"{var}: {path} is empty or holds control characters")
    return text
