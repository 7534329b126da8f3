"""The Tinker cookbook's own training loops against Burst: its supervised
loop (tinker_cookbook.supervised.train, the loop of its sl_basic recipe) and
its RL loop (tinker_cookbook.rl.train, rl_basic's), unchanged, set up only
through chz's command line, as the recipes are. What differs from the
recipes' defaults is configuration: the base URL (Burst's), the model (one
Burst has locally; its folder holds the tokenizer the cookbook loads), the
cookbook renderer of that model's family, and the data (Burst's
support-ticket conversations for the supervised loop; the cookbook's own
arithmetic environment for RL, which needs no download).

    .venv/bin/python examples/cookbook/recipes.py make-model --models DIR
    .venv/bin/python examples/cookbook/recipes.py sl|rl --models DIR --model NAME --out DIR [key=value ...]

make-model writes DIR/tiny-qwen3: a Qwen 3 model with random weights that
transformers builds from a config (no download), the Qwen chat format's
byte-level BPE tokenizer of tests/fixtures/tiny-bpe beside it, and its
catalog entry (DIR/tiny-qwen3.model.json: serverless up to LoRA rank 8).

Run from anywhere: the loop runs with DIR as its working folder, so NAME is
both the model Burst serves (`burst serve --model-root DIR`) and the local
folder the cookbook's get_tokenizer reads. TINKER_BASE_URL and
TINKER_API_KEY ("tml-" + a Burst key) say where Burst is. key=value pairs
override or extend the settings below (chz's syntax, e.g. max_steps=3).
`make cookbook` (scripts/cookbook.sh) runs both against the embedded
control plane.
"""
import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
# The cookbook renderer of each local family Burst ships a recipe for: the
# Qwen 3 chat format (ChatML, no <think> block) of the 2507 instruct models.
RENDERER = "qwen3_instruct"


MODEL = "tiny-qwen3"
MODEL_CONFIG = {"model_type": "qwen3", "vocab_size": 279, "hidden_size": 64, "intermediate_size": 128,
                "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
                "max_position_embeddings": 1024, "tie_word_embeddings": True, "eos_token_id": 278}
CATALOG = {"description": "a 2-layer Qwen 3 with random weights (examples/cookbook/recipes.py make-model)",
           "max_seq_len": 1024, "serverless": True, "serverless_max_lora_rank": 8}


def make_model(models):
    """DIR/tiny-qwen3 and its catalog entry; nothing done if it is there."""
    out = os.path.join(models, MODEL)
    if os.path.exists(os.path.join(out, "model.safetensors")):
        return out
    os.makedirs(models, exist_ok=True)
    config = os.path.join(models, MODEL + ".config.json")
    with open(config, "w") as f:
        json.dump(MODEL_CONFIG, f)
    subprocess.run([sys.executable, os.path.join(ROOT, "tests", "reference", "hf_ref.py"), "make", "--config",
                    config, "--out", out, "--std", "0.02"], check=True, stdout=subprocess.DEVNULL)
    os.remove(config)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(ROOT, "tests", "fixtures", "tiny-bpe", name), out)
    with open(os.path.join(models, MODEL + ".model.json"), "w") as f:
        json.dump(CATALOG, f, indent=2)
    return out


def sl_settings(model, out, base_url):
    """The supervised loop: sl_basic's settings, with Burst's data and model."""
    common = "dataset_builder.common_config."
    return [
        f"model_name={model}",
        "recipe_name=burst_cookbook_sl",
        f"log_path={out}",
        f"base_url={base_url}",
        f"renderer_name={RENDERER}",
        "dataset_builder=tinker_cookbook.supervised.data:FromConversationFileBuilder",
        f"dataset_builder.file_path={os.path.join(ROOT, 'examples', 'support', 'train.jsonl')}",
        "dataset_builder.test_size=16",
        f"{common}model_name_for_tokenizer={model}",
        f"{common}renderer_name={RENDERER}",
        f"{common}max_length=512",
        f"{common}batch_size=16",
        "learning_rate=1e-2",
        "lora_rank=8",
        "lr_schedule=linear",
        "num_epochs=1",
        "max_steps=8",
        "eval_every=4",
        "save_every=4",
    ]


def rl_settings(model, out, base_url):
    """The RL loop: rl_basic's settings, with the cookbook's arithmetic
    environment (problems it makes itself) in place of GSM8K's download."""
    data = "dataset_builder."
    return [
        f"model_name={model}",
        "recipe_name=burst_cookbook_rl",
        f"log_path={out}",
        f"base_url={base_url}",
        f"renderer_name={RENDERER}",
        "dataset_builder=tinker_cookbook.recipes.math_rl.arithmetic_env:ArithmeticDatasetBuilder",
        f"{data}model_name_for_tokenizer={model}",
        f"{data}renderer_name={RENDERER}",
        f"{data}batch_size=4",
        f"{data}group_size=4",
        f"{data}n_batches=4",
        "learning_rate=4e-5",
        "lora_rank=8",
        "max_tokens=8",
        "eval_every=0",
        "save_every=2",
    ]


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("loop", choices=["make-model", "sl", "rl"])
    ap.add_argument("--models", required=True, help="the folder Burst serves models from (--model-root)")
    ap.add_argument("--model", default=MODEL, help="a model folder under --models (default %(default)s)")
    ap.add_argument("--out", help="the cookbook's log folder (metrics.jsonl, checkpoints.jsonl)")
    args, extra = ap.parse_known_args(argv)
    if args.loop == "make-model":
        print(make_model(args.models))
        return
    if not args.out:
        ap.error("--out is required for sl and rl")
    base_url = os.environ.get("TINKER_BASE_URL")
    if not base_url:
        ap.error("TINKER_BASE_URL is not set (Burst's URL, e.g. http://127.0.0.1:8080)")
    if not os.path.isdir(os.path.join(args.models, args.model)):
        ap.error(f"--model: no folder {args.model} under {args.models}")
    out = os.path.abspath(args.out)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the tokenizer comes from the model's folder
    os.chdir(args.models)

    import chz
    if args.loop == "sl":
        from tinker_cookbook.supervised import train
        settings = sl_settings(args.model, out, base_url)
    else:
        from tinker_cookbook.rl import train
        settings = rl_settings(args.model, out, base_url)
    config = chz.Blueprint(train.Config).make_from_argv(settings + extra)
    asyncio.run(train.main(config))


if __name__ == "__main__":
    main(sys.argv[1:])
