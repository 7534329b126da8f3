"""Burst's Python client, standard library only.

Training loops with the tinker SDK's names (`import burst as tinker`:
ServiceClient, TrainingClient, SamplingClient, types.Datum, ModelInput,
TensorData, AdamParams, SamplingParams, futures with .result()), and the
rest of Burst's API (BurstClient: files, jobs, sweeps, evals, deployments,
completions, usage). docs/loops.md.
"""
from . import types
from ._http import APIError
from .loops import (APIFuture, RequestFailedError, RestClient, SamplingClient, ServiceClient, Tokenizer,
                    TrainingClient)
from .platform import BurstClient
from .types import (AdamParams, Datum, EncodedTextChunk, ForwardBackwardOutput, LoraConfig, ModelInput,
                    SampledSequence, SampleResponse, SamplingParams, TensorData)

__all__ = ["APIError", "APIFuture", "AdamParams", "BurstClient", "Datum", "EncodedTextChunk", "ForwardBackwardOutput",
           "LoraConfig", "ModelInput", "RequestFailedError", "RestClient", "SampleResponse", "SampledSequence",
           "SamplingClient", "SamplingParams", "ServiceClient", "TensorData", "Tokenizer", "TrainingClient", "types"]
