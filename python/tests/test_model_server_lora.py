"""
Runtime LoRA adapters in the model server (--enable-lora), on the tiny random llama with two peft
adapters whose B matrices are non-zero: rows of different adapters and of the base model in one
batch get the logprobs a plain forward pass of the peft model under that adapter gives; loading,
unloading and their errors over HTTP; an unload waits for the requests holding the adapter.
"""

import json
import shutil
import threading
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from trajflow_py.model_server import lora as lora_module
from trajflow_py.model_server.client import ServerProcess, running_server
from trajflow_py.model_server.engine import Engine, Sequence, UnknownAdapter
from trajflow_py.model_server.http_api import ModelServer
from trajflow_py.model_server.loading import load_model
from trajflow_py.model_server.lora import AdapterError, LoraModel
from trajflow_py.model_server.protocol import BadRequest, parse_sampling
from trajflow_py.model_server.tiny_model import make_tiny_model
from trajflow_py.model_server.weights import read_weights

SMOLLM2 = Path(__file__).resolve().parents[2] / ".models" / "smollm2-135m-instruct"
pytestmark = pytest.mark.skipif(not (SMOLLM2 / "tokenizer.json").exists(), reason="needs the SmolLM2 tokenizer (scripts/setup.sh)")

PROMPTS = {"a1": [1, 4093, 198, 22518, 253, 1345, 2821, 30], "a2": [1, 520, 9531, 198], None: [1, 4093, 198, 22518, 253, 17]}
# A batch row's logprobs and a lone forward pass's differ only by float32 rounding (seen: up to 1e-5 on
# the tiny model's large logits); a wrong adapter on a row is off by whole units.
TOLERANCE = 5e-5


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("tiny"), SMOLLM2)


def _make_adapter(base_dir: Path, out: Path, seed: int, targets: list[str]) -> Path:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = get_peft_model(AutoModelForCausalLM.from_pretrained(base_dir), LoraConfig(r=4, lora_alpha=8, target_modules=targets, lora_dropout=0.0))
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_B" in name:  # peft starts B at zero, where the adapter would equal the base model
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.5)
    model.save_pretrained(str(out))
    return out


@pytest.fixture(scope="module")
def adapters(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("adapters")
    made = {
        "a1": _make_adapter(tiny_dir, root / "a1", 1, ["q_proj", "v_proj"]),
        "a2": _make_adapter(tiny_dir, root / "a2", 2, ["q_proj", "o_proj", "gate_proj"]),
        # a1's shape, other weights: what a training run's next version is.
        "a1b": _make_adapter(tiny_dir, root / "a1b", 3, ["q_proj", "v_proj"]),
    }
    # a1's tensors under a config that says rank 8: peft cannot place them.
    wrong_rank = root / "wrong_rank"
    shutil.copytree(made["a1"], wrong_rank)
    config = json.loads((wrong_rank / "adapter_config.json").read_text())
    (wrong_rank / "adapter_config.json").write_text(json.dumps({**config, "r": 8}))
    made["wrong_rank"] = wrong_rank
    return made


@pytest.fixture(scope="module")
def reference(tiny_dir: Path, adapters: dict[str, Path]):
    """logprobs(prompt, output_ids, adapter): log_softmax at each sampled token, from one plain forward
    pass of the peft model under that adapter (None = adapters disabled)."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_dir), str(adapters["a1"]), adapter_name="a1").eval()
    model.load_adapter(str(adapters["a2"]), adapter_name="a2")
    model.load_adapter(str(adapters["a1b"]), adapter_name="a1b")

    def logprobs(prompt: list[int], output_ids: list[int], adapter: str | None, temperature: float = 1.0) -> list[float]:
        ids = torch.tensor([prompt + output_ids[:-1]])
        with torch.no_grad():
            if adapter is None:
                with model.disable_adapter():
                    logits = model(input_ids=ids).logits
            else:
                model.set_adapter(adapter)
                logits = model(input_ids=ids).logits
        scaled = torch.log_softmax(logits[0, len(prompt) - 1 :].float() / temperature, dim=-1)
        return [float(scaled[i, token]) for i, token in enumerate(output_ids)]

    return logprobs


@pytest.fixture
def engine(tiny_dir: Path):
    model, _ = load_model(str(tiny_dir), "float32")
    lora = LoraModel(model)
    running = Engine(
        model, max_batch=4, weight_version="v0", model_path=str(tiny_dir), eos_token_ids=frozenset(), pad_token_id=0, max_context=2048, lora=lora, max_loras=2
    )
    running.start()
    yield running
    running.shutdown()


def _sampling(max_new_tokens: int, seed: int = 4):
    return parse_sampling({"max_new_tokens": max_new_tokens, "temperature": 1.0, "sampling_seed": seed, "ignore_eos": True}, vocab_size=1 << 20)


def _wait(seq: Sequence) -> Sequence:
    assert seq.done.wait(30), f"request {seq.rid} did not finish"
    return seq


def test_one_batch_of_two_adapters_and_the_base_gives_each_its_adapters_logprobs(engine, adapters, reference):
    engine.load_adapter("a1", str(adapters["a1"]))
    engine.load_adapter("a2", str(adapters["a2"]))
    # Paused, nothing is admitted: on resume all three join one prefill and then decode together.
    engine.pause("in_place")
    seqs = {name: engine.submit(f"rid-{name}", prompt, _sampling(8), lora_name=name) for name, prompt in PROMPTS.items()}
    engine.resume()
    for name, seq in seqs.items():
        _wait(seq)
        assert seq.finish_reason == {"type": "length", "length": 8}
        assert seq.weight_version == "v0"
        expected = reference(PROMPTS[name], seq.output_ids, name)
        assert seq.output_logprobs == pytest.approx(expected, abs=TOLERANCE, rel=0), name
    # The adapters change the model: under the base, a1's tokens have other logprobs.
    base_view = reference(PROMPTS["a1"], seqs["a1"].output_ids, None)
    assert max(abs(a - b) for a, b in zip(base_view, seqs["a1"].output_logprobs, strict=True)) > 0.05


def test_unload_waits_for_the_requests_holding_the_adapter(engine, adapters):
    engine.load_adapter("a1", str(adapters["a1"]))
    engine.pause("in_place")
    held = engine.submit("held", PROMPTS["a1"], _sampling(6), lora_name="a1")
    unloaded = threading.Event()

    def unload() -> None:
        engine.unload_adapter("a1")
        unloaded.set()

    unloader = threading.Thread(target=unload)
    unloader.start()
    time.sleep(0.3)
    assert not unloaded.is_set()
    # The name is gone at once: new requests for it are refused while the held one goes on.
    with pytest.raises(UnknownAdapter, match="'a1'"):
        engine.submit("late", PROMPTS["a1"], _sampling(2), lora_name="a1")
    assert engine.loaded_adapters() == {}
    engine.resume()
    assert _wait(held).finish_reason == {"type": "length", "length": 6}
    unloader.join(10)
    assert unloaded.is_set()
    # The last adapter took peft's layers with it: the plain base model runs again.
    assert engine.lora is not None
    assert engine.lora.runnable is engine.model


def test_an_unloaded_adapters_matrices_take_the_next_adapter_of_its_shape(engine, adapters, reference, tmp_path, monkeypatch):
    engine.load_adapter("x", str(adapters["a1"]))
    engine.load_adapter("keep", str(adapters["a2"]))
    spare = engine._adapters["x"].peft_name
    engine.unload_adapter("x")
    # a1b's weights copied into the matrices that held a1's (same shape): they compute a1b now, not a1.
    # The file names the spare's tensors exactly, so they are copied directly, not through peft's load.
    with monkeypatch.context() as patched:
        patched.setattr(lora_module, "set_peft_model_state_dict", _not_called)
        engine.load_adapter("z", str(adapters["a1b"]))
    assert engine._adapters["z"].peft_name == spare
    seq = _wait(engine.submit("z", PROMPTS["a1"], _sampling(6), lora_name="z"))
    assert seq.output_logprobs == pytest.approx(reference(PROMPTS["a1"], seq.output_ids, "a1b"), abs=TOLERANCE, rel=0)
    assert max(abs(a - b) for a, b in zip(reference(PROMPTS["a1"], seq.output_ids, "a1"), seq.output_logprobs, strict=True)) > 0.05
    # A refill that fails (a1's shape, a tensor missing: peft places it and finds the gap) drops the spare and leaves the rest serving.
    engine.unload_adapter("z")
    torn = tmp_path / "torn"
    shutil.copytree(adapters["a1b"], torn)
    tensors = load_file(torn / "adapter_model.safetensors")
    save_file(dict(list(tensors.items())[1:]), torn / "adapter_model.safetensors")
    with pytest.raises(AdapterError, match=rf"{torn}: lacks 1 tensors"):
        engine.load_adapter("bad", str(torn))
    assert engine.loaded_adapters() == {"keep": str(adapters["a2"])}
    assert engine.lora is not None
    assert engine.lora._spares == []


def _not_called(*args, **kwargs):
    raise AssertionError("peft's state-dict load was called for a refill the adapter's files name exactly")


def test_a_failed_load_leaves_the_model_as_it_was(engine, adapters, tiny_dir):
    before = _wait(engine.submit("before", PROMPTS[None], _sampling(5))).output_logprobs
    with pytest.raises(AdapterError, match=str(adapters["wrong_rank"])):
        engine.load_adapter("bad", str(adapters["wrong_rank"]))
    assert engine.loaded_adapters() == {}
    assert _wait(engine.submit("after", PROMPTS[None], _sampling(5))).output_logprobs == before
    # With adapters injected, a base-weights update still finds the base model's tensors by their names.
    engine.load_adapter("a2", str(adapters["a2"]))
    weights = read_weights(str(tiny_dir), engine.model)
    assert not any("lora" in name or "base_layer" in name for name in weights)
    success, message = engine.update_weights(weights, "v1", str(tiny_dir), abort_all=False)
    assert success, message


def test_the_lora_routes_say_the_server_was_started_without_enable_lora(tiny_dir):
    model, tokenizer = load_model(str(tiny_dir), "float32")
    plain = Engine(model, max_batch=1, weight_version="v0", model_path=str(tiny_dir), eos_token_ids=frozenset(), pad_token_id=0, max_context=2048)
    app = ModelServer(plain, tokenizer, model, tokenizer_path=str(tiny_dir))
    reply = app.load_lora_adapter({"lora_name": "a", "lora_path": "/x"})
    assert reply.status == 400
    assert reply.body["success"] is False
    assert "started without --enable-lora" in reply.body["error_message"]
    assert "started without --enable-lora" in app.unload_lora_adapter({"lora_name": "a"}).body["error_message"]
    with pytest.raises(BadRequest, match="^lora_path: .*started without --enable-lora"):
        app.generate({"input_ids": [1, 2], "lora_path": "a"})


@pytest.fixture(scope="module")
def server(tiny_dir):
    with running_server(tiny_dir, "--enable-lora", "--max-loras", "2", "--weight-version", "v0") as process:
        yield process


def test_load_generate_and_unload_over_http(server: ServerProcess, adapters, reference, tiny_dir):
    client = server.client
    first = client.post("/load_lora_adapter", {"lora_name": "3@abc", "lora_path": str(adapters["a1"])})
    assert first.status == 200, first.body
    assert first.body == {"success": True, "error_message": "", "loaded_adapters": {"3@abc": str(adapters["a1"])}}
    assert client.post("/load_lora_adapter", {"lora_name": "4@abc", "lora_path": str(adapters["a2"])}).status == 200

    models = client.get("/v1/models").body["data"]
    assert [(m["id"], m["root"], m["parent"]) for m in models] == [
        (str(tiny_dir), str(tiny_dir), None),
        ("3@abc", str(adapters["a1"]), str(tiny_dir)),
        ("4@abc", str(adapters["a2"]), str(tiny_dir)),
    ]

    out = client.generate(PROMPTS["a1"], max_new_tokens=6, temperature=0.7, sampling_seed=3, ignore_eos=True, lora_path="3@abc")
    assert out["meta_info"]["weight_version"] == "v0"  # the base's label; the adapter's name carries its version
    logprobs = [entry[0] for entry in out["meta_info"]["output_token_logprobs"]]
    assert logprobs == pytest.approx(reference(PROMPTS["a1"], out["output_ids"], "a1", temperature=0.7), abs=TOLERANCE, rel=0)

    third = client.post("/load_lora_adapter", {"lora_name": "5@abc", "lora_path": str(adapters["a1"])})
    assert third.status == 400
    assert "--max-loras" in third.body["error_message"]
    again = client.post("/load_lora_adapter", {"lora_name": "3@abc", "lora_path": str(adapters["a1"])})
    assert again.status == 400
    assert "already loaded" in again.body["error_message"]

    unknown = client.post("/generate", {"input_ids": PROMPTS["a1"], "lora_path": "9@abc"})
    assert unknown.status == 400
    assert unknown.body["error"]["message"].startswith("lora_path: no LoRA adapter named '9@abc' is loaded")

    unloaded = client.post("/unload_lora_adapter", {"lora_name": "3@abc"})
    assert unloaded.body == {"success": True, "error_message": "", "loaded_adapters": {"4@abc": str(adapters["a2"])}}
    gone = client.post("/generate", {"input_ids": PROMPTS["a1"], "lora_path": "3@abc"})
    assert gone.status == 400
    assert "'3@abc'" in gone.body["error"]["message"]
    missing = client.post("/unload_lora_adapter", {"lora_name": "3@abc"})
    assert missing.status == 400
    assert "no LoRA adapter named '3@abc'" in missing.body["error_message"]

    # A folder that is no adapter is refused by name, and the server goes on serving.
    for folder in (tiny_dir, adapters["wrong_rank"], tiny_dir / "nowhere"):
        bad = client.post("/load_lora_adapter", {"lora_name": "bad", "lora_path": str(folder)})
        assert bad.status == 400
        assert str(folder) in bad.body["error_message"]
        assert bad.body["loaded_adapters"] == {"4@abc": str(adapters["a2"])}
    assert client.generate(PROMPTS["a2"], max_new_tokens=3, lora_path="4@abc")["meta_info"]["completion_tokens"] == 3
    assert client.post("/load_lora_adapter", {"lora_name": "x"}).body["error"]["message"].startswith("lora_path:")
