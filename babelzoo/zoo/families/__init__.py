"""babelzoo's text encoder families, one package each: ``config.py`` (the family's config, its
:class:`~babelzoo.zoo.family.TextFamily` and its zoo entries; imports no torch) and ``model.py``
(its modules and ``build`` function, composed from :mod:`babelzoo.zoo.layers`). A family from
another package plugs in the same way (:mod:`babelzoo.zoo.family`)."""
