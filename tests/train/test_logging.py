"""What the progress bar and the summary average over, computed by hand."""

import math

from babelzoo.train.logging import RunLogger, format_summary, window_stats


def test_window_figures_by_hand():
    records = [
        {"step": 5, "loss": 4.0, "mlm/loss": 4.0, "lr": 3e-4, "tokens": 100, "step_time": 1.0, "mfu": 0.10},
        {"step": 6, "loss": math.inf, "xlco/loss": math.inf, "lr": 2e-4, "tokens": 300, "step_time": 1.0,
         "skipped": True, "mfu": 0.30},
        {"step": 7, "loss": 2.0, "mlm/loss": 2.0, "lr": 1e-4, "tokens": 200, "step_time": 2.0, "mfu": 0.20},
    ]
    stats = window_stats(records)
    assert (stats["first_step"], stats["last_step"]) == (5, 7)
    assert stats["loss"] == 3.0  # the finite losses' mean; a skipped step's inf is left out
    assert stats["losses"] == {"mlm": (3.0, 2)}
    assert stats["lr"] == 1e-4  # the last step's rate, not a mean
    assert stats["tokens_per_s"] == 600 / 4.0  # tokens over their summed time, not a mean of rates
    assert math.isclose(stats["mfu"], (0.10 * 1 + 0.30 * 1 + 0.20 * 2) / 4.0)  # over the same time


def test_summary_of_a_run_with_no_step_shown_repeats_nothing_it_did_not_measure(tmp_path):
    logger = RunLogger(tmp_path, total_steps=3, progress=False, tensorboard=False, log_every=2)
    for step in (1, 2, 3):
        logger.log({"step": step, "loss": float(step), "lr": 1e-3, "tokens": 10, "step_time": 0.5})
    summary = logger.summary()  # step 3 was not shown yet: the summary shows it first
    logger.close()
    assert summary["last_window"] == {"first_step": 3, "last_step": 3, "loss": 3.0, "losses": {},
                                      "tokens_per_s": 20.0, "lr": 1e-3}
    assert summary["tokens_per_s"] == 20.0 and summary["mfu"] is None
    text = format_summary(summary)
    assert "  loss             3.0000 at step 3 (as on the progress bar)\n" in text
    assert "throughput       20 tokens/s over training steps 1-3 (their own time); 20 over step 3" in text
    assert "MFU" not in text


def test_the_summary_shows_unless_babelzoo_logging_is_set_above_info_even_in_a_fresh_interpreter():
    # a fresh interpreter: no ``babelzoo`` logger exists yet, only the modules' own, whose parent
    # is then the root logger (WARNING); babelzoo's setting is what counts
    import subprocess
    import sys

    code = ("import logging\nfrom babelzoo.train.logging import shows_progress\nprint(shows_progress())\n"
            "logging.getLogger('babelzoo').setLevel(logging.WARNING)\nprint(shows_progress())\n"
            "logging.getLogger('babelzoo.train').setLevel(logging.INFO)\nprint(shows_progress())\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.split() == ["True", "False", "True"]
