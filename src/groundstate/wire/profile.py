"""Hot tables from token frequencies: the 127 most frequent ids of a corpus get one-byte forms."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from .constants import HOT_SIZE
from .vocab import Vocabulary


def hot_table(vocabulary: Vocabulary, texts: Iterable[str]) -> dict[str, Any]:
    """The profile: vocabulary name, token count, and the hot table (most frequent first; ties by id).

    A corpus with fewer than 127 distinct tokens is padded with the lowest unused ids.
    """
    counts: Counter[int] = Counter()
    for text in texts:
        counts.update(vocabulary.encode(text))
    ranked = [token for token, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))][:HOT_SIZE]
    used = set(ranked)
    filler = (i for i in range(2 * HOT_SIZE + len(used)) if i not in used)
    while len(ranked) < HOT_SIZE:
        ranked.append(next(filler))
    return {"vocabulary": vocabulary.name, "tokens": sum(counts.values()), "hot_table": ranked}
