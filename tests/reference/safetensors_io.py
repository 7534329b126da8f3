"""Minimal reader/writer of the safetensors format, written from the format
definition (no `safetensors` package needed).

File layout:
    u64 little-endian N            length of the JSON header in bytes
    N bytes of UTF-8 JSON          {name: {"dtype": "F32", "shape": [..],
                                           "data_offsets": [begin, end]},
                                    "__metadata__": {str: str}  (optional)}
    raw little-endian tensor data  offsets are relative to the start of this
                                   block (i.e. to byte 8 + N of the file)

Public functions:
    read_header(path)                   -> (header dict without __metadata__, metadata dict)
    load_file(path, upcast=False, names=None) -> {name: torch.Tensor}
    save_file(tensors, path, metadata=None)
    load_checkpoint(path, upcast=False) -> {name: torch.Tensor}
        path: a .safetensors file, a model.safetensors.index.json, or a folder
        holding model.safetensors or model.safetensors.index.json (sharded).
    save_sharded(tensors, folder, max_shard_bytes, metadata=None)
        writes model-0000i-of-0000n.safetensors + model.safetensors.index.json

`upcast=True` turns BF16/F16 tensors into float32 (other dtypes unchanged).
Only little-endian hosts are supported (as the format stores little-endian).
"""

import json
import os
import struct
import sys

import torch

if sys.byteorder != "little":  # pragma: no cover
    raise RuntimeError("safetensors_io.py supports little-endian hosts only")

# safetensors dtype string -> (torch dtype, element size in bytes)
_DTYPES = {
    "F64": (torch.float64, 8),
    "F32": (torch.float32, 4),
    "F16": (torch.float16, 2),
    "BF16": (torch.bfloat16, 2),
    "I64": (torch.int64, 8),
    "I32": (torch.int32, 4),
    "I16": (torch.int16, 2),
    "I8": (torch.int8, 1),
    "U8": (torch.uint8, 1),
    "BOOL": (torch.bool, 1),
}
_TORCH_TO_ST = {v[0]: k for k, v in _DTYPES.items()}

# Upper bound of a sane header; the reference implementation uses 100 MB.
_MAX_HEADER = 100 * 1000 * 1000


def _numel(shape):
    n = 1
    for s in shape:
        n *= int(s)
    return n


def read_header(path):
    """Return (tensors_header, metadata, data_start) of a safetensors file."""
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise ValueError(f"{path}: file too short for a safetensors header")
        (n,) = struct.unpack("<Q", raw)
        if n > _MAX_HEADER:
            raise ValueError(f"{path}: header length {n} is too large")
        text = f.read(n)
        if len(text) != n:
            raise ValueError(f"{path}: truncated header")
    header = json.loads(text.decode("utf-8"))
    if not isinstance(header, dict):
        raise ValueError(f"{path}: header is not a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    file_size = os.path.getsize(path)
    data_len = file_size - 8 - n
    for name, info in header.items():
        dt = info.get("dtype")
        if dt not in _DTYPES:
            raise ValueError(f"{path}: tensor {name!r} has unsupported dtype {dt!r}")
        begin, end = info["data_offsets"]
        want = _numel(info["shape"]) * _DTYPES[dt][1]
        if end - begin != want:
            raise ValueError(
                f"{path}: tensor {name!r} spans {end - begin} bytes, shape needs {want}")
        if begin < 0 or end > data_len:
            raise ValueError(f"{path}: tensor {name!r} lies outside the data block")
    return header, metadata, 8 + n


def load_file(path, upcast=False, names=None):
    """Read tensors of a safetensors file into CPU torch tensors.

    upcast: convert BF16/F16 to float32.
    names:  optional iterable of tensor names to read (default: all).
    """
    header, _, data_start = read_header(path)
    wanted = header.keys() if names is None else list(names)
    out = {}
    with open(path, "rb") as f:
        for name in wanted:
            if name not in header:
                raise KeyError(f"{path}: no tensor named {name!r}")
            info = header[name]
            dtype, _ = _DTYPES[info["dtype"]]
            shape = [int(s) for s in info["shape"]]
            begin, end = info["data_offsets"]
            if end == begin:
                t = torch.empty(shape, dtype=dtype)
            else:
                f.seek(data_start + begin)
                buf = bytearray(end - begin)
                got = f.readinto(buf)
                if got != end - begin:
                    raise ValueError(f"{path}: truncated data of {name!r}")
                t = torch.frombuffer(buf, dtype=dtype).reshape(shape)
            if upcast and dtype in (torch.float16, torch.bfloat16):
                t = t.to(torch.float32)
            out[name] = t
    return out


def save_file(tensors, path, metadata=None):
    """Write {name: tensor} to `path` in safetensors format.

    Tensors are moved to CPU and made contiguous; they are stored in name
    order. metadata: optional {str: str}.
    """
    names = sorted(tensors.keys())
    header = {}
    blobs = []
    offset = 0
    for name in names:
        t = tensors[name]
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name!r} is not a torch.Tensor")
        t = t.detach().to("cpu").contiguous()
        if t.dtype not in _TORCH_TO_ST:
            raise ValueError(f"{name!r}: dtype {t.dtype} is not supported")
        # Reinterpret as raw bytes (uint8 view keeps exact bit patterns).
        if t.numel() == 0:
            data = b""
        else:
            data = t.reshape(-1).view(torch.uint8).numpy().tobytes()
        header[name] = {
            "dtype": _TORCH_TO_ST[t.dtype],
            "shape": list(t.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        blobs.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    # Pad the header with spaces so the data block starts 8-byte aligned.
    text += b" " * ((8 - len(text) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def _index_path(path):
    if os.path.isdir(path):
        single = os.path.join(path, "model.safetensors")
        index = os.path.join(path, "model.safetensors.index.json")
        if os.path.exists(single):
            return single, None
        if os.path.exists(index):
            return None, index
        raise FileNotFoundError(
            f"{path}: neither model.safetensors nor model.safetensors.index.json")
    if path.endswith(".json"):
        return None, path
    return path, None


def load_checkpoint(path, upcast=False):
    """Load a single-file or sharded (index.json "weight_map") checkpoint."""
    single, index = _index_path(path)
    if single is not None:
        return load_file(single, upcast=upcast)
    with open(index) as f:
        weight_map = json.load(f)["weight_map"]
    folder = os.path.dirname(os.path.abspath(index))
    by_file = {}
    for name, fname in weight_map.items():
        by_file.setdefault(fname, []).append(name)
    out = {}
    for fname in sorted(by_file):
        out.update(load_file(os.path.join(folder, fname), upcast=upcast,
                             names=by_file[fname]))
    return out


def save_sharded(tensors, folder, max_shard_bytes, metadata=None):
    """Write tensors as HF-style shards plus model.safetensors.index.json."""
    os.makedirs(folder, exist_ok=True)
    shards, cur, cur_bytes = [], {}, 0
    for name in sorted(tensors):
        nb = tensors[name].numel() * tensors[name].element_size()
        if cur and cur_bytes + nb > max_shard_bytes:
            shards.append(cur)
            cur, cur_bytes = {}, 0
        cur[name] = tensors[name]
        cur_bytes += nb
    if cur:
        shards.append(cur)
    n = len(shards)
    weight_map = {}
    total = 0
    for i, shard in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{n:05d}.safetensors"
        save_file(shard, os.path.join(folder, fname), metadata=metadata)
        for name, t in shard.items():
            weight_map[name] = fname
            total += t.numel() * t.element_size()
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f,
                  indent=2, sort_keys=True)
