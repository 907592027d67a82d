from babelzoo.cli import main


def test_list_prints_cards(capsys):
    assert main(["list", "xlmr*"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split()[0] for line in lines] == ["xlmr_base", "xlmr_tiny"]
    assert "XLM-R" in lines[0]


def test_info_prints_config_and_size(capsys):
    assert main(["info", "albert_tiny"]) == 0
    out = capsys.readouterr().out
    assert '"embedding_size": 64' in out and '"share_layers": true' in out
    assert "parameters: 702,336" in out


def test_unknown_model_suggests(capsys):
    assert main(["info", "albert_tny"]) == 2
    assert "did you mean 'albert_tiny'" in capsys.readouterr().err


def test_list_every_kind(capsys):
    expected = {"objectives": {"mlm", "sop", "dea", "kbert_mlm", "itc"}, "sources": {"text", "kb_facts", "emoji_images"},
                "kbs": {"cldr", "codex-s"}, "recipes": {"demo", "sop_tiny", "mlm_tiny"},
                "tasks": {"tatoeba", "bli_cldr"}, "models": {"xlmr_tiny", "modernbert_tiny"}}
    for kind, names in expected.items():
        assert main(["list", kind]) == 0
        listed = {line.split()[0] for line in capsys.readouterr().out.strip().splitlines()}
        assert names <= listed, kind
    assert main(["list", "objectives", "s*"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split()[:2] for line in lines] == [["sequence_classification", "[labelled_text]"], ["sop", "[document]"]]
