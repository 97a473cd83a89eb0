"""How split GGUF models are named (gguf-split's `x-00001-of-00003.gguf`), shared by the
importer, the scan of local stores and the remote reader. No `gguf` import: the CLI's
plan path asks it of every `--model` name."""

from __future__ import annotations

import re

SPLIT_NAME = re.compile(r"^(?P<prefix>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")


def shard_names(name: str) -> list[str] | None:
    """Every part's file name of a split model named like gguf-split does
    (`x-00001-of-00003.gguf`), in order; None for a single file. Used wherever a split
    model is found or fetched, so all agree with how the importer reads one."""
    match = SPLIT_NAME.match(name)
    if match is None:
        return None
    count = int(match["count"])
    return [f"{match['prefix']}-{i:05d}-of-{count:05d}.gguf" for i in range(1, count + 1)]


def is_first_shard(name: str) -> bool:
    """A single file, or the first part of a split model (the one to import)."""
    parts = shard_names(name)
    return parts is None or parts[0] == name
