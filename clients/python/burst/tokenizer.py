"""A base model's tokenizer and chat template, run by Burst (/v1/tokenize,
/v1/detokenize): what a training loop needs to build token-level data when
the model's tokenizer files are not on the client's machine (the tinker
SDK's get_tokenizer loads them from the Hugging Face hub)."""

__all__ = ["Tokenizer"]


class Tokenizer:
    def __init__(self, client, model):
        self._client, self.model = client, model  # a BurstClient (the openai SDK's transport)

    def _post(self, path, body):
        return self._client.post(path, cast_to=object, body=body)

    def encode(self, text, add_special_tokens=False):
        return self._post("/tokenize", {"model": self.model, "text": text,
                                        "allow_special": bool(add_special_tokens)})["tokens"]

    def decode(self, tokens, skip_special_tokens=False):
        return self._post("/detokenize", {"model": self.model, "tokens": list(tokens),
                                          "skip_special": bool(skip_special_tokens)})["text"]

    def render_chat(self, messages, add_generation_prompt=False):
        """{tokens, weights, prompt_tokens, end_of_turn}: the model's chat template, loss weights on the assistant."""
        return self._post("/tokenize", {"model": self.model, "messages": messages,
                                        "add_generation_prompt": add_generation_prompt})

    def apply_chat_template(self, messages, add_generation_prompt=False, tokenize=True):
        return self.render_chat(messages, add_generation_prompt)["tokens"]
