"""Every ``babelzoo`` subcommand reports a user error the same way: one message naming the file,
line or field on stderr, exit status 2, no traceback."""

import pytest

from babelzoo.cli import main
from babelzoo.errors import BabelzooError, run_command
from babelzoo.zoo.config import ConfigError


@pytest.fixture
def files(tmp_path):
    (tmp_path / "recipe.yaml").write_text("model: xlmr_tiny\nlearning_rate: 1\n", encoding="utf-8")
    (tmp_path / "board.yaml").write_text("tasks: [tatoeba]\nmodels: [{name: a, kind: zoo}]\ncolour: red\n",
                                         encoding="utf-8")
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "config.json").write_text('{"model_type": "gpt2"}', encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("argv, message", [
    (["info", "no_such_model"], "babelzoo info: unknown model 'no_such_model'"),
    (["pretrain", "--config", "{d}/recipe.yaml"], "babelzoo pretrain: {d}/recipe.yaml:2 TrainConfig.learning_rate: unknown TrainConfig key"),
    (["finetune", "--config", "{d}/recipe.yaml"], "babelzoo finetune: {d}/recipe.yaml:2 TrainConfig.learning_rate: unknown TrainConfig key"),
    (["eval", "--config", "{d}/board.yaml"], "babelzoo eval: {d}/board.yaml:3 LeaderboardConfig.colour: unknown leaderboard config key 'colour'"),
    (["eval", "--config", "{d}/missing.yaml"], "babelzoo eval: {d}/missing.yaml: no such leaderboard config file"),
    (["convert", "--from-hf", "{d}/hf", "--to", "{d}/out"], "babelzoo convert: "),
    (["kb", "info", "no-such-kb"], "babelzoo kb: unknown knowledge base 'no-such-kb'"),
])
def test_user_errors_are_one_message_and_exit_2(files, capsys, argv, message):
    argv = [a.format(d=files) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(message.format(d=files)), err
    assert "Traceback" not in err


def test_every_error_class_is_a_user_error_and_keeps_its_standard_base():
    from babelzoo.datasets.download import DownloadError
    from babelzoo.datasets.text import CorpusError
    from babelzoo.knowledge.base import KBError
    from babelzoo.registry import RegistryError
    from babelzoo.train.checkpoint import CheckpointCorrupted
    from babelzoo.errors import CheckpointError

    for cls, base in ((ConfigError, ValueError), (CorpusError, ValueError), (KBError, ValueError),
                      (RegistryError, KeyError), (CheckpointError, RuntimeError),
                      (CheckpointCorrupted, RuntimeError), (DownloadError, RuntimeError)):
        assert issubclass(cls, BabelzooError) and issubclass(cls, base), cls


def test_a_bug_keeps_its_traceback():
    def broken(argv):
        raise ZeroDivisionError("a bug")

    with pytest.raises(ZeroDivisionError):
        run_command("demo", broken, [])
