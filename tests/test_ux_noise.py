"""Issue 19 item 10: setup prints no setuptools deprecation warnings, the run name is not cut
mid-word, and ``logs cost`` shows whole model names."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest

from ai_scientist.base.idea import SLUG_MAX, _slug
from ai_scientist.cli.main import main

ROOT = Path(__file__).resolve().parents[1]


def test_pyproject_license_gives_no_setuptools_warning():
    """What ``pip install -e .`` prints ~30 lines of: `project.license` as a TOML table."""
    setuptools = pytest.importorskip("setuptools")
    from setuptools.config.pyprojecttoml import apply_configuration
    from setuptools.dist import Distribution

    assert int(setuptools.__version__.split(".")[0]) >= 77  # SPDX license strings need 77+
    cwd = os.getcwd()
    os.chdir(ROOT)  # readme and package data are resolved against the project directory
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            dist = apply_configuration(Distribution(), ROOT / "pyproject.toml")
    finally:
        os.chdir(cwd)
    messages = [f"{w.category.__name__}: {str(w.message).splitlines()[0]}" for w in caught]
    assert not [m for m in messages if "Deprecat" in m], messages
    assert dist.metadata.license_expression == "Apache-2.0"
    requires = (ROOT / "pyproject.toml").read_text().split("[project]")[0]
    assert '"setuptools>=77"' in requires  # the build requirement matches the license form


@pytest.mark.parametrize(
    "title",
    [
        "Robustness of gradient descent to label noise in logistic regression models",
        "Label noise robustness of small convolutional networks on MNIST digits today",
        "A study of an extraordinarilylongcompoundwordthatgoesonandonandonforeverandever",
    ],
)
def test_run_name_is_cut_at_a_word_boundary(title):
    slug = _slug(title)
    words = title.lower().split()
    assert len(slug) <= SLUG_MAX
    kept = slug.split("_")
    if len(words[len(kept) - 1]) <= SLUG_MAX:
        # every kept word is whole: the name is a prefix of the title's words
        assert kept == [w.strip(".,") for w in words[: len(kept)]], slug
    assert not slug.endswith("_")


def test_short_titles_are_kept_whole():
    assert _slug("Label noise") == "label_noise"
    assert _slug("x" * SLUG_MAX) == "x" * SLUG_MAX


def test_logs_cost_shows_whole_model_names(tmp_path, capsys):
    run = tmp_path / "run"
    (run / "nodes").mkdir(parents=True)
    (run / "journal.jsonl").write_text("")
    model = "local:SmolLM2-135M-Instruct-Q8_0-with-a-long-file-name.gguf"
    bucket = {"prompt_tokens": 10, "completion_tokens": 2, "usd": 0.0, "calls": 1, "attempts": 1}
    cost = {"total": bucket, "by_role": {"code": bucket}, "by_phase": {"phase2": bucket},
            "by_node": {"n0001": bucket}, "by_model": {model: bucket}}  # fmt: skip
    (run / "cost.json").write_text(json.dumps(cost))
    assert main(["logs", str(run), "cost"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if model in line)
    assert row.split()[:2] == [model, "1"]  # the whole name, then the calls column
