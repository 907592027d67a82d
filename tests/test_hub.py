"""hubconf.py is generated from the registry and loads fast (no torch until a model is built)."""

import subprocess
import sys
from pathlib import Path

import torch

import babelzoo

REPO = Path(__file__).resolve().parents[1]


def hubconf():
    sys.path.insert(0, str(REPO))
    try:
        import hubconf as module
    finally:
        sys.path.remove(str(REPO))
    return module


def hub_listing() -> list[str]:
    """What torch.hub.list shows: the public callables of hubconf.py."""
    module = hubconf()
    return sorted(n for n in dir(module) if callable(getattr(module, n)) and not n.startswith("_"))


def test_hub_lists_exactly_the_registered_models():
    assert hub_listing() == babelzoo.list_models()


def test_hub_load_local_with_overrides():
    model = torch.hub.load(str(REPO), "xlmr_tiny", source="local", hidden_size=64, num_heads=2)
    assert isinstance(model, babelzoo.BabelModel)
    assert model.config.architecture == "xlmr_tiny" and model.config.text.hidden_size == 64
    assert "Conneau et al. 2020" in hubconf().xlmr_tiny.__doc__ + hubconf().xlmr_base.__doc__


def test_hub_load_local_weights(tmp_path):
    model = babelzoo.create_model("mbert_tiny").eval()
    model.save_pretrained(tmp_path)
    loaded = torch.hub.load(str(REPO), "mbert_tiny", source="local", weights=str(tmp_path)).eval()
    ids = torch.randint(5, 8000, (1, 7))
    assert torch.equal(loaded(ids).last_hidden, model(ids).last_hidden)


def test_importing_babelzoo_and_hubconf_does_not_import_heavy_modules():
    code = ("import sys; sys.path.insert(0, %r); import babelzoo, hubconf; babelzoo.list_models(); "
            "heavy = [m for m in ('torch', 'timm', 'faiss', 'torchaudio', 'transformers') if m in sys.modules]; "
            "print(','.join(heavy))") % str(REPO)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
