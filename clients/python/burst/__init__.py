"""Burst's Python client, standard library only: what neither the tinker
SDK nor the openai SDK covers. BurstClient: files, jobs, sweeps,
evaluations, deployments, completions, usage, prices; Tokenizer: a base
model's tokenizer and chat template run by Burst, for training loops that
build their data with it. Training loops themselves use the tinker SDK
(docs/loops.md).
"""
from ._http import APIError
from .platform import BurstClient
from .tokenizer import Tokenizer

__all__ = ["APIError", "BurstClient", "Tokenizer"]
