"""Shared pytest setup of the Python side: never reach a model hub; the trainer tests' tiny model and data directory."""

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Llama as a Hugging Face directory, made once per test module."""
    # Imported here: test modules that need no model never load transformers through conftest.
    from test_trainer_support import tiny_model_dir

    return tiny_model_dir(tmp_path_factory.mktemp("model"))


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"
