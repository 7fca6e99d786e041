"""pydantic's validation errors in the project's words: what is wrong, what is allowed.

pydantic's own messages ("Input should be a valid integer", "String should match pattern
'^[A-Za-z0-9_]...$'") name the library's types and regular expressions; a user needs the
rule. Each error type pydantic raises for the spec's fields gets a sentence here, and each
pattern the models use gets words (tests/test_spec.py checks that every pattern has them).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# The regular expressions of the spec's and the profiles' string types, in words.
PATTERN_WORDS: dict[str, str] = {
    r"^[A-Za-z0-9_.,:+=@%/\[\]-]+$": "one word of letters, digits and _ . , : + = @ % / [ ] - "
    "(no spaces or quotes)",
    r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$": "1 to 128 letters, digits, _ . or -, starting "
    "with a letter, a digit or _",
    r"^[A-Za-z_][A-Za-z0-9_]*$": "an environment variable name: letters, digits and _, not "
    "starting with a digit",
    r"^/[^\x00\n]*$": "an absolute path (starting with /) on one line",
    r"^/[^\x00\n:,]*$": "an absolute path (starting with /) without : or , (docker's mount "
    "separators)",
    r"^[0-9]+[kKmMgGtT]?[bB]?$": "a size such as 64G, 512M or 1024 (SLURM's --mem: K, M, G, T)",
    r"^(UNLIMITED|INFINITE|[0-9]+|[0-9]+:[0-9]{2}(:[0-9]{2})?|[0-9]+-[0-9]+(:[0-9]{2}){0,2})$": (
        "a SLURM time limit: MINUTES, MINUTES:SECONDS, HOURS:MINUTES:SECONDS, DAYS-HOURS, "
        "DAYS-HOURS:MINUTES, DAYS-HOURS:MINUTES:SECONDS or UNLIMITED"
    ),
    r"^[A-Za-z0-9][A-Za-z0-9_.:/@-]*$": "an image reference such as registry.example.com/team/"
    "name:tag or name@sha256:DIGEST",
    r"^sha256:[0-9a-f]{64}$": "an image id: sha256: and 64 lowercase hex digits, as `docker "
    "image inspect --format '{{.Id}}'` prints it",
    r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$": "1 to 64 letters, digits, _ . or -, starting with a "
    "letter, a digit or _",
    r"^[A-Za-z0-9][A-Za-z0-9.+!*_-]*$": "a version such as 0.5.0, 2.4.0+rocm6.2 or 0.10.*",
    r"^(\+\+|\+|~)?[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*(@[A-Za-z0-9_.:]*)?$": (
        "a Hydra override key such as actor_rollout_ref.actor.optim.lr, optionally with a "
        "leading + ++ or ~ and an @package"
    ),
    r"^[A-Za-z0-9_][A-Za-z0-9_./-]*$": "a relative path of letters, digits, _ . / and -",
    r"^[A-Za-z0-9_-]+$": "a group name of letters, digits, _ and -",
    r"^[A-Za-z0-9_.:-]+$": "an HCA name such as mlx5_0 or mlx5_0:1",
    r"^[A-Za-z0-9_.:^=,-]+$": "an interface name or NCCL's list syntax (ib0, ^docker,lo, =eth0)",
    r"^[A-Za-z_][A-Za-z0-9_.]*$": "a Python module path such as verl.trainer.main_ppo",
    r"^[^\x00\n]+$": "one line of text, not empty",
    r"^[A-Za-z0-9_.@/-]+$": "a Hydra config name such as ppo_trainer",
    r"^[A-Za-z0-9_.-]+$": "an argument name of letters, digits, _ . and - (without the --)",
    r"^[A-Za-z0-9_-]{1,32}$": "1 to 32 letters, digits, _ or -",
    r"^[A-Za-z0-9_][A-Za-z0-9_.@-]*$": "an SSH host alias of letters, digits, _ . @ and -",
    r"^[A-Za-z0-9_./~-][A-Za-z0-9_./-]*$": "a path of letters, digits, _ . / - (~ first for "
    "the home directory)",
}

_KIND = {
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "string_type": "must be text (quote it in YAML if it looks like a number or a boolean)",
    "dict_type": "must be a mapping of key: value entries",
    "model_type": "must be a section of key: value entries",
    "model_attributes_type": "must be a section of key: value entries",
    "list_type": "must be a list ([a, b] or one `- item` per line)",
    "none_required": "must be left out or null",
}


# error type -> (the context key holding the bound, its words)
_BOUNDS = {
    "greater_than_equal": ("ge", "at least"),
    "greater_than": ("gt", "more than"),
    "less_than_equal": ("le", "at most"),
    "less_than": ("lt", "less than"),
}
# error type -> (the context key holding the length, its words, what is counted)
_LENGTHS = {
    "string_too_short": ("min_length", "at least", "characters"),
    "string_too_long": ("max_length", "at most", "characters"),
    "too_short": ("min_length", "at least", "entries"),
    "too_long": ("max_length", "at most", "entries"),
}


def _choices(expected: str) -> str:
    """pydantic's "'a', 'b' or 'c'" as "a, b, c"."""
    found = re.findall(r"'((?:[^'\\]|\\.)*)'", expected)
    return ", ".join(found) if found else expected


def in_our_words(err: Mapping[str, Any]) -> str:
    """The sentence for one pydantic error (its type, context and message)."""
    kind = str(err["type"])
    ctx: Mapping[str, Any] = err.get("ctx") or {}
    if kind in _KIND:
        return _KIND[kind]
    if kind == "string_pattern_mismatch":
        words = PATTERN_WORDS.get(str(ctx.get("pattern")))
        return f"must be {words}" if words else f"must match {ctx.get('pattern')}"
    if kind in ("literal_error", "enum"):
        return f"must be one of: {_choices(str(ctx.get('expected', '')))}"
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        tag = ctx.get("discriminator", "the kind").strip("'")
        return f"{tag} must be one of: {_choices(str(ctx.get('expected_tags', '')))}"
    if kind in _BOUNDS:
        key, words = _BOUNDS[kind]
        return f"must be {words} {ctx.get(key)}"
    if kind in _LENGTHS:
        key, words, unit = _LENGTHS[kind]
        return f"must have {words} {ctx.get(key)} {unit}"
    # value_error / assertion_error: the project's own validators wrote the message
    return str(err["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
