"""The one base of babelzoo's user errors, and the one way a ``babelzoo`` command reports them.

A :class:`BabelzooError` is a mistake in what the user gave (a file, a line, a config field, a
name) and its message names it. Every error class of the package derives from it (and keeps its
standard base: a :class:`ConfigError` is still a ``ValueError``). A command
prints such an error as one line, ``babelzoo COMMAND: message``, and exits with
:data:`USER_ERROR`; so does an ``OSError`` about a named file (missing, unreadable, disk full)
or a full disk that no file was named for.
Any other exception is a bug and keeps its traceback. While a command runs, :func:`cli_logging`
shows the package's log records on stderr (library modules only create loggers).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import functools
import logging
import sys
from typing import Callable, Iterator, Sequence

USER_ERROR = 2  # exit status of a command stopped by a user error (argparse uses it too)
OUT_OF_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)  # a full disk, a quota, a file size limit


class BabelzooError(Exception):
    """A mistake in a user's input; the message names the file, line or field."""


class UsageError(BabelzooError):
    """Command-line options that do not fit together."""


class ConfigError(BabelzooError, ValueError):
    """A configuration value or key is invalid; the message names the field."""


class InputError(BabelzooError, ValueError):
    """Arguments that do not fit the call: tensors of the wrong shape or kind, inputs a model has no part for."""


class InputTypeError(InputError, TypeError):
    """An argument of the wrong type (still a ``TypeError`` for ``except TypeError``)."""


class CheckpointError(BabelzooError, RuntimeError):
    """A checkpoint is missing, corrupted, or does not match the model."""


class ArgumentParser(argparse.ArgumentParser):
    """``argparse`` for babelzoo's commands: a command line it cannot parse (an unknown option, a
    value of the wrong type, a missing argument) is a :class:`UsageError`, so the command reports
    it as every user error, one line and exit 2, rather than printing its usage text."""

    def error(self, message: str):
        raise UsageError(f"{message} (see {self.prog} --help)")


def user_message(err: BaseException) -> str | None:
    """The one-line message of a user error, or None for an exception that is a bug."""
    if isinstance(err, BabelzooError):
        return str(err)
    if isinstance(err, OSError) and err.filename is not None:
        return f"{err.filename}: {err.strerror or err}"
    if isinstance(err, OSError) and err.errno in OUT_OF_SPACE:  # a write that names no file
        return f"{err.strerror or err} while writing; free space (or raise the file size limit) and run again"
    return None


def run_command(name: str, main: Callable[[Sequence[str]], int | None], argv: Sequence[str],
                prog: str | None = None) -> int:
    """Run a subcommand's ``main(argv)``; a user error becomes one line on stderr, headed by
    ``prog`` (default ``babelzoo NAME``), and exit 2."""
    try:
        return int(main(argv) or 0)
    except (BabelzooError, OSError) as err:
        message = user_message(err)
        if message is None:
            raise
        print(f"{prog or f'babelzoo {name}'}: {message}", file=sys.stderr)
        return USER_ERROR


def command(name: str):
    """Decorate a subcommand's ``main(argv=None)``: called from ``babelzoo`` or directly, a
    user error is reported the same way (one line, exit 2)."""
    def wrap(main: Callable[..., int | None]) -> Callable[..., int]:
        @functools.wraps(main)
        def run(argv: Sequence[str] | None = None) -> int:
            return run_command(name, main, argv)
        return run
    return wrap


class StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a record comes (as logging's last-resort
    handler does), so a redirected or captured stderr receives the lines."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)
        self.setFormatter(logging.Formatter("%(message)s"))

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


@contextlib.contextmanager
def cli_logging(level: int = logging.INFO) -> Iterator[None]:
    """Show the ``babelzoo`` loggers' records of ``level`` and up on stderr, one plain line each,
    while a command runs; the logger is as it was afterwards. The command-line entry points
    call this; library modules only create loggers."""
    package = logging.getLogger("babelzoo")
    handler, before = StderrHandler(), package.level
    package.addHandler(handler)
    package.setLevel(level)
    try:
        yield
    finally:
        package.removeHandler(handler)
        package.setLevel(before)
