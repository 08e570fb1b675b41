"""
A real inference server for CPU runs and tests: torch + transformers serving a Hugging Face model
directory through SGLang's native HTTP API (the subset trajflow's SGLang client uses), token-in /
token-out, with continuous batching over a KV cache. Start it with `python -m
trajflow_py.model_server --model DIR --port P`; the API is described in http_api.py and
protocol.py.
"""
