"""Fixtures of the fine-tuning tests: the topic task's tokenizer and files (``topic_task``)."""

import pytest
from topic_task import write_tokenizer, write_topic_data


@pytest.fixture
def tokenizer_dir(tmp_path):
    return write_tokenizer(tmp_path / "tokenizer")


@pytest.fixture
def topic_data(tmp_path):
    return write_topic_data(tmp_path / "data")
