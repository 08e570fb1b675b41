"""A weight update that fails half way leaves no trajflow version on the server's answers."""

import torch

from trajflow_py.model_server import engine as engine_module
from trajflow_py.model_server.engine import INCONSISTENT_LABEL, Engine


def test_a_failed_copy_labels_the_weights_inconsistent(monkeypatch):
    model = torch.nn.Linear(2, 2)
    engine = Engine(model, max_batch=1, weight_version="3@0123456789abcdef", model_path="/m", eos_token_ids=frozenset(), pad_token_id=0, max_context=8)

    def copy_half(target, weights):
        with torch.no_grad():
            target.weight.zero_()
        raise RuntimeError("disk gone mid-copy")

    monkeypatch.setattr(engine_module, "copy_weights", copy_half)
    engine.start()
    try:
        success, message = engine.update_weights({"weight": torch.ones(2, 2)}, "4@0123456789abcdef", "/m4", abort_all=False)
    finally:
        engine.shutdown()
    assert not success
    assert "inconsistent" in message
    # Not the old label: the model no longer holds version 3's weights.
    assert engine.weight_version == INCONSISTENT_LABEL
    assert engine.model_path == "/m"
