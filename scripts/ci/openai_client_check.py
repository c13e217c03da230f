"""Exercise `kvw serve --openai` with the official `openai` Python client.

Usage: openai_client_check.py BASE_URL   (e.g. http://127.0.0.1:8080/v1)

Checks completions, chat completions, streaming of both, usage counts, the
per-tenant prefix cache, and that the SDK raises its typed errors for a
wrong key (401), an unknown model (404) and an absurd max_tokens (400).
Exits non-zero with one line on the first failed check.
"""

import sys

import openai

base = sys.argv[1]
a = openai.OpenAI(base_url=base, api_key="interop-a", max_retries=0)
b = openai.OpenAI(base_url=base, api_key="interop-b", max_retries=0)


def check(cond, what):
    if not cond:
        print(f"FAILED: {what}")
        sys.exit(1)
    print(f"ok: {what}")


models = a.models.list()
check([m.id for m in models.data] == ["kvw-echo"], "models.list names the served model")

prompt = "^" + "interop echo " * 40
c = a.completions.create(model="kvw-echo", prompt=prompt, max_tokens=12)
check(c.choices[0].text == prompt[1:13], f"completion echoes the prompt: {c.choices[0].text!r}")
check(c.choices[0].finish_reason == "length", "a completion cut by max_tokens says 'length'")
check(c.usage.prompt_tokens == len(prompt) and c.usage.completion_tokens == 12, "usage counts tokens")

chat = a.chat.completions.create(
    model="kvw-echo", messages=[{"role": "user", "content": "^hello from the sdk"}], max_tokens=5
)
check(chat.choices[0].message.content == "hello", f"chat echoes: {chat.choices[0].message.content!r}")
check(chat.choices[0].message.role == "assistant", "chat answers as the assistant")

parts = [
    ch.choices[0].text
    for ch in a.completions.create(model="kvw-echo", prompt=prompt, max_tokens=12, stream=True)
]
check("".join(parts) == prompt[1:13] and len(parts) == 12, "a streamed completion arrives token by token")

deltas = [
    ch.choices[0].delta.content or ""
    for ch in b.chat.completions.create(
        model="kvw-echo", messages=[{"role": "user", "content": "^streamed chat"}], max_tokens=8, stream=True
    )
]
check("".join(deltas) == "streamed", f"a streamed chat arrives: {''.join(deltas)!r}")

again = a.completions.create(model="kvw-echo", prompt=prompt, max_tokens=1)
details = again.usage.prompt_tokens_details
check(details is not None and details.cached_tokens > 0, "the tenant's own prefix is cached")
other = b.completions.create(model="kvw-echo", prompt=prompt, max_tokens=1)
details = other.usage.prompt_tokens_details
check(details is not None and details.cached_tokens == 0, "another tenant's prefix is not")

bad = openai.OpenAI(base_url=base, api_key="wrong-key", max_retries=0)
try:
    bad.completions.create(model="kvw-echo", prompt="x", max_tokens=1)
    check(False, "a wrong key is refused")
except openai.AuthenticationError as e:
    check(e.status_code == 401, "a wrong key raises AuthenticationError (401)")
try:
    a.completions.create(model="no-such-model", prompt="x", max_tokens=1)
    check(False, "an unknown model is refused")
except openai.NotFoundError as e:
    check(e.status_code == 404, "an unknown model raises NotFoundError (404)")
try:
    a.completions.create(model="kvw-echo", prompt="x", max_tokens=10**9)
    check(False, "an absurd max_tokens is refused")
except openai.BadRequestError as e:
    check(e.status_code == 400 and "max_tokens" in str(e), "an absurd max_tokens raises BadRequestError (400)")
print("openai client interop: all checks passed")
