"""
Parsing and validation of the JSON bodies the server accepts, with SGLang's field names.

Every rejection is a BadRequest whose message starts with the path of the offending field
("sampling_params.top_p: ..."), so a client sees at once what it sent wrong. Fields SGLang knows
but this server does not implement are accepted only at their neutral value and refused otherwise:
silently ignoring e.g. a repetition penalty would sample from a different distribution than the
caller asked for. As in SGLang, a JSON null counts as an absent field.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any


class BadRequest(ValueError):
    """A request body that does not fit the API; answered with HTTP 400."""


@dataclass(frozen=True)
class SamplingRequest:
    max_new_tokens: int
    temperature: float
    top_p: float
    # -1 = disabled (SGLang's convention).
    top_k: int
    stop_token_ids: frozenset[int]
    # None = a fresh random seed.
    sampling_seed: int | None
    ignore_eos: bool
    no_stop_trim: bool
    skip_special_tokens: bool


@dataclass(frozen=True)
class GenerateRequest:
    rid: str | None
    # Exactly one of input_ids / text is set.
    input_ids: list[int] | None
    text: str | None
    sampling: SamplingRequest
    return_logprob: bool
    # The name of a loaded LoRA adapter (SGLang's field name); None = the base model.
    lora_path: str | None


@dataclass(frozen=True)
class WeightUpdateRequest:
    model_path: str
    weight_version: str | None
    abort_all_requests: bool


@dataclass(frozen=True)
class LoadLoraRequest:
    lora_name: str
    lora_path: str


@dataclass(frozen=True)
class AbortRequest:
    rid: str | None
    abort_all: bool


PAUSE_MODES = ("abort", "retract", "in_place")

# SGLang's default when a request gives no max_new_tokens.
_DEFAULT_MAX_NEW_TOKENS = 128

_SAMPLING_FIELDS = {
    "max_new_tokens",
    "temperature",
    "top_p",
    "top_k",
    "stop_token_ids",
    "sampling_seed",
    "ignore_eos",
    "no_stop_trim",
    "skip_special_tokens",
}
# SGLang fields this server implements only at their neutral value (null always counts as
# neutral: SGLang reads it as the default). Anything else would change what is sampled or returned.
_NEUTRAL_SAMPLING: dict[str, tuple[Any, ...]] = {
    "stop": ("", []),
    "stop_regex": ("", []),
    "min_p": (0,),
    "frequency_penalty": (0,),
    "presence_penalty": (0,),
    "repetition_penalty": (1,),
    "min_new_tokens": (0,),
    "n": (1,),
    "logit_bias": ({},),
    "json_schema": (),
    "regex": (),
    "ebnf": (),
    "structural_tag": (),
    "custom_params": (),
}
# Accepted with any value: they only shape text or streaming, never the sampled ids.
_IGNORED_SAMPLING = {"spaces_between_special_tokens", "stream_interval"}

_GENERATE_FIELDS = {"rid", "input_ids", "text", "sampling_params", "return_logprob", "lora_path"}
_NEUTRAL_GENERATE: dict[str, tuple[Any, ...]] = {
    "stream": (False,),
    "logprob_start_len": (-1,),
    "top_logprobs_num": (0,),
    "return_text_in_logprobs": (False,),
    "token_ids_logprob": (),
    "return_hidden_states": (False,),
    "return_routed_experts": (False,),
    "input_embeds": (),
    "image_data": (),
    "video_data": (),
    "audio_data": (),
    "modalities": (),
    "session_params": (),
    "custom_logit_processor": (),
    "bootstrap_host": (),
    "bootstrap_port": (),
    "bootstrap_room": (),
    "data_parallel_rank": (),
}
_IGNORED_GENERATE = {"log_metrics", "no_logs", "priority", "extra_key"}

_WEIGHT_UPDATE_FIELDS = {"model_path", "weight_version", "abort_all_requests"}
# SGLang knobs with no effect here (there is no prefix cache, CUDA graph or async loading).
_WEIGHT_UPDATE_FLAGS = {"flush_cache", "torch_empty_cache", "is_async", "keep_pause", "recapture_cuda_graph"}


def _object(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BadRequest(f"{path}: must be a JSON object, got {_json_type(value)}")
    return value


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _reject_unknown(body: dict[str, Any], known: set[str], path: str) -> None:
    for key in body:
        if key not in known:
            where = f"{path}.{key}" if path else key
            raise BadRequest(f"{where}: unknown field")


def _require_neutral(body: dict[str, Any], neutral: dict[str, tuple[Any, ...]], path: str) -> None:
    for key, allowed in neutral.items():
        value = body.get(key)
        # bool is an int in Python: true must not pass for 1.
        if value is None or any(value == a and isinstance(value, bool) == isinstance(a, bool) for a in allowed):
            continue
        where = f"{path}.{key}" if path else key
        shown = ", ".join(json.dumps(a) for a in (None, *allowed))
        raise BadRequest(f"{where}: not supported by this server; only {shown} accepted, got {value!r}")


def _int(value: Any, path: str, minimum: int | None = None) -> int:
    # JSON true/false are Python ints; an integer field must not accept them.
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"{path}: must be an integer, got {_json_type(value)} {value!r}")
    number = int(value)
    if minimum is not None and number < minimum:
        raise BadRequest(f"{path}: must be >= {minimum}, got {number}")
    return number


def _float(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise BadRequest(f"{path}: must be a finite number, got {_json_type(value)} {value!r}")
    return float(value)


def _bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise BadRequest(f"{path}: must be a boolean, got {_json_type(value)} {value!r}")
    return value


def _token_ids(value: Any, path: str, vocab_size: int) -> list[int]:
    if not isinstance(value, list):
        raise BadRequest(f"{path}: must be an array of token ids, got {_json_type(value)}")
    ids = []
    for i, item in enumerate(value):
        if isinstance(item, list):
            raise BadRequest(f"{path}: batched input (an array of arrays) is not supported; one prompt per request")
        token = _int(item, f"{path}[{i}]", minimum=0)
        if token >= vocab_size:
            raise BadRequest(f"{path}[{i}]: token id {token} is outside the vocabulary (size {vocab_size})")
        ids.append(token)
    return ids


def parse_sampling(value: Any, vocab_size: int) -> SamplingRequest:
    path = "sampling_params"
    body = {} if value is None else _object(value, path)
    _reject_unknown(body, _SAMPLING_FIELDS | set(_NEUTRAL_SAMPLING) | _IGNORED_SAMPLING, path)
    if body.get("stop") not in (None, "", []):
        raise BadRequest(f"{path}.stop: stop strings are not supported by this server; use stop_token_ids")
    _require_neutral(body, _NEUTRAL_SAMPLING, path)

    max_new_tokens = body.get("max_new_tokens")
    if max_new_tokens is None:
        max_new_tokens = _DEFAULT_MAX_NEW_TOKENS
    max_new_tokens = _int(max_new_tokens, f"{path}.max_new_tokens", minimum=0)

    temperature = body.get("temperature")
    temperature = 1.0 if temperature is None else _float(temperature, f"{path}.temperature")
    if temperature < 0:
        raise BadRequest(f"{path}.temperature: must be >= 0, got {temperature}")

    top_p = body.get("top_p")
    top_p = 1.0 if top_p is None else _float(top_p, f"{path}.top_p")
    if not 0.0 < top_p <= 1.0:
        raise BadRequest(f"{path}.top_p: must be in (0, 1], got {top_p}")

    top_k = body.get("top_k")
    top_k = -1 if top_k is None else _int(top_k, f"{path}.top_k")
    if top_k < -1 or top_k == 0:
        raise BadRequest(f"{path}.top_k: must be -1 (disabled) or >= 1, got {top_k}")

    stop_ids = body.get("stop_token_ids")
    stop_ids = frozenset(_token_ids([] if stop_ids is None else stop_ids, f"{path}.stop_token_ids", vocab_size))

    seed = body.get("sampling_seed")
    seed = None if seed is None else _int(seed, f"{path}.sampling_seed")
    if seed is not None and not -(2**63) <= seed < 2**64:
        raise BadRequest(f"{path}.sampling_seed: must fit in 64 bits, got {seed}")

    def flag(key: str, default: bool) -> bool:
        given = body.get(key)
        return default if given is None else _bool(given, f"{path}.{key}")

    return SamplingRequest(
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        stop_token_ids=stop_ids,
        sampling_seed=seed,
        ignore_eos=flag("ignore_eos", False),
        no_stop_trim=flag("no_stop_trim", False),
        skip_special_tokens=flag("skip_special_tokens", True),
    )


def parse_generate(value: Any, vocab_size: int) -> GenerateRequest:
    body = _object(value, "body")
    _reject_unknown(body, _GENERATE_FIELDS | set(_NEUTRAL_GENERATE) | _IGNORED_GENERATE, "")
    if body.get("stream"):
        raise BadRequest("stream: streaming is not supported by this server; send stream: false")
    _require_neutral(body, _NEUTRAL_GENERATE, "")

    rid = body.get("rid")
    if rid is not None and (not isinstance(rid, str) or not rid):
        raise BadRequest(f"rid: must be a non-empty string, got {_json_type(rid)} {rid!r}")

    input_ids, text = body.get("input_ids"), body.get("text")
    if (input_ids is None) == (text is None):
        raise BadRequest("input_ids: exactly one of input_ids and text must be given")
    if input_ids is not None:
        input_ids = _token_ids(input_ids, "input_ids", vocab_size)
        if not input_ids:
            raise BadRequest("input_ids: must not be empty")
    elif not isinstance(text, str) or not text:
        raise BadRequest(f"text: must be a non-empty string, got {_json_type(text)}")

    return_logprob = body.get("return_logprob")
    return GenerateRequest(
        rid=rid,
        input_ids=input_ids,
        text=text,
        sampling=parse_sampling(body.get("sampling_params"), vocab_size),
        return_logprob=False if return_logprob is None else _bool(return_logprob, "return_logprob"),
        lora_path=_adapter_name(body.get("lora_path")),
    )


def _adapter_name(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, list):
        raise BadRequest("lora_path: a list of adapters goes with batched input, which this server does not support; give one adapter name")
    if not isinstance(value, str) or not value:
        raise BadRequest(f"lora_path: must be the name of a loaded LoRA adapter (a non-empty string), got {_json_type(value)} {value!r}")
    return value


def _non_empty_string(body: dict[str, Any], key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value:
        raise BadRequest(f"{key}: must be a non-empty string, got {_json_type(value)} {value!r}")
    return value


def parse_load_lora(value: Any) -> LoadLoraRequest:
    body = _object(value, "body")
    _reject_unknown(body, {"lora_name", "lora_path", "pinned"}, "")
    # pinned keeps an adapter in SGLang's GPU slot pool; this server has no pool, so it changes nothing.
    if body.get("pinned") is not None:
        _bool(body["pinned"], "pinned")
    return LoadLoraRequest(lora_name=_non_empty_string(body, "lora_name"), lora_path=_non_empty_string(body, "lora_path"))


def parse_unload_lora(value: Any) -> str:
    """The lora_name of an /unload_lora_adapter body."""
    body = _object(value, "body")
    _reject_unknown(body, {"lora_name"}, "")
    return _non_empty_string(body, "lora_name")


def parse_weight_update(value: Any) -> WeightUpdateRequest:
    body = _object(value, "body")
    # SGLang's other knobs are accepted so its clients work unchanged, and type-checked.
    _reject_unknown(body, _WEIGHT_UPDATE_FIELDS | _WEIGHT_UPDATE_FLAGS | {"load_format", "token_step"}, "")
    model_path = body.get("model_path")
    if not isinstance(model_path, str) or not model_path:
        raise BadRequest(f"model_path: must be a non-empty string, got {_json_type(model_path)}")
    version = body.get("weight_version")
    if version is not None and not isinstance(version, str):
        raise BadRequest(f"weight_version: must be a string, got {_json_type(version)} {version!r}")
    load_format = body.get("load_format")
    if load_format not in (None, "auto", "safetensors"):
        raise BadRequest(f"load_format: only safetensors directories are supported, got {load_format!r}")
    for key in _WEIGHT_UPDATE_FLAGS:
        if body.get(key) is not None:
            _bool(body[key], key)
    abort_all = body.get("abort_all_requests")
    return WeightUpdateRequest(
        model_path=model_path,
        weight_version=version,
        abort_all_requests=False if abort_all is None else _bool(abort_all, "abort_all_requests"),
    )


def parse_abort(value: Any) -> AbortRequest:
    body = {} if value is None else _object(value, "body")
    _reject_unknown(body, {"rid", "abort_all", "abort_message", "finished_reason"}, "")
    rid = body.get("rid")
    if rid is not None and not isinstance(rid, str):
        raise BadRequest(f"rid: must be a string, got {_json_type(rid)} {rid!r}")
    abort_all = body.get("abort_all")
    return AbortRequest(rid=rid or None, abort_all=False if abort_all is None else _bool(abort_all, "abort_all"))


def parse_pause_mode(value: Any) -> str:
    body = {} if value is None else _object(value, "body")
    _reject_unknown(body, {"mode"}, "")
    mode = body.get("mode") or "abort"
    if mode not in PAUSE_MODES:
        raise BadRequest(f"mode: must be one of {', '.join(PAUSE_MODES)}, got {mode!r}")
    return mode
