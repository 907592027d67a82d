"""``babelzoo pretrain``: a link-prediction recipe (``kind: link_prediction``,
:mod:`babelzoo.knowledge.text_kge`) trains here, any other recipe in
:func:`babelzoo.train.cli.pretrain_main`. The command lives in the knowledge layer because it
sees both; the training layer does not import knowledge.

    babelzoo pretrain --config kgc_e5_small --set kg.path=path/to/graph
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from ..errors import command


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``babelzoo pretrain``: the training layer's (``--config``, ``--set``, ...)."""
    from ..train import cli as train_cli

    return train_cli.build_parser()


@command("pretrain")
def pretrain_main(argv: Sequence[str] | None = None) -> int:
    """``babelzoo pretrain``: a link-prediction recipe (``kind: link_prediction``) trains here,
    any other recipe in :func:`babelzoo.train.cli.pretrain_main`."""
    from ..train import cli as train_cli

    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    from ..train.config import recipe_path
    from .text_kge import is_link_prediction_recipe

    path = recipe_path(args.config)
    if is_link_prediction_recipe(path):
        return pretrain_link_prediction(path, args.overrides, args.print_config)
    return train_cli.pretrain_main(argv)


def pretrain_link_prediction(path, overrides: Sequence[str], print_config: bool = False) -> int:
    """``babelzoo pretrain --config R`` for a link-prediction recipe (``kind: link_prediction``,
    :mod:`babelzoo.knowledge.text_kge`): train, report each validation, write the model."""
    from dataclasses import asdict

    from ..errors import ConfigError
    from .base import KBError
    from .text_kge import read_link_recipe, train_link_prediction

    try:
        recipe = read_link_recipe(path, overrides)
        if print_config:
            print(json.dumps(asdict(recipe), indent=2))
            return 0
        train_link_prediction(recipe, say=lambda line: print(line, flush=True))
    except (ConfigError, KBError, OSError) as err:
        print(f"babelzoo pretrain: {err}", file=sys.stderr)
        return 2
    return 0
