"""The worker's settings file: what it reads, and errors that name the bad field."""

import json

import pytest
from test_trainer_support import settings_json

from trajflow_py.trainer.settings import load_settings


@pytest.fixture
def model_dir(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    return tmp_path / "model"


def write(tmp_path, value):
    file = tmp_path / "settings.json"
    file.write_text(value if isinstance(value, str) else json.dumps(value))
    return file


def test_reads_the_typescript_clis_settings(tmp_path, model_dir):
    settings = load_settings(write(tmp_path, {**settings_json(tmp_path / "data", model_dir), "identity": "t1", "futureKey": 1}))
    assert settings.temporal.address == "127.0.0.1:7233" and settings.task_queue == "trajflow-trainer"
    assert settings.data_dir == tmp_path / "data" and settings.model_path == model_dir
    assert settings.compatibility.modules == "p-hash" and settings.identity == "t1"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda s: s.pop("taskQueue"), "taskQueue: Field required"),
        (lambda s: s["compatibility"].pop("code"), "compatibility.code: Field required"),
        (lambda s: s["temporal"].update(namespace=""), "temporal.namespace: String should have at least 1 character"),
    ],
)
def test_names_the_bad_field(tmp_path, model_dir, change, message):
    settings = settings_json(tmp_path, model_dir)
    change(settings)
    with pytest.raises(ValueError, match=message):
        load_settings(write(tmp_path, settings))


def test_refuses_a_model_path_without_a_model_and_a_file_that_is_not_json(tmp_path, model_dir):
    with pytest.raises(ValueError, match="modelPath: .* is not a Hugging Face model directory"):
        load_settings(write(tmp_path, settings_json(tmp_path, tmp_path / "nowhere")))
    with pytest.raises(ValueError, match="cannot read it as JSON"):
        load_settings(write(tmp_path, "{not json"))
