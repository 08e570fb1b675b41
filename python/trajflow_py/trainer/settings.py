"""
The worker's settings file, written by the TypeScript CLI:

    {"temporal": {"address": "127.0.0.1:7233", "namespace": "default"},
     "taskQueue": "trajflow-trainer", "dataDir": "/abs/.trajflow", "modelPath": "/abs/model-dir",
     "compatibility": {"code": "...", "model": "...", "modules": "..."}, "identity": "optional"}

`temporal` is the connection as the TypeScript side resolved it (src/temporal/connection.ts), and
may also hold "apiKey", "tls" ({"disabled", "serverName", "serverCaCert", "clientCert",
"clientKey"}, each file as {"path": ...} or {"data": PEM text}) and "grpcMeta": the trainer connects
to the same cluster as the worker that started it, whatever its own environment says.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import Field
from temporalio.envconfig import ClientConfigProfile, ClientConfigProfileDict, ClientConfigTLSDict, ClientConnectConfig

from .validation import CamelModel, parse


class Compatibility(CamelModel):
    """A run's or a worker's fingerprint (src/core/compatibility.ts)."""

    code: str
    model: str
    modules: str


class DataSource(CamelModel):
    """A certificate or key: a file, or its PEM text."""

    path: str | None = None
    data: str | None = None

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path} if self.path is not None else {"data": self.data or ""}


class TlsSettings(CamelModel):
    disabled: bool | None = None
    server_name: str | None = None
    server_ca_cert: DataSource | None = None
    client_cert: DataSource | None = None
    client_key: DataSource | None = None

    def profile_dict(self) -> ClientConfigTLSDict:
        """The TLS part of temporalio's envconfig profile: only the keys that are set."""
        tls: ClientConfigTLSDict = {}
        if self.disabled is not None:
            tls["disabled"] = self.disabled
        if self.server_name is not None:
            tls["server_name"] = self.server_name
        if self.server_ca_cert is not None:
            tls["server_ca_cert"] = self.server_ca_cert.as_dict()
        if self.client_cert is not None:
            tls["client_cert"] = self.client_cert.as_dict()
        if self.client_key is not None:
            tls["client_key"] = self.client_key.as_dict()
        return tls


class TemporalSettings(CamelModel):
    address: str = Field(min_length=1)
    namespace: str = Field(min_length=1)
    api_key: str | None = None
    tls: TlsSettings | None = None
    grpc_meta: dict[str, str] = Field(default_factory=dict)

    def connect_config(self) -> ClientConnectConfig:
        """`Client.connect` keyword arguments, made by temporalio's own envconfig as its other tools do."""
        profile: ClientConfigProfileDict = {"address": self.address, "namespace": self.namespace, "grpc_meta": self.grpc_meta}
        if self.api_key is not None:
            profile["api_key"] = self.api_key
        if self.tls is not None:
            profile["tls"] = self.tls.profile_dict()
        return ClientConfigProfile.from_dict(profile).to_client_connect_config()


class DeploymentVersion(CamelModel):
    """The worker deployment version to poll as (workers/deployment.ts): set when TRAJFLOW_BUILD_ID is."""

    deployment_name: str = Field(min_length=1)
    build_id: str = Field(min_length=1)


class WorkerSettings(CamelModel):
    temporal: TemporalSettings
    task_queue: str = Field(min_length=1)
    data_dir: Path
    #: The Hugging Face directory version 0 of every run is copied from.
    model_path: Path
    compatibility: Compatibility
    identity: str | None = None
    #: None: an unversioned worker, as without TRAJFLOW_BUILD_ID.
    deployment: DeploymentVersion | None = None


def load_settings(file: Path) -> WorkerSettings:
    """The settings in `file`; a ValueError naming the file and each bad field otherwise."""
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"settings {file}: cannot read it as JSON: {err}") from None
    settings = parse(WorkerSettings, raw, f"settings {file}")
    if not (settings.model_path / "config.json").is_file():
        raise ValueError(f"invalid settings {file}: modelPath: {settings.model_path} is not a Hugging Face model directory (no config.json)")
    return settings
