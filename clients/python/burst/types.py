"""The data types of training loops, named as the tinker SDK names them.

Plain dataclasses over lists (no numpy or torch needed); `to_json()` gives
the wire form Burst's /api/v1 reads.
"""
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Union

__all__ = ["AdamParams", "Datum", "EncodedTextChunk", "ForwardBackwardOutput", "LoraConfig", "ModelInput",
           "OptimStepResponse", "SampledSequence", "SampleResponse", "SamplingParams", "TensorData",
           "LossFnType", "SaveWeightsResponse", "SaveWeightsForSamplerResponse"]

LossFnType = str  # "cross_entropy" | "importance_sampling" | "ppo" | "cispo" | "dro"

_KEY_TO_DTYPE = {"target_tokens": "int64", "weights": "float32", "advantages": "float32", "logprobs": "float32",
                 "clip_low_threshold": "float32", "clip_high_threshold": "float32"}


@dataclass
class TensorData:
    data: List[Union[int, float]]
    dtype: str  # "int64" | "float32"
    shape: Optional[List[int]] = None

    def tolist(self):
        return list(self.data)

    def to_json(self):
        return {"data": list(self.data), "dtype": self.dtype, "shape": self.shape or [len(self.data)]}

    @classmethod
    def from_json(cls, j):
        return cls(data=j["data"], dtype=j["dtype"], shape=j.get("shape"))

    @classmethod
    def from_list(cls, values, dtype):
        return cls(data=list(values), dtype=dtype, shape=[len(values)])


@dataclass
class EncodedTextChunk:
    tokens: List[int]
    type: str = "encoded_text"

    @property
    def length(self):
        return len(self.tokens)


@dataclass
class ModelInput:
    chunks: List[EncodedTextChunk]

    @classmethod
    def from_ints(cls, tokens):
        return cls(chunks=[EncodedTextChunk(tokens=list(tokens))])

    @classmethod
    def empty(cls):
        return cls(chunks=[])

    def to_ints(self):
        return [t for c in self.chunks for t in c.tokens]

    def append_int(self, token):
        return ModelInput.from_ints(self.to_ints() + [token])

    @property
    def length(self):
        return sum(c.length for c in self.chunks)

    def to_json(self):
        return {"chunks": [{"tokens": list(c.tokens), "type": "encoded_text"} for c in self.chunks]}


@dataclass
class Datum:
    model_input: ModelInput
    loss_fn_inputs: Dict[str, TensorData] = field(default_factory=dict)

    def __post_init__(self):
        self.loss_fn_inputs = {k: v if isinstance(v, TensorData) else TensorData.from_list(
            v, _KEY_TO_DTYPE.get(k, "float32")) for k, v in self.loss_fn_inputs.items()}

    def to_json(self):
        return {"model_input": self.model_input.to_json(),
                "loss_fn_inputs": {k: v.to_json() for k, v in self.loss_fn_inputs.items()}}


@dataclass
class AdamParams:
    learning_rate: float = 1e-4
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-12
    weight_decay: float = 0.0
    grad_clip_norm: float = 0.0

    def to_json(self):
        return dict(self.__dict__)


@dataclass
class LoraConfig:
    rank: int = 32
    seed: Optional[int] = None
    train_unembed: bool = True
    train_mlp: bool = True
    train_attn: bool = True


@dataclass
class SamplingParams:
    max_tokens: Optional[int] = None
    seed: Optional[int] = None
    stop: Union[str, List[str], List[int], None] = None
    temperature: float = 1.0
    top_k: int = -1
    top_p: float = 1.0

    def to_json(self):
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class ForwardBackwardOutput:
    loss_fn_output_type: str
    loss_fn_outputs: List[Dict[str, TensorData]]
    metrics: Dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_json(cls, j):
        return cls(loss_fn_output_type=j.get("loss_fn_output_type", "ArrayRecord"),
                   loss_fn_outputs=[{k: TensorData.from_json(v) for k, v in o.items()} for o in j["loss_fn_outputs"]],
                   metrics=j.get("metrics", {}))


@dataclass
class OptimStepResponse:
    metrics: Optional[Dict[str, float]] = None


@dataclass
class SaveWeightsResponse:
    path: str


@dataclass
class SaveWeightsForSamplerResponse:
    path: Optional[str] = None
    sampling_session_id: Optional[str] = None


@dataclass
class SampledSequence:
    stop_reason: str
    tokens: List[int]
    logprobs: Optional[List[float]] = None


@dataclass
class SampleResponse:
    sequences: List[SampledSequence]
    prompt_logprobs: Optional[List[Optional[float]]] = None
    topk_prompt_logprobs: Optional[list] = None

    @classmethod
    def from_json(cls, j):
        return cls(sequences=[SampledSequence(s["stop_reason"], s["tokens"], s.get("logprobs")) for s in j["sequences"]],
                   prompt_logprobs=j.get("prompt_logprobs"), topk_prompt_logprobs=j.get("topk_prompt_logprobs"))
