"""torch.hub entry points, generated from the model registry (see ``hubconf.py``)."""

from __future__ import annotations

from typing import Any, Callable


def _entry(name: str, card: str) -> Callable[..., Any]:
    def entry(pretrained: bool | str = False, weights: str | None = None, **kwargs: Any):
        from .zoo.factory import create_model

        return create_model(name, pretrained=pretrained, weights=weights, **kwargs)

    entry.__name__ = entry.__qualname__ = name
    entry.__doc__ = (f"{card}\n\nArgs: pretrained (True: the entry's published weights; or a Hugging Face "
                     f"Hub id 'org/name' or checkpoint directory to convert and load), weights (a "
                     f"checkpoint directory, file or URL), **kwargs (config overrides).")
    return entry


def entrypoints() -> dict[str, Callable[..., Any]]:
    """One callable per registered model, named after it."""
    from .zoo.factory import list_models, model_entry

    return {name: _entry(name, model_entry(name).doc) for name in list_models()}
