"""The README's quickstart is what CI runs: keep them in step."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def quickstart_commands() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    quick = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    return [block.split("\n", 1)[1].strip() for block in quick.split("```bash")[1:]
            for block in [block.split("```", 1)[0]]]


def test_quickstart_has_two_commands_and_ci_runs_the_test_one():
    commands = quickstart_commands()
    assert len(commands) == 2
    demo, tests = commands
    assert demo.endswith("babelzoo demo") and "pytest" in tests
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert tests in ci.splitlines()
