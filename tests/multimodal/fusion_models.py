"""The tiny fusion models these tests run, read from the model registry: a fusion model added to
the zoo is tested by every test it can take, with no list to edit."""

import babelzoo


def fusion_models(*, joint: bool = False, vision: bool = False, audio: bool = False) -> list[str]:
    """The registered ``*_tiny`` models with a fusion part (``joint``: one whose text attends to
    the other modality, not two towers compared by similarity), with a vision or audio tower."""
    names = []
    for name in babelzoo.list_models("*_tiny"):
        config = babelzoo.model_config(name)
        if config.fusion is None or (joint and config.fusion.mode == "dual"):
            continue
        if (vision and config.vision is None) or (audio and config.audio is None):
            continue
        names.append(name)
    return names
