"""Character classes as Hugging Face ``tokenizers`` computes them, shared by the tokenizers that
must give its exact ids (WordPiece, ALBERT's sentencepiece).

``tokenizers`` reads general categories from Unicode 8.0 tables (its ``unicode_categories``
dependency) while Python's ``unicodedata`` is newer; the few code points where that changes a
decision (is it a mark, punctuation, a control character?) are listed here, measured against
``tokenizers`` 0.23 over every code point.
"""

from __future__ import annotations

import unicodedata

# tokenizers classifies characters with Unicode 8.0 tables: code points assigned since then as marks,
# punctuation or format characters are plain unassigned characters to it (kept, never split or
# stripped). These ranges are those code points as of Python's Unicode 14.0 database.
UNASSIGNED_IN_UNICODE_8 = (
    (0x61D, 0x61D), (0x7FD, 0x7FD), (0x890, 0x89F), (0x8CA, 0x8E2), (0x9FD, 0x9FE), (0xA76, 0xA76), (0xAFA, 0xAFF),
    (0xB55, 0xB55), (0xC04, 0xC04), (0xC3C, 0xC3C), (0xC77, 0xC77), (0xC84, 0xC84), (0xD00, 0xD00), (0xD3B, 0xD3C),
    (0xD81, 0xD81), (0xEBA, 0xEBA), (0x180F, 0x180F), (0x1885, 0x1886), (0x1ABF, 0x1ACE), (0x1B7D, 0x1B7E),
    (0x1DF6, 0x1DFB), (0x2E43, 0x2E4F), (0x2E52, 0x2E5D), (0xA82C, 0xA82C), (0xA8C5, 0xA8C5), (0xA8FF, 0xA8FF),
    (0xA9BD, 0xA9BD), (0x10D24, 0x10D27), (0x10EAB, 0x10EAD), (0x10F46, 0x10F50), (0x10F55, 0x10F59),
    (0x10F82, 0x10F89), (0x11070, 0x11070), (0x11073, 0x11074), (0x110C2, 0x110CD), (0x111C9, 0x111C9),
    (0x111CF, 0x111CF), (0x1123E, 0x1123E), (0x1133B, 0x1133B), (0x11438, 0x1143F), (0x11442, 0x11444),
    (0x11446, 0x11446), (0x1144B, 0x1144F), (0x1145A, 0x1145E), (0x11660, 0x1166C), (0x116B9, 0x116B9),
    (0x1182F, 0x11837), (0x11839, 0x1183B), (0x1193B, 0x1193C), (0x1193E, 0x1193E), (0x11943, 0x11946),
    (0x119D4, 0x119DB), (0x119E0, 0x119E0), (0x119E2, 0x119E2), (0x11A01, 0x11A0A), (0x11A33, 0x11A38),
    (0x11A3B, 0x11A47), (0x11A51, 0x11A56), (0x11A59, 0x11A5B), (0x11A8A, 0x11A96), (0x11A98, 0x11A9C),
    (0x11A9E, 0x11AA2), (0x11C30, 0x11C3D), (0x11C3F, 0x11C3F), (0x11C41, 0x11C45), (0x11C70, 0x11C71),
    (0x11C92, 0x11CA7), (0x11CAA, 0x11CB0), (0x11CB2, 0x11CB3), (0x11CB5, 0x11CB6), (0x11D31, 0x11D45),
    (0x11D47, 0x11D47), (0x11D90, 0x11D91), (0x11D95, 0x11D95), (0x11D97, 0x11D97), (0x11EF3, 0x11EF4),
    (0x11EF7, 0x11EF8), (0x11FFF, 0x11FFF), (0x12FF1, 0x12FF2), (0x13430, 0x13438), (0x16E97, 0x16E9A),
    (0x16F4F, 0x16F4F), (0x16FE2, 0x16FE2), (0x16FE4, 0x16FE4), (0x1CF00, 0x1CF46), (0x1E000, 0x1E02A),
    (0x1E130, 0x1E136), (0x1E2AE, 0x1E2AE), (0x1E2EC, 0x1E2EF), (0x1E944, 0x1E94A), (0x1E95E, 0x1E95F),
)
# categories that changed after Unicode 8.0: CANADIAN SYLLABICS CHI SIGN (Po → So), HANUNOO SIGN PAMUDPOD
# (Mn → Mc), SHARADA SANDHI MARK (Po → Mn)
CATEGORY_OVERRIDES = {chr(c): "Cn" for lo, hi in UNASSIGNED_IN_UNICODE_8 for c in range(lo, hi + 1)
                      if unicodedata.category(chr(c)) != "Cn"}
CATEGORY_OVERRIDES.update({"\u166d": "Po", "\u1734": "Mn", "\U000111c9": "Po"})


def category(ch: str) -> str:
    """The general category ``tokenizers`` sees for one character."""
    return CATEGORY_OVERRIDES.get(ch) or unicodedata.category(ch)


def strip_accents_nfd(text: str) -> str:
    """NFD, then drop non-spacing marks (``tokenizers``' ``StripAccents`` after ``NFD``)."""
    return "".join(ch for ch in unicodedata.normalize("NFD", text) if category(ch) != "Mn")


def strip_accents_nfkd(text: str) -> str:
    """NFKD, then drop non-spacing marks (ALBERT's normaliser)."""
    return "".join(ch for ch in unicodedata.normalize("NFKD", text) if category(ch) != "Mn")


def lowercase_chars(text: str) -> str:
    """Lower-case one character at a time, as ``tokenizers`` does: no final-sigma context, so a
    word-final capital sigma becomes ``σ``, never ``ς``."""
    return "".join(ch.lower() for ch in text)
