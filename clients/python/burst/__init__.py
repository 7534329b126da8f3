"""Burst's Python client: what neither the tinker SDK nor the openai SDK
covers, built on the openai SDK's client. BurstClient (an openai.OpenAI
pointed at Burst): the SDK's files, fine-tuning jobs, completions and
models, plus sweeps, evaluations, deployments, usage, prices, workers and
Tokenizer, a base model's tokenizer and chat template run by Burst, for
training loops that build their data with it. Training loops themselves
use the tinker SDK (docs/loops.md). Errors are the openai SDK's
(openai.APIStatusError and its subclasses; burst.APIError is that class).
"""
from openai import APIStatusError as APIError

from .platform import BurstClient
from .tokenizer import Tokenizer

__all__ = ["APIError", "BurstClient", "Tokenizer"]
