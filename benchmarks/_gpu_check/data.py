"""The check's data: Tatoeba sentences, pairs and documents of four languages and English,
generated images and tones with captions, and one tokenizer over the text."""

from __future__ import annotations

from pathlib import Path

from .common import Context

LANGS = {"deu": "de", "fra": "fr", "spa": "es", "rus": "ru"}  # Tatoeba code -> the language tag it trains as


def prepare_data(ctx: Context, data_dir: Path) -> None:
    """Tatoeba sentences, pairs and documents of four languages and English, generated images and
    tones with captions, and one unigram tokenizer over the text: all under ``ctx.work``."""
    from babelzoo.datasets.text import tatoeba_files

    folder = data_dir / "tatoeba"
    if not folder.is_dir():
        raise SystemExit(f"gpu_check: no Tatoeba folder at {folder}; pass --data-dir (a folder with tatoeba/)")
    lines = ctx.size(1000, 96)
    root = ctx.work / "data"
    (root / "text").mkdir(parents=True, exist_ok=True)
    english: list[str] = []
    by_lang: dict[str, list[str]] = {}
    for code, tag in LANGS.items():
        src, eng = (p.read_text(encoding="utf-8").splitlines()[:lines] for p in tatoeba_files(folder, code))
        write_lines(root / "text" / f"{tag}.txt", src)
        write_lines(root / "text" / f"en-{tag}.en", eng)
        # documents: runs of eight consecutive test sentences, a blank line between runs
        write_lines(root / "text" / f"docs.{tag}.txt",
                    ["\n".join(src[i:i + 8]) + "\n" for i in range(0, len(src) - 7, 8)])
        english.extend(eng)
        ctx.sentences.extend(src)
        by_lang[tag] = src
        ctx.sources.setdefault("pair", []).append(
            {"kind": "parallel", "src": str(root / "text" / f"en-{tag}.en"), "tgt": str(root / "text" / f"{tag}.txt"),
             "src_lang": "en", "tgt_lang": tag})
        ctx.sources.setdefault("sentence", []).append({"kind": "text", "path": str(root / "text" / f"{tag}.txt"),
                                                       "lang": tag})
        ctx.sources.setdefault("document", []).append(
            {"kind": "documents", "path": str(root / "text" / f"docs.{tag}.txt"), "lang": tag, "format": "blank_line"})
    write_lines(root / "text" / "en.txt", english)
    ctx.sources["sentence"].append({"kind": "text", "path": str(root / "text" / "en.txt"), "lang": "en"})
    ctx.sentences.extend(english)
    by_lang["en"] = english + ["a red circle", "a tone of 440 hertz"]
    ctx.sources["image"] = [{"kind": "media_manifest", "path": str(images(root / "images", ctx.size(256, 48))),
                             "modality": "image"}]
    ctx.sources["audio"] = [{"kind": "media_manifest", "path": str(tones(root / "audio", ctx.size(128, 24))),
                             "modality": "audio"}]
    ctx.tokenizer_dir = shared_tokenizer(ctx, by_lang)


def write_lines(path: Path, lines: list[str]) -> None:
    path.write_text("".join(line.rstrip("\n") + "\n" for line in lines), encoding="utf-8")


COLOURS = {"red": (220, 40, 40), "green": (40, 180, 60), "blue": (40, 80, 220), "yellow": (230, 210, 40)}
SHAPES = ("circle", "square", "triangle", "cross")


def images(folder: Path, count: int) -> Path:
    """``count`` 64×64 PNGs of a coloured shape on grey, captioned ("a red circle"), and their
    manifest; one group per colour and shape."""
    import json

    from PIL import Image, ImageDraw

    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(count):
        colour, shape = list(COLOURS)[i % 4], SHAPES[(i // 4) % 4]
        image = Image.new("RGB", (64, 64), (128 + i % 64, 128, 128))
        draw = ImageDraw.Draw(image)
        box = (8 + i % 8, 8 + (i // 8) % 8, 48 + i % 8, 48 + (i // 8) % 8)
        if shape == "circle":
            draw.ellipse(box, fill=COLOURS[colour])
        elif shape == "square":
            draw.rectangle(box, fill=COLOURS[colour])
        elif shape == "triangle":
            draw.polygon([(box[0], box[3]), (box[2], box[3]), ((box[0] + box[2]) // 2, box[1])], fill=COLOURS[colour])
        else:
            draw.line((box[0], box[1], box[2], box[3]), fill=COLOURS[colour], width=6)
            draw.line((box[0], box[3], box[2], box[1]), fill=COLOURS[colour], width=6)
        image.save(folder / f"{i:04d}.png")
        rows.append({"image": f"{i:04d}.png", "text": f"a {colour} {shape}", "lang": "en", "group": f"{colour}-{shape}"})
    manifest = folder / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return manifest


def tones(folder: Path, count: int, rate: int = 16000) -> Path:
    """``count`` one-second WAVs of a tone between 220 and 880 Hz, captioned with its pitch."""
    import json

    import numpy as np
    import soundfile

    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    t = np.arange(rate) / rate
    for i in range(count):
        pitch = 220 * 2 ** ((i % 24) / 12)
        wave = 0.5 * np.sin(2 * np.pi * pitch * t) * np.exp(-t * (1 + i % 3))
        soundfile.write(str(folder / f"{i:04d}.wav"), wave.astype(np.float32), rate)
        rows.append({"audio": f"{i:04d}.wav", "text": f"a tone of {round(pitch)} hertz", "lang": "en",
                     "group": str(round(pitch))})
    manifest = folder / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return manifest


def shared_tokenizer(ctx: Context, texts: dict[str, list[str]]) -> Path:
    from babelzoo.train.run import build_tokenizer
    from babelzoo.train.config import TrainConfig

    out = ctx.work / "tokenizer-run"
    # sentinels: T5's span corruption needs them
    cfg = TrainConfig(output_dir=str(out), tokenizer={"vocab_size": ctx.size(4000, 600), "model_type": "unigram",
                                                      "alpha": 0.3, "sentinels": 100})
    build_tokenizer(cfg, lambda: texts)
    return out / "tokenizer"
