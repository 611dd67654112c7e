"""Convert a GGUF checkpoint into a Hugging Face safetensors folder (run as a script).

Usage: ``python _gguf.py GGUF_FILE OUT_DIR [--dtype bfloat16] [--chat-template FILE]``.

Without ``--chat-template`` the chat template stored in the GGUF (``tokenizer.chat_template``)
is kept. Either way the template must render tool definitions (checked by rendering a request
with a probe tool), and the saved tokenizer carries it (``chat_template.jinja``). The last line
of stdout is a JSON report (``out_dir``, the GGUF's ``general.name``, where the template came
from).

It runs in a child process with the server's Python, so the parent (a test session, the CLI)
never imports torch or transformers, and a separate server venv needs nothing of ours. It
imports only the standard library, torch, transformers and ``gguf`` (for the file's
``general.name``).

A GGUF-loaded model cannot be saved as it is (transformers calls its quantizer "not
serializable"), so the model is rebuilt from the GGUF's config, the dequantised tensors are
loaded into it, and that plain model is saved.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

_PROBE_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "taskcal_probe_tool",
        "description": "Probe whether the chat template renders tools.",
        "parameters": {
            "type": "object",
            "properties": {"x": {"type": "string"}},
            "required": ["x"],
        },
    },
}


def convert(
    gguf_file: Path, out_dir: Path, *, dtype: str, chat_template: str | None
) -> dict[str, object]:
    """Write config, generation config, safetensors weights and tokenizer to *out_dir*.

    Returns:
        The report: ``out_dir``, ``general_name`` and ``chat_template`` (``"gguf"`` or
        ``"given"``).
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    folder, name = str(gguf_file.parent), gguf_file.name
    torch_dtype = getattr(torch, dtype)
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    loaded = load_gguf_checkpoint(str(gguf_file), return_tensors=True, model_to_load=model)
    state = {key: torch.as_tensor(value) for key, value in loaded["tensors"].items()}
    result = model.load_state_dict(state, strict=False)
    missing = [key for key in result.missing_keys if key != "lm_head.weight"]
    if missing or result.unexpected_keys:
        msg = (
            f"GGUF file {str(gguf_file)!r} does not match its config: missing {missing!r}, "
            f"unexpected {list(result.unexpected_keys)!r}."
        )
        raise RuntimeError(msg)
    if "lm_head.weight" in result.missing_keys and not config.tie_word_embeddings:
        msg = f"GGUF file {str(gguf_file)!r} has no output weights and untied embeddings."
        raise RuntimeError(msg)
    model.tie_weights()
    model = model.to(torch_dtype)
    model.config.dtype = torch_dtype
    model.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id,
        eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id,
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)

    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    elif not tokenizer.chat_template:
        msg = f"GGUF file {str(gguf_file)!r} carries no chat template (tokenizer.chat_template)."
        raise RuntimeError(msg)
    check_tool_rendering(tokenizer)
    tokenizer.save_pretrained(out_dir)
    return {
        "out_dir": str(out_dir),
        "general_name": gguf_general_name(gguf_file),
        "chat_template": "gguf" if chat_template is None else "given",
    }


def check_tool_rendering(tokenizer: object) -> None:
    """Fail unless the tokenizer's chat template renders a tool's name and description."""
    text = tokenizer.apply_chat_template(  # type: ignore[attr-defined]
        [{"role": "user", "content": "Hello."}],
        tools=[_PROBE_TOOL],
        tokenize=False,
        add_generation_prompt=True,
    )
    function = _PROBE_TOOL["function"]
    if function["name"] not in text or function["description"] not in text:
        msg = (
            "the chat template does not render tool definitions (a request with the tool "
            f"{function['name']!r} rendered as {text!r}); pass a template that does."
        )
        raise RuntimeError(msg)


def gguf_general_name(gguf_file: Path) -> str | None:
    """The GGUF's ``general.name`` metadata, or ``None`` when it has none."""
    from gguf import GGUFReader

    field = GGUFReader(str(gguf_file)).fields.get("general.name")
    if field is None or not field.data:
        return None
    return bytes(field.parts[field.data[0]]).decode("utf-8")


def main() -> None:
    """Parse the command line and convert."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("gguf_file", type=Path)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--chat-template", type=Path, default=None)
    args = parser.parse_args()
    template = args.chat_template.read_text(encoding="utf-8") if args.chat_template else None
    report = convert(args.gguf_file, args.out_dir, dtype=args.dtype, chat_template=template)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
