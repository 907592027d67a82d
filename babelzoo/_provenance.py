"""Where, how and when numbers are made: the machine (a tag from the CPU or the GPU), the command
that remakes them, the babelzoo commit the code ran from and the date (UTC). Results files
(``benchmarks/_results.py``) and leaderboards (:func:`babelzoo.evaluation.leaderboard.write_outputs`)
record :func:`provenance` and show it as :func:`provenance_lines`."""

from __future__ import annotations

import datetime
import os
import platform
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

PACKAGE = Path(__file__).resolve().parent
ROOT = PACKAGE.parent  # the checkout's root, when the package runs from one
BENCHMARK = "python -m benchmarks run"
DATA_VARIABLE = "$BABELZOO_DATA_DIR"
CAPABILITIES = (("amx_tile", "amx"), ("avx512f", "avx512"), ("avx2", "avx2"))


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what :mod:`platform` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            return next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def cpu_flags() -> list[str]:
    """The CPU's instruction-set flags (``/proc/cpuinfo``; none where it cannot be read)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])


def cpu_tag(model_name: str, flags: Sequence[str]) -> str:
    """``xeon-amx``, ``epyc-avx512``, ...: the CPU's family and its widest matrix instructions."""
    words = re.sub(r"\((r|tm)\)", " ", model_name.lower()).split()
    family = next((w for w in ("xeon", "epyc", "ryzen", "core") if w in words), words[0] if words else "cpu")
    capability = next((tag for flag, tag in CAPABILITIES if flag in flags), None)
    return f"{family}-{capability}" if capability else family


def gpu_tag(device_name: str) -> str:
    """``NVIDIA H200`` -> ``h200``."""
    words = device_name.lower().replace("nvidia", " ").split()
    return "-".join(words) or "gpu"


def _gpu_name(gpu: Optional[bool]) -> Optional[str]:
    """The first CUDA device's name: with ``gpu`` None only when this process used CUDA (a CPU run
    on a GPU machine is tagged by its CPU), with ``gpu`` True whenever there is one."""
    if gpu is False:
        return None
    torch = sys.modules.get("torch")
    if gpu:
        import torch
    if torch is None or not torch.cuda.is_available() or (gpu is None and not torch.cuda.is_initialized()):
        return None
    return torch.cuda.get_device_name(0)


def current_machine(gpu: Optional[bool] = None) -> dict[str, str]:
    """This machine's ``tag`` (:func:`gpu_tag` of the GPU the run used, else :func:`cpu_tag`) and
    ``description`` (the CPU, the CPU count, the GPU)."""
    model, name = cpu_name(), _gpu_name(gpu)
    description = f"{model}, {os.cpu_count()} CPUs" + (f", {name}" if name else "")
    return {"tag": gpu_tag(name) if name else cpu_tag(model, cpu_flags()), "description": description}


def utc_date() -> str:
    """Now, as every results file and leaderboard writes it: ``2026-12-06 11:44 UTC``."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _git(*args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(PACKAGE), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def checkout_commit(paths: Sequence[str] = ("babelzoo",), short: bool = False) -> str:
    """HEAD of the babelzoo checkout this package runs from, marked ``+uncommitted changes`` when
    any of ``paths`` (relative to the checkout) differs from it; "" when the package is not in a
    checkout of babelzoo itself (an installed package that happens to sit in another repository)."""
    top = _git("rev-parse", "--show-toplevel")
    if not top or Path(top).resolve() != PACKAGE.parent:
        return ""
    head = _git("rev-parse", *(["--short"] if short else []), "HEAD")
    if head and _git("status", "--porcelain", "--", *(str(PACKAGE.parent / p) for p in paths)):
        head += "+uncommitted changes"
    return head


def source_commit() -> str:
    """The code the numbers come from: :func:`checkout_commit` of the package and the benchmark
    scripts, else (an installed package) ``babelzoo VERSION``."""
    from importlib.metadata import PackageNotFoundError, version

    commit = checkout_commit(("babelzoo", "benchmarks/*.py"))
    if commit:
        return commit
    try:
        return f"babelzoo {version('babelzoo')}"
    except PackageNotFoundError:
        return "babelzoo (version unknown)"


def portable(option: str, root: Path = ROOT, env: Optional[Mapping[str, str]] = None) -> str:
    """One command-line word as it reads on another machine, typed from the checkout's root: a
    path (or ``--name=PATH``) in the data folder becomes ``$BABELZOO_DATA_DIR/...`` where that
    variable is set, else, in the data folder the scripts default to, ``../shared/data/...``; a
    path in the checkout becomes relative to its root; any other word stays as typed."""
    env = os.environ if env is None else env
    name, equals, value = option.partition("=") if option.startswith("--") and "=" in option else ("", "", option)
    path = Path(value)
    if not value or not (path.is_absolute() or ("/" in value and path.exists())):
        return option
    full = path.resolve()
    places = [(DATA_VARIABLE, env.get("BABELZOO_DATA_DIR")), ("../shared/data", root.parent / "shared" / "data"),
              ("", root)]
    for shown, place in places:
        if place and full.is_relative_to(Path(place).resolve()):
            rest = full.relative_to(Path(place).resolve()).as_posix()
            value = (f"{shown}/{rest}" if shown else rest) if rest != "." else (shown or ".")
            break
    return name + equals + value


def portable_text(text: str, root: Path = ROOT, env: Optional[Mapping[str, str]] = None) -> str:
    """``text`` (a recorded command, a ``--set`` value) with every path in the data folder written
    ``$BABELZOO_DATA_DIR/...`` where that variable is set (babelzoo expands it in a recipe's
    paths, quoted or not, and YAML reads it inside a flow mapping, where ``${...}`` is not a
    plain scalar), else, in the data folder the scripts default to, ``../shared/data/...``,
    and every path in the checkout relative to its root; what lies elsewhere stays as written."""
    env = os.environ if env is None else env
    places = [(DATA_VARIABLE, env.get("BABELZOO_DATA_DIR")), ("../shared/data", root.parent / "shared" / "data"),
              ("", root)]
    for shown, place in places:
        if not place:
            continue
        folder = str(Path(place).resolve())
        text = re.sub(re.escape(folder) + r"(?=[/\s,}\]'\"]|$)(/?)",
                      lambda m: f"{shown}{m.group(1)}" if shown else ("" if m.group(1) else "."), text)
    return text


def benchmark_command(suite: str, options: Sequence[str], root: Path = ROOT) -> str:
    """``python -m benchmarks run SUITE OPTIONS``, the options :func:`portable` and without
    ``--out`` (the command writes where its results are kept, ``benchmarks/results/SUITE/``)."""
    kept, skip = [], False
    for option in options:
        if skip or option == "--out" or option.startswith("--out="):
            skip = option == "--out"
            continue
        kept.append(portable(option, root))
    return " ".join([BENCHMARK, suite, *map(shell_word, kept)])


def shell_word(word: str) -> str:
    """``word`` as the shell reads it back, ``$BABELZOO_DATA_DIR`` left for it to expand."""
    if DATA_VARIABLE not in word:
        return shlex.quote(word)
    head, rest = word.split(DATA_VARIABLE, 1)
    return "".join([shlex.quote(head) if head else "", DATA_VARIABLE, shlex.quote(rest) if rest else ""])


def provenance(command: Optional[str], gpu: Optional[bool] = None) -> dict[str, Any]:
    """What every results file and leaderboard records about its run: ``machine``
    (:func:`current_machine`), ``command``, ``commit`` (:func:`source_commit`) and ``date``
    (:func:`utc_date`)."""
    return {"machine": current_machine(gpu), "command": command, "commit": source_commit(), "date": utc_date()}


def provenance_lines(run: Mapping[str, Any]) -> list[str]:
    """The Markdown lines that say where, how and when ``run``'s numbers were made (what
    :func:`provenance` recorded), each saying "not recorded" for what it lacks."""
    machine = run.get("machine") if isinstance(run.get("machine"), Mapping) else {}
    return [f"Machine: `{machine['tag']}` ({machine['description']})" if machine.get("tag") else "Machine: not recorded",
            f"Command: `{run['command']}`" if run.get("command") else "Command: not recorded",
            f"Commit: {run.get('commit') or 'not recorded'}; date: {run.get('date') or 'not recorded'}"]
