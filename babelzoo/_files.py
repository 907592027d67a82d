"""The files babelzoo writes and reads beside weights and results: small JSON files read with
errors that name the file and line, files written atomically (a failure leaves the earlier file
whole), and files and folders babelzoo owns (replaced only when babelzoo wrote them)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import posixpath
import re
import shutil
import string
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional

from .errors import BabelzooError, ConfigError

OWNED_MARKER = ".babelzoo-files.json"  # in a folder babelzoo wrote: what it wrote there


class FolderNotOwned(BabelzooError, RuntimeError):
    """A folder holds files babelzoo did not write, so babelzoo will not replace or delete it."""


class NotUTF8(BabelzooError, ValueError):
    """A text file whose bytes are not UTF-8."""


# byte-order marks of the encodings a text file saved as "Unicode" may have (UTF-32 LE before the
# UTF-16 LE mark it starts with)
BYTE_ORDER_MARKS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe", "UTF-16"),
                    (b"\xfe\xff", "UTF-16"))


def utf16_or_utf32(head: bytes) -> Optional[str]:
    """What a file whose first bytes are ``head`` is when it is UTF-16 or UTF-32 text rather than
    UTF-8: ``"UTF-16 text (byte-order mark 0xff 0xfe)"``; without a mark, ``"UTF-32 text
    (little-endian, no byte-order mark)"`` when the two high bytes of every four are 0x00, and
    ``"UTF-16 text (little-endian, no byte-order mark)"`` when a quarter of the byte pairs or
    more have a 0x00 high byte (as each ASCII character does) and none a 0x00 low byte; else None."""
    for mark, encoding in BYTE_ORDER_MARKS:
        if head.startswith(mark):
            return f"{encoding} text (byte-order mark {' '.join(f'0x{b:02x}' for b in mark)})"
    head = head[:512]
    quads = [head[i:i + 4] for i in range(0, len(head) - 3, 4)]
    for order, high in (("little", slice(2, 4)), ("big", slice(0, 2))):
        if len(quads) >= 2 and all(q[high] == b"\x00\x00" for q in quads) and any(map(any, quads)):
            return f"UTF-32 text ({order}-endian, no byte-order mark)"
    pairs = [head[i:i + 2] for i in range(0, len(head) - 1, 2)]
    for order, high, low in (("little", 1, 0), ("big", 0, 1)):
        if len(pairs) >= 4 and sum(p[high] == 0 for p in pairs) >= len(pairs) / 4 and all(p[low] for p in pairs):
            return f"UTF-16 text ({order}-endian, no byte-order mark)"
    return None


def refuse_utf16(path: str | Path, head: bytes, error: type[Exception] = NotUTF8) -> None:
    """Raise ``error`` naming ``path`` when ``head``, the file's first bytes (its first line will
    do), is UTF-16 or UTF-32 text (:func:`utf16_or_utf32`): such a file may even decode as UTF-8,
    an ASCII character and a 0x00 byte at a time."""
    encoding = utf16_or_utf32(head)
    if encoding is not None:
        raise error(f"{path}: {encoding}; save it as UTF-8")


def read_utf8(path: str | Path, error: type[Exception] = NotUTF8) -> str:
    """The text of ``path``; bytes that are not UTF-8 raise ``error`` naming the file, the line
    and the byte (where ``read_text`` would raise a ``UnicodeDecodeError`` that names neither),
    and UTF-16 or UTF-32 text raises ``error`` saying so (:func:`refuse_utf16`)."""
    raw = Path(path).read_bytes()
    refuse_utf16(path, raw[:512], error)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[:err.start].count(b"\n") + 1
        raise error(f"{path}:{line}: not UTF-8 text (byte 0x{raw[err.start]:02x}); save it as UTF-8") from None


def read_json(path: str | Path, error: type[Exception]) -> Any:
    """The JSON value in ``path``; text that is not UTF-8 or not JSON raises ``error`` naming the
    file and line."""
    try:
        return json.loads(read_utf8(path, error))
    except json.JSONDecodeError as err:
        raise error(f"{path}:{err.lineno}: invalid JSON ({err.msg})") from None


def read_json_object(path: Path, error: type[Exception], expected: str = "a JSON object") -> dict:
    """The JSON object in ``path``; text that is not UTF-8, invalid JSON (with its line) or
    another JSON value raises ``error`` naming the file."""
    data = read_json(path, error)
    if not isinstance(data, dict):
        raise error(f"{path}: expected {expected}, found {type(data).__name__}")
    return data


# --- writing ------------------------------------------------------------------------------------
@contextlib.contextmanager
def writing(path: str | Path) -> Iterator[None]:
    """Name ``path`` in any failure to write it: an ``OSError`` that names no file (a full disk,
    a file size limit: ``write`` only knows the descriptor) and safetensors' I/O error (which
    names none either) become an ``OSError`` naming ``path``, which a command reports as one line."""
    try:
        yield
    except OSError as err:
        if err.filename is not None:
            raise
        raise OSError(err.errno, err.strerror or str(err), str(path)) from err
    except Exception as err:
        found = re.search(r"\(os error (\d+)\)", str(err)) if type(err).__name__ == "SafetensorError" else None
        if found is None:
            raise
        raise OSError(int(found[1]), os.strerror(int(found[1])), str(path)) from err


# --- atomic files ---------------------------------------------------------------------------------
def umask() -> int:
    """The process's umask, read without changing it where the OS shows it (Linux's
    ``/proc/self/status``); elsewhere set and restored at once."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def usual_mode(path: str | Path) -> None:
    """Give ``path`` the permissions ``open``/``mkdir`` would have given it (``tempfile`` makes
    its files and folders private to the user), so what babelzoo writes reads like any other file."""
    base = 0o777 if Path(path).is_dir() else 0o666
    os.chmod(path, base & ~umask())


def atomic_write(path: str | Path, write: Callable[[str], Any]) -> Path:
    """Write ``path`` through ``write(tmp_name)`` on a temporary file beside it, synced, then
    renamed over ``path``: a reader sees the old file or the new one, never a part. On any
    failure (a full disk, an error in ``write``) the temporary file is removed and ``path`` keeps
    its earlier content; an ``OSError`` names ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        with writing(tmp):
            write(tmp)
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        usual_mode(tmp)
        os.replace(tmp, path)
    except OSError as err:
        raise OSError(err.errno, f"cannot write ({err.strerror or err}); the earlier file, if any, is unchanged",
                      str(path)) from err
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def write_text_atomic(path: str | Path, text: str) -> Path:
    """``text`` (UTF-8) into ``path``, atomically (see :func:`atomic_write`)."""
    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)
    return atomic_write(path, write)


def write_json_atomic(path: str | Path, data: Any, indent: int | None = 2, **dump: Any) -> Path:
    """``data`` as JSON (non-ASCII kept, a final newline) into ``path``, atomically. The text is
    made before the file is touched, so data JSON cannot encode leaves the earlier file as it was."""
    text = json.dumps(data, indent=indent, ensure_ascii=False, **dump) + "\n"
    return write_text_atomic(path, text)


# --- single files babelzoo owns -------------------------------------------------------------------
def file_record(path: str | Path) -> Path:
    """The hidden file beside ``path`` in which babelzoo records writing it: ``.NAME.babelzoo.json``."""
    path = Path(path)
    return path.with_name(f".{path.name}.babelzoo.json")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def owned_file(path: str | Path, what: str) -> bool:
    """True when ``path`` is a file babelzoo wrote as a ``what`` (:func:`write_owned_file`) and
    that nobody has changed since."""
    path = Path(path)
    try:
        record = json.loads(file_record(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (isinstance(record, dict) and record.get("what") == what and path.is_file()
            and record.get("sha256") == _sha256(path))


def write_owned_file(path: str | Path, write: Callable[[str], Any], what: str) -> Path:
    """Write ``path`` atomically (:func:`atomic_write`) and record, beside it, that babelzoo
    wrote it as a ``what`` (:func:`owned_file`), so that a later run may replace it."""
    path = atomic_write(path, write)
    write_json_atomic(file_record(path), {"written_by": "babelzoo", "what": what, "sha256": _sha256(path)}, indent=1)
    return path


# --- folders babelzoo owns ------------------------------------------------------------------------
def _entries(folder: Path) -> list[str]:
    """Every file and folder under ``folder``, as POSIX paths relative to it, sorted."""
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))


def _owned_record(folder: Path) -> dict | None:
    """babelzoo's record of writing ``folder`` (:func:`record_owned`), or None where there is
    none or it is not one babelzoo would write."""
    marker = folder / OWNED_MARKER
    if not marker.is_file():
        return None
    try:
        data = json.loads(marker.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        return None
    return data


def owned_entries(folder: Path) -> set[str] | None:
    """What babelzoo recorded writing into ``folder``, or None where it recorded nothing."""
    record = _owned_record(folder)
    return None if record is None else set(record["files"])


def owned_kind(folder: Path) -> str | None:
    """What babelzoo recorded writing ``folder`` as (``"model"``, ``"ONNX export"``, ...), or
    None where it recorded nothing."""
    record = _owned_record(folder)
    return None if record is None else str(record.get("what"))


def foreign_entries(folder: Path) -> list[str]:
    """The entries of ``folder`` babelzoo did not write there (all of them in a folder without
    babelzoo's record), top-level names first."""
    owned = owned_entries(folder)
    present = [e for e in _entries(folder) if e != OWNED_MARKER]
    if owned is None:
        return present
    return [e for e in present if e not in owned]


def _a(what: str) -> str:
    """``what`` with its indefinite article: "a model", "an ONNX export"."""
    return f"{'an' if what[:1].lower() in 'aeiou' else 'a'} {what}"


def check_replaceable(folder: str | Path, what: str = "model") -> None:
    """Raise :class:`FolderNotOwned` unless ``folder`` is missing, empty, or holds only what
    babelzoo wrote there as a whole ``what`` (a folder written as another kind, say a model
    where an ONNX export is to go, is refused too); nothing is touched."""
    folder = Path(folder)
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        raise FolderNotOwned(f"{folder}: exists and is not a folder; nothing was changed")
    if not folder.is_dir():
        return
    kind = owned_kind(folder)
    if kind is not None and kind != what:
        raise FolderNotOwned(f"{folder}: babelzoo wrote it as {_a(kind)}, not {_a(what)}; nothing was deleted: "
                             f"write the {what} into a new or empty folder")
    foreign = foreign_entries(folder)
    if not foreign:
        return
    shown = ", ".join(foreign[:6]) + (", ..." if len(foreign) > 6 else "")
    if kind is None:
        raise FolderNotOwned(f"{folder}: not a folder babelzoo wrote as {_a(what)} (it holds {shown}); nothing was "
                             f"deleted: write the {what} into a new or empty folder")
    raise FolderNotOwned(f"{folder}: holds files babelzoo did not write there ({shown}); nothing was deleted: move "
                         f"them out, or write the {what} into a new or empty folder")


def record_owned(folder: Path, what: str, extra: Iterable[str] = ()) -> None:
    """Record in ``folder`` that babelzoo wrote everything now in it (plus ``extra`` names it
    is about to write), as a ``what``."""
    entries = sorted({*(e for e in _entries(folder) if e != OWNED_MARKER), *extra})
    write_json_atomic(folder / OWNED_MARKER, {"written_by": "babelzoo", "what": what, "files": entries}, indent=1)


def replace_owned_folder(folder: str | Path, write: Callable[[Path], None], what: str = "model") -> Path:
    """Write a whole folder: ``write(tmp)`` fills a fresh folder beside ``folder``, which then
    takes its place, so no file of an earlier ``what`` is left beside the new one and an
    interrupted write leaves the old one whole. Only a folder that is missing, empty or holds
    just what babelzoo wrote there as a ``what`` is replaced; any other is refused before
    anything is written (:class:`FolderNotOwned`), untouched."""
    folder = Path(folder)
    check_replaceable(folder, what)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    old = None
    try:
        write(tmp)
        record_owned(tmp, what)
        usual_mode(tmp)
        check_replaceable(folder, what)  # nothing was added while writing
        if folder.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{folder.name}.old.", dir=folder.parent))
            os.replace(folder, old / folder.name)
        os.replace(tmp, folder)
    except BaseException:
        if old is not None and not folder.exists():
            os.replace(old / folder.name, folder)  # put the earlier folder back
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    return folder


def same_or_inside(a: str | Path, b: str | Path) -> bool:
    """True when the folders ``a`` and ``b`` are the same or one holds the other."""
    ra, rb = Path(a).resolve(), Path(b).resolve()
    return ra == rb or ra in rb.parents or rb in ra.parents


def inside_folder(relative: str) -> bool:
    """True when the path ``relative`` names something strictly inside the folder it is joined
    to: not absolute, not the folder itself, never leaving it through ``..``."""
    text = str(relative).replace("\\", "/")
    normal = posixpath.normpath(text)
    return not (Path(text).is_absolute() or text.startswith("/") or normal in (".", "..")
                or normal.startswith("../"))


def expand_path(value: str, where: str, env: Optional[Mapping[str, str]] = None, hint: str = "") -> str:
    """The one ``${VAR}`` expander of recipes and configs (pre-training data, fine-tuning tasks,
    leaderboards, KG embedding recipes): ``${VAR}`` and ``$VAR`` from ``env`` (default: the
    environment), ``$$`` for a ``$``, then a leading ``~`` for the home folder. An unset variable
    is a :class:`~babelzoo.errors.ConfigError` naming ``where``, the value and the variable, and
    ending with ``hint`` (how to set it); so is a ``$`` that starts no variable::

        >>> expand_path("${DATA}/de.txt", "data.mlm[0].path", {"DATA": "/d"})
        '/d/de.txt'
        >>> expand_path("${DATA}/de.txt", "data.mlm[0].path", {})
        ConfigError: data.mlm[0].path: '${DATA}/de.txt' names 'DATA', which is not set
    """
    text = str(value)
    try:
        expanded = string.Template(text).substitute(os.environ if env is None else env)
    except KeyError as err:
        raise ConfigError(f"{where}: {text!r} names {err.args[0]!r}, which is not set{hint}") from None
    except ValueError:
        raise ConfigError(f"{where}: {text!r} has a '$' that starts no ${{VAR}} (write $$ for a '$')") from None
    return os.path.expanduser(expanded)
