"""Hugging Face Hub ids (``org/name``): a snapshot resolved through ``huggingface_hub``, verified.

``huggingface_hub.snapshot_download`` finds the files: in its cache (``HF_HUB_CACHE``, or
``HF_HOME/hub``, or ``cache_dir``), at a branch, tag or commit (``revision``), downloading only
what is missing unless ``HF_HUB_OFFLINE=1``. babelzoo asks only for the files it reads: the
config, safetensors weights and tokenizer files; ``pytorch_model.bin`` only when the repository
has no safetensors (read with ``torch.load(weights_only=True)`` like every pickle).

The standard cache keeps each file once, as a blob named by its hash (sha256 for LFS files, the
git blob sha1 for small ones), and a snapshot folder of links to those blobs. Each linked file is
hashed and compared with its blob's name before anything loads, so a corrupted or truncated
download is refused, naming the file.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Optional

from ..errors import CheckpointError

# What a model id looks like on the Hub: one namespace, one name, no path tricks.
_REPO_ID = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?/[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
MAX_ID_LENGTH = 96

# The top-level files a checkpoint loads from (babelzoo's or transformers' names): config,
# weights (whole or sharded) and tokenizer; other formats and subfolders are never fetched.
MODEL_FILES = ["config.json", "model.safetensors", "model-*-of-*.safetensors", "model.safetensors.index.json",
               "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt",
               "sentencepiece.bpe.model", "spiece.model", "sentencepiece.model", "unigram.json"]
PICKLE_FILES = ["pytorch_model.bin", "pytorch_model-*-of-*.bin", "pytorch_model.bin.index.json"]

_TRUE = {"1", "ON", "YES", "TRUE"}
_HEX = re.compile(r"[0-9a-f]+")


def looks_like_hub_id(source: object) -> bool:
    """True for a string shaped ``org/name`` that names no local file or folder."""
    return isinstance(source, str) and source.count("/") == 1 and ":" not in source and not Path(source).exists()


def check_hub_id(repo_id: str) -> str:
    """``repo_id`` if it is a valid ``org/name`` model id; otherwise an error saying why."""
    if not _REPO_ID.fullmatch(repo_id) or len(repo_id) > MAX_ID_LENGTH or "--" in repo_id or ".." in repo_id:
        raise CheckpointError(f"{repo_id!r} is neither a local checkpoint directory nor a Hugging Face Hub id: an id "
                              f"is 'org/name' (letters, digits, '-', '_', '.'; no '--' or '..'; at most "
                              f"{MAX_ID_LENGTH} characters), e.g. 'FacebookAI/xlm-roberta-base'")
    return repo_id


def offline() -> bool:
    """Whether ``HF_HUB_OFFLINE`` is set now (``huggingface_hub`` reads it once, at import)."""
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE) or os.environ.get("HF_HUB_OFFLINE", "").upper() in _TRUE


def snapshot(repo_id: str, revision: Optional[str] = None, cache_dir: str | Path | None = None) -> Path:
    """The snapshot folder of ``repo_id`` at ``revision`` (default ``main``), with the files
    babelzoo reads, each verified against its blob's hash."""
    check_hub_id(repo_id)
    try:
        import huggingface_hub  # noqa: F401
    except ModuleNotFoundError:
        raise ModuleNotFoundError(f"loading {repo_id!r} from the Hugging Face Hub needs huggingface_hub: "
                                  f"pip install huggingface_hub", name="huggingface_hub") from None
    folder = _download(repo_id, revision, cache_dir, MODEL_FILES)
    if not any(folder.glob("model*.safetensors")):
        folder = _download(repo_id, revision, cache_dir, PICKLE_FILES)
    verify_snapshot(folder, f"{repo_id} (revision {revision or 'main'})")
    return folder


def _download(repo_id: str, revision: Optional[str], cache_dir, patterns: list[str]) -> Path:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (GatedRepoError, HFValidationError, HfHubHTTPError, LocalEntryNotFoundError,
                                        RepositoryNotFoundError, RevisionNotFoundError)

    where = f"{repo_id!r} at revision {revision or 'main'!r}"
    is_offline = offline()
    try:
        return Path(snapshot_download(repo_id, revision=revision, cache_dir=cache_dir, allow_patterns=patterns,
                                      local_files_only=is_offline))
    except HFValidationError as err:
        raise CheckpointError(f"{where}: not a valid Hugging Face Hub id or revision ({err})") from None
    except LocalEntryNotFoundError as err:
        cache = cache_dir or "the Hugging Face cache (HF_HUB_CACHE, or HF_HOME/hub)"
        if is_offline:
            raise CheckpointError(f"{where} is not in {cache} and HF_HUB_OFFLINE=1 is set: download it once with "
                                  f"network access (unset HF_HUB_OFFLINE), or pass cache_dir= the cache that holds "
                                  f"it") from None
        reason = " ".join(str(err).split())  # huggingface_hub's text spans lines; a user error is one line
        raise CheckpointError(f"{where}: no local folder of that name, the Hub cannot be reached and {cache} does "
                              f"not hold it ({reason}); check the path or the network, or copy a cache that holds it "
                              f"and set HF_HUB_CACHE") from None
    except RevisionNotFoundError:
        raise CheckpointError(f"{where}: the repository has no such revision; pass a branch, tag or commit it "
                              f"has") from None
    except GatedRepoError:
        raise CheckpointError(f"{where}: the repository is gated; accept its terms on the Hub and log in "
                              f"(hf auth login, or set HF_TOKEN)") from None
    except RepositoryNotFoundError:
        raise CheckpointError(f"{where}: no such repository on the Hub (or it is private: log in with hf auth "
                              f"login, or set HF_TOKEN)") from None
    except HfHubHTTPError as err:
        raise CheckpointError(f"{where}: the Hub refused the download ({err})") from None


def git_blob_sha1(path: Path) -> str:
    """The id git gives a file's content: sha1 of ``blob <size>\\0`` followed by the bytes."""
    digest = hashlib.sha1(f"blob {path.stat().st_size}\0".encode())
    return _hash_file(path, digest)


def _hash_file(path: Path, digest) -> str:
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def verify_snapshot(folder: Path, what: str) -> None:
    """Hash every snapshot file that links to a cache blob and compare with the blob's name
    (64 hex digits: sha256 of an LFS file; 40: the git blob sha1 of a small file). A mismatch is
    a :class:`CheckpointError` naming the file; files not linked to a named blob (a cache on a
    file system without links) are left as they are."""
    for path in sorted(folder.rglob("*")):
        if not path.is_symlink() or not path.is_file():
            continue
        blob = path.resolve()
        expected = blob.name
        if blob.parent.name != "blobs" or not _HEX.fullmatch(expected) or len(expected) not in (40, 64):
            continue
        actual = _hash_file(blob, hashlib.sha256()) if len(expected) == 64 else git_blob_sha1(blob)
        if actual != expected:
            kind = "sha256" if len(expected) == 64 else "git blob sha1"
            raise CheckpointError(f"{what}: {path.relative_to(folder)} is corrupted: its {kind} is {actual}, but the "
                                  f"cache stores it as blob {expected} ({blob}); delete that blob and download "
                                  f"again")
