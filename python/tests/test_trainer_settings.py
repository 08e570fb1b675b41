"""The worker's settings file: what it reads, and errors that name the bad field."""

import json
from typing import Any

import pytest
from temporalio.service import TLSConfig

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
    assert settings.temporal.address == "127.0.0.1:7233"
    assert settings.task_queue == "trajflow-trainer"
    assert settings.data_dir == tmp_path / "data"
    assert settings.model_path == model_dir
    assert settings.compatibility.modules == "p-hash"
    assert settings.identity == "t1"


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


def test_polls_as_a_deployment_version_only_when_the_typescript_side_names_one(tmp_path, model_dir):
    from temporalio.common import VersioningBehavior, WorkerDeploymentVersion

    from trajflow_py.trainer.worker import deployment_config

    assert deployment_config(load_settings(write(tmp_path, settings_json(tmp_path / "data", model_dir)))) is None
    versioned = {**settings_json(tmp_path / "data", model_dir), "deployment": {"deploymentName": "trajflow", "buildId": "b2"}}
    config = deployment_config(load_settings(write(tmp_path, versioned)))
    assert config is not None
    assert config.use_worker_versioning
    assert config.version == WorkerDeploymentVersion(deployment_name="trajflow", build_id="b2")
    assert config.default_versioning_behavior == VersioningBehavior.PINNED


def test_connects_with_the_connection_the_typescript_side_resolved(tmp_path, model_dir):
    cert = tmp_path / "client.pem"
    cert.write_text("CERT")
    temporal: dict[str, Any] = {"address": "ns.acct.tmprl.cloud:7233", "namespace": "ns.acct", "apiKey": "secret"}
    temporal["tls"] = {"serverName": "ns.acct", "clientCert": {"path": str(cert)}, "clientKey": {"data": "KEY"}}
    settings = load_settings(write(tmp_path, {**settings_json(tmp_path / "data", model_dir), "temporal": temporal}))
    connect = settings.temporal.connect_config()
    assert connect["target_host"] == "ns.acct.tmprl.cloud:7233"
    assert connect["namespace"] == "ns.acct"
    assert connect["api_key"] == "secret"
    tls = connect["tls"]
    assert isinstance(tls, TLSConfig)
    assert tls.domain == "ns.acct"
    assert tls.client_cert == b"CERT"
    assert tls.client_private_key == b"KEY"
    plain = load_settings(write(tmp_path, settings_json(tmp_path / "data", model_dir))).temporal.connect_config()
    assert plain == {"target_host": "127.0.0.1:7233", "namespace": "default"}
