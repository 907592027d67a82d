"""``python -m babelzoo ...`` (what torchrun launches): the same as the ``babelzoo`` command."""

from .cli import main

raise SystemExit(main())
