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


def test_unknown_model_points_to_the_listing_rather_than_every_name(capsys):
    assert main(["info", "xlmr_tny"]) == 2
    assert capsys.readouterr().err == ("babelzoo info: unknown model 'xlmr_tny'; did you mean 'xlmr_tiny', 'xlm_tiny', "
                                       "'xlnet_tiny'? (every model: babelzoo list models)\n")


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
    assert [line.split()[:2] for line in lines] == [["sbo", "[sentence]"], ["segment_clm", "[document]"],
                                                    ["segment_mlm", "[document]"],
                                                    ["sequence_classification", "[labelled_text]"],
                                                    ["skip_thoughts", "[document]"], ["sop", "[document]"],
                                                    ["span_corruption", "[sentence]"]]


def _parsers():
    import importlib

    from babelzoo.cli import DELEGATED, build_parser

    yield "babelzoo", build_parser()
    for name, (module, _, _) in DELEGATED.items():
        yield name, importlib.import_module(module).build_parser()


def _actions(parser):
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _actions(sub)
        elif not isinstance(action, argparse._HelpAction):
            yield parser.prog, action


def test_every_option_has_plain_help():
    for name, parser in _parsers():
        text = parser.format_help()
        for markup in ("``", ":class:", ":func:", ":mod:"):
            assert markup not in text, (name, markup)
    missing = [(prog, action.dest) for _, parser in _parsers() for prog, action in _actions(parser)
               if not action.help and not action.choices]
    assert missing == []


def test_help_does_not_import_torch():
    import subprocess
    import sys

    from babelzoo.cli import DELEGATED

    for name in ["list", *DELEGATED]:
        code = ("import sys, contextlib, io\nfrom babelzoo.cli import main\n"
                f"with contextlib.redirect_stdout(io.StringIO()):\n    try:\n        main([{name!r}, '--help'])\n"
                "    except SystemExit:\n        pass\nprint('torch' in sys.modules)")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        assert out.strip() == "False", name


def test_kb_command_lists_the_registered_models_and_losses():
    from babelzoo.knowledge.cli import KGE_NAMES, LOSS_NAMES
    from babelzoo.knowledge.kge import KGE_MODELS
    from babelzoo.knowledge.link_prediction import LOSSES

    assert sorted(KGE_NAMES) == KGE_MODELS.list() and LOSS_NAMES == LOSSES
