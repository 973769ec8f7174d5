"""API candidates without a base URL default the way the vendors' SDKs do.

An `openai_chat` candidate with no `base_url` uses `$OPENAI_BASE_URL` or the public endpoint, with
the key in `OPENAI_API_KEY`; an `anthropic_messages` one `$ANTHROPIC_BASE_URL` or the public
endpoint, with `ANTHROPIC_API_KEY`. Applied when the spec is parsed, so the frozen manifest records
the URL actually used (and only the key variable's name). A candidate that names its own
`base_url` but no `api_key_env` (a local server) sends no key.
"""

from __future__ import annotations

import os
from typing import Any

SDK_DEFAULTS: dict[str, tuple[str, str, str]] = {
    "openai_chat": ("OPENAI_BASE_URL", "https://api.openai.com/v1", "OPENAI_API_KEY"),
    "anthropic_messages": ("ANTHROPIC_BASE_URL", "https://api.anthropic.com", "ANTHROPIC_API_KEY"),
}
"""Per API kind: (base-URL variable, public endpoint, API-key variable)."""


def with_sdk_defaults(data: Any) -> Any:
    """A candidate's raw spec mapping with the SDK defaults filled in (other input unchanged)."""
    if not isinstance(data, dict) or data.get("kind") not in SDK_DEFAULTS:
        return data
    if data.get("base_url") is None:
        url_env, public_url, key_env = SDK_DEFAULTS[data["kind"]]
        data = {**data, "base_url": os.environ.get(url_env) or public_url}
        if data.get("api_key_env") is None:
            data["api_key_env"] = key_env
    return data
