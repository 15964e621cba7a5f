"""What reaches the model: Open WebUI 0.12.4's built-in memory against this product's inlet.

    python -m bench.builtin_memory --data ../shared/data/locomo/locomo10.json

LLM-free and deterministic. The same memory sets are given to both:

- LoCoMo (Maharana et al., 2024), conversations 5–9 (the held-out split of
  `bench.locomo_retrieval`): once the dialogue turns, once the observation facts, one pool
  per conversation (`bench.locomo_retrieval.turn_pool` / `observation_pool`), questions of
  categories 1–4 with cleaned evidence (`bench.locomo.load_qa`).
- PrefEval (Zhao et al., ICLR 2025) explicit preferences: all 1,000 preference/question pairs
  of the 20 topics, dealt to `PREFEVAL_USERS` users with a fixed seed (100 each, every topic
  shared out evenly: `prefeval_pools`); each question is asked of its own user, and its
  evidence is its own preference.

(a) Open WebUI's injection is reproduced by `owui_inject` from a reading of
`open_webui/utils/memory.py::add_memory_context` (0.12.4): the query is the last (up to 7)
user messages, here the question alone; every memory of type `user` goes to a "User Memory"
section; memories of type `context` found through path hints (`memory_path_hints`,
`search_memory_rows`, at most 4 per hint) go to "Memory Neighborhood"; the top 8 of the
vector search (`routers/memories.py::query_memory`, k = 8; Chroma's cosine space with
`RAG_RELEVANCE_THRESHOLD` 0.0 by default, so no threshold) not already shown go to "Relevant
Context"; each section is sorted case-insensitively by text, rendered as `- text` lines, the
User Memory part cut at `MEMORIES_USER_CHAR_LIMIT` and the rest at
`MEMORIES_CONTEXT_CHAR_LIMIT` characters (2,000 each, `open_webui/config.py`), and wrapped in
`<memory_context>` tags. Its vector search is exact cosine here over the same vectors as
ours: Open WebUI's default embedding model (`RAG_EMBEDDING_MODEL`, `config.py`) is
sentence-transformers/all-MiniLM-L6-v2, the model this project ships, so the project's
encoder embeds for both (Chroma's HNSW is approximate; on pools of a few hundred it returns
the exact neighbours in practice, which is assumed). The memory sets have no paths, so the
neighbourhood is empty. A memory's type is set by whoever writes it: `context` is the
default of the API and the settings page (`AddMemoryForm.type`); the background review's
prompt asks for `user` for "durable facts, preferences, or instructions about the user".
Both are measured (`owui_context`, `owui_user`).
`tests/integration/test_builtin_memory_equality.py` runs Open WebUI's own
`add_memory_context` on a sample and checks `owui_inject` gives the same text.

(b) Ours is the inlet's own block, `service.flows.context.recall`, over the same memories in
a migrated embedded PostgreSQL (`bench.locomo_retrieval.insert_pool`): once at the token
budget Open WebUI spent on the same question (`ours_matched`: `budget_tokens` = the tokens of
Open WebUI's whole injected text, `owui_context`), once at our default budget
(`ours_default`, 400 tokens). A diagnostic row, `ours_top8_ungated`, is our ranking's top 8
(`service.flows.context.retrieve` without the relevance bands) rendered as the inlet renders
items: the same number of items as Open WebUI's search, to tell the ranking from the gate.

Per question: evidence share (LoCoMo: share of the evidence dia_ids covered by the injected
items; PrefEval: 1 when its preference is injected), injected characters and tokens
(`service.core.tokens.estimate_tokens` for both), and the share of injected items that cover
no evidence. An Open WebUI line cut by its character limit is counted as injected but not as
evidence. Differences ours − Open WebUI are paired by question with a bootstrap 95 % interval
(`bench.locomo_retrieval.bootstrap_difference`, 2,000 resamples, seed 0).
Results: `bench/results/builtin_memory.json` and `.md`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from bench.locomo import DEFAULT_DATA_PATH, REPO_ROOT, load_conversations, load_qa
from bench.locomo_retrieval import (
    Pool,
    _embed_with_cache,
    _scrubbed_environment,
    bootstrap_difference,
    insert_pool,
    observation_pool,
    service_runtime,
    turn_pool,
)

__all__ = ["OwuiMemory", "main", "owui_inject", "path_hints", "path_rank", "prefeval_pools"]

DEFAULT_OUT_DIR = REPO_ROOT / "bench" / "results"
DEFAULT_PREFEVAL = REPO_ROOT.parent / "shared" / "data" / "prefeval" / "explicit_preference"
#: LoCoMo conversations measured: the held-out split of bench.locomo_retrieval.
HELD_OUT: tuple[int, ...] = (5, 6, 7, 8, 9)
#: `QueryMemoryForm(content=query, k=8)` in open_webui/utils/memory.py::add_memory_context.
OWUI_TOP_K = 8
#: MEMORIES_USER_CHAR_LIMIT / MEMORIES_CONTEXT_CHAR_LIMIT defaults, open_webui/config.py.
OWUI_USER_CHAR_LIMIT = 2_000
OWUI_CONTEXT_CHAR_LIMIT = 2_000
#: add_memory_context clamps both limits to at least this many characters.
OWUI_MIN_CHAR_LIMIT = 250
#: search_memory_rows(..., limit=4) per path hint, memory_path_hints(limit=6).
OWUI_NEIGHBOURS_PER_HINT = 4
OWUI_MAX_HINTS = 6
OPEN, CLOSE = "<memory_context>", "</memory_context>"
#: PrefEval users: 1,000 pairs over 20 topics → 10 users × (20 topics × 5 preferences).
PREFEVAL_USERS = 10
PREFEVAL_SEED = 0
#: Our default budget (service.config Settings.budget_tokens).
OUR_DEFAULT_BUDGET = 400


# -- Open WebUI's injection, reproduced ------------------------------------------------------


@dataclass(frozen=True)
class OwuiMemory:
    """One Open WebUI memory row as add_memory_context reads it."""

    id: str
    content: str
    type: str = "context"  #: "user" or "context" (models/memories.py: default "context")
    path: str | None = None
    updated_at: int = 0  #: epoch seconds

    @property
    def label(self) -> str:
        """`path: content` when there is a path, else the content (utils/memory.memory_label)."""
        return f"{self.path}: {self.content}" if self.path else self.content


def _parts(path: str | None) -> list[str]:
    return [p for p in (path or "").split("/") if p]


def _parent(path: str | None) -> str | None:
    parts = _parts(path)
    return "/".join(parts[:-1]) if len(parts) > 1 else None


def path_rank(memory_path: str | None, lookup: str | None) -> tuple[int, int] | None:
    """How near `memory_path` is to `lookup` (smaller is nearer), None when unrelated.

    Order of utils/memory.py::_path_rank: same path (0), a descendant (1, depth below), an
    ancestor (2, depth above), a sibling (3), sharing a segment (4, −shared), the same last
    segment (5). Paths are taken as already cleaned (no empty segments).
    """
    if not memory_path or not lookup:
        return None
    if memory_path == lookup:
        return (0, 0)
    if memory_path.startswith(lookup + "/"):
        return (1, len(_parts(memory_path)) - len(_parts(lookup)))
    if lookup.startswith(memory_path + "/"):
        return (2, len(_parts(lookup)) - len(_parts(memory_path)))
    if _parent(memory_path) and _parent(memory_path) == _parent(lookup):
        return (3, 0)
    shared = len(set(_parts(memory_path)) & set(_parts(lookup)))
    if shared:
        return (4, -shared)
    if _parts(memory_path)[-1:] == _parts(lookup)[-1:]:
        return (5, 0)
    return None


def path_hints(
    query: str, memories: Sequence[OwuiMemory], limit: int = OWUI_MAX_HINTS
) -> list[str]:
    """Paths the query names (utils/memory.py::memory_path_hints): the whole path or its last
    segment inside the lower-cased query, or any segment of 3+ characters; memories visited
    by (path, content, id), at most `limit` paths.
    """
    lowered = query.lower()
    if not lowered:
        return []
    hints: list[str] = []
    for memory in sorted(memories, key=lambda m: (m.path or "", m.content, m.id)):
        path = memory.path
        if not path or path in hints:
            continue
        parts = _parts(path)
        last = parts[-1] if parts else path
        if path.lower() in lowered or last.lower() in lowered:
            hints.append(path)
        elif any(len(p) >= 3 and p.lower() in lowered for p in parts):
            hints.append(path)
        if len(hints) >= limit:
            break
    return hints


def _neighbours(memories: Sequence[OwuiMemory], hint: str, limit: int) -> list[OwuiMemory]:
    """`context` memories related to path `hint` (utils/memory.py::search_memory_rows with
    path=hint, memory_type='context'), nearest path first, then newest, then id.
    """
    base = _parts(hint)[-1] if _parts(hint) else hint

    def related(m: OwuiMemory) -> bool:
        if path_rank(m.path, hint) is not None:
            return True
        haystack = f"{m.path or ''}\n{m.content}".lower()
        return hint.lower() in haystack or base.lower() in haystack

    rows = [m for m in memories if m.type == "context" and related(m)]

    def key(m: OwuiMemory) -> tuple[Any, ...]:
        return (path_rank(m.path, hint) or (9, 0), -m.updated_at, m.id)

    return sorted(rows, key=key)[: max(1, min(limit, 100))]


@dataclass(frozen=True)
class Injection:
    """What Open WebUI appends to the system message for one turn."""

    text: str  #: "" when nothing is injected
    whole: tuple[str, ...]  #: ids of the memories whose line is inside the text in full
    cut: tuple[str, ...]  #: ids of the memories whose line was cut by a character limit


def owui_inject(
    memories: Sequence[OwuiMemory],
    query: str,
    ranked_ids: Sequence[str],
    *,
    user_limit: int = OWUI_USER_CHAR_LIMIT,
    context_limit: int = OWUI_CONTEXT_CHAR_LIMIT,
) -> Injection:
    """Open WebUI 0.12.4's memory block for `query` (utils/memory.py::add_memory_context).

    Args:
        memories: all memories of the user.
        query: the joined user messages (add_memory_context: the last 7, last 4,000 chars).
        ranked_ids: the vector search's answer, best first (query_memory, k = 8).
        user_limit: the character limit of the user section (at least 250).
        context_limit: the character limit of the other sections (at least 250).
    """
    parts = _owui_parts(_owui_sections(memories, query, ranked_ids))
    if not parts:
        return Injection("", (), ())
    groups = (
        ([p for p in parts if p[0] == "[User Memory]"], max(OWUI_MIN_CHAR_LIMIT, user_limit)),
        ([p for p in parts if p[0] != "[User Memory]"], max(OWUI_MIN_CHAR_LIMIT, context_limit)),
    )
    whole: list[str] = []
    cut: list[str] = []
    pieces = []
    for group, limit in groups:
        piece, group_whole, group_cut = _owui_cut(group, limit)
        pieces.append(piece)
        whole += group_whole
        cut += group_cut
    text = "\n\n".join(pieces).strip()
    if not text:
        return Injection("", (), ())
    return Injection(f"{OPEN}\n{text}\n{CLOSE}", tuple(whole), tuple(cut))


def _owui_sections(
    memories: Sequence[OwuiMemory], query: str, ranked_ids: Sequence[str]
) -> dict[str, list[tuple[str, str]]]:
    """(label, id) per section: every user memory, the hinted paths' neighbours, then the
    vector search's top k; each memory in the first section that takes it.
    """
    by_id = {m.id: m for m in memories}
    sections: dict[str, list[tuple[str, str]]] = {"user": [], "neighborhood": [], "context": []}
    seen: set[str] = set()
    for m in sorted(
        (m for m in memories if m.type == "user"), key=lambda m: (m.path or "", m.updated_at, m.id)
    ):
        seen.add(m.id)
        sections["user"].append((m.label, m.id))
    for hint in path_hints(query, memories):
        for m in _neighbours(memories, hint, OWUI_NEIGHBOURS_PER_HINT):
            if m.id not in seen:
                seen.add(m.id)
                sections["neighborhood"].append((m.label, m.id))
    for memory_id in ranked_ids[:OWUI_TOP_K]:
        m = by_id[memory_id]
        if m.id in seen:
            continue
        seen.add(m.id)
        sections["user" if m.type == "user" else "context"].append((m.label, m.id))
    return sections


def _owui_parts(
    sections: dict[str, list[tuple[str, str]]],
) -> list[tuple[str, list[tuple[str, str]]]]:
    """Each non-empty section as (title line, [(line, id)]), in add_memory_context's order,
    its lines sorted case-insensitively.
    """
    parts: list[tuple[str, list[tuple[str, str]]]] = []
    for title, key in (
        ("User Memory", "user"),
        ("Memory Neighborhood", "neighborhood"),
        ("Relevant Context", "context"),
    ):
        if sections[key]:
            ordered = sorted(sections[key], key=lambda item: (item[0].casefold(), item[0]))
            parts.append((f"[{title}]", [(f"- {label}", mid) for label, mid in ordered]))
    return parts


def _owui_cut(
    group: list[tuple[str, list[tuple[str, str]]]], limit: int
) -> tuple[str, list[str], list[str]]:
    """The group's text cut at `limit` characters, the ids whose line is inside it in full,
    and the ids whose line the cut goes through.
    """
    # the group's text is its sections joined by a blank line, each "title\nline\nline"
    joined, spans = "", []
    for title, lines in group:
        joined += ("\n\n" if joined else "") + title
        for line, mid in lines:
            joined += "\n"
            spans.append((len(joined), len(joined) + len(line), mid))
            joined += line
    whole = [mid for start, end, mid in spans if end <= limit]
    cut = [mid for start, end, mid in spans if end > limit and start < limit]
    return joined[:limit], whole, cut


# -- PrefEval ---------------------------------------------------------------------------------


def prefeval_pools(
    folder: Path, *, users: int = PREFEVAL_USERS, seed: int = PREFEVAL_SEED
) -> tuple[list[Pool], dict[str, list[tuple[str, str]]]]:
    """The explicit preferences dealt to `users` users, and each user's (question, evidence id).

    Each topic's pairs are shuffled with `random.Random(seed)` and all are dealt round robin,
    topic after topic, so users hold equally many (1,000 / 10 = 100) and each topic's share
    differs between users by at most one (the 20 topics hold 31–62 pairs). A memory's text is
    its preference verbatim; it covers its own id `"<topic>#<index>"`.

    Raises:
        FileNotFoundError: when `folder` holds no `*.json` topic file.
    """
    files = sorted(folder.glob("*.json"))
    if not files:
        raise FileNotFoundError(f"no PrefEval topic files (*.json) in {folder}")
    rng = random.Random(seed)
    dealt: list[list[tuple[str, dict[str, Any]]]] = [[] for _ in range(users)]
    position = 0  # one deal across the topics: users differ by at most one preference
    for path in files:
        rows = json.loads(path.read_text(encoding="utf-8"))
        keyed = [(f"{path.stem}#{i}", row) for i, row in enumerate(rows)]
        rng.shuffle(keyed)
        for item in keyed:
            dealt[position % users].append(item)
            position += 1
    now = datetime(2025, 1, 2, tzinfo=UTC)
    pools, questions = [], {}
    for number, items in enumerate(dealt):
        owner = f"prefeval-user-{number}"
        pools.append(
            Pool(
                conversation_id=owner,
                kind="preferences",
                owner_id=owner,
                texts=[row["preference"] for _, row in items],
                covers=[frozenset({key}) for key, _ in items],
                dates=[now - timedelta(days=1)] * len(items),
                now=now,
            )
        )
        questions[owner] = [(row["question"], key) for key, row in items]
    return pools, questions


# -- running ----------------------------------------------------------------------------------


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _row(covers: Sequence[Collection[str]], evidence: Collection[str], text: str) -> dict[str, Any]:
    from service.core.tokens import estimate_tokens

    wanted = set(evidence)
    covered = {d for c in covers for d in c}
    unrelated = sum(1 for c in covers if not set(c) & wanted)
    return {
        "evidence": len(wanted & covered) / len(wanted),
        "chars": len(text),
        "tokens": estimate_tokens(text) if text else 0,
        "items": len(covers),
        "unrelated_share": unrelated / len(covers) if covers else 0.0,
        "empty": not covers,
    }


async def _measure(
    rt: Any,
    pools: Sequence[Pool],
    questions: Mapping[str, Sequence[tuple[str, tuple[str, ...]]]],
    question_vectors: Mapping[str, np.ndarray],
) -> dict[str, list[dict[str, Any]]]:
    """Per question, what each system injects."""
    from service.core import privacy, ranking
    from service.core.records import ChatContext, ChatKind
    from service.core.tokens import estimate_tokens
    from service.flows import context

    rows: dict[str, list[dict[str, Any]]] = {
        "owui_context": [],
        "owui_user": [],
        "ours_matched": [],
        "ours_default": [],
        "ours_top8_ungated": [],
    }
    for pool in pools:
        ids = [str(i) for i in range(len(pool.texts))]
        typed = {
            kind: [OwuiMemory(i, t, kind, None, 0) for i, t in zip(ids, pool.texts, strict=True)]
            for kind in ("context", "user")
        }
        chat = ChatContext(user_id=pool.owner_id, kind=ChatKind.SAVED, chat_id="bench-builtin")
        for question, evidence in questions[pool.conversation_id]:
            ranked = [ids[i] for i in pool.dense_top(question_vectors[question], OWUI_TOP_K)]
            spent = 0
            for kind in ("context", "user"):
                shown = owui_inject(typed[kind], question, ranked)
                covers = [pool.covers[int(i)] for i in shown.whole]
                row = _row(covers + [frozenset()] * len(shown.cut), evidence, shown.text)
                row["cut"] = len(shown.cut)
                rows[f"owui_{kind}"].append(row)
                if kind == "context":
                    spent = estimate_tokens(shown.text) if shown.text else 0
            for name, budget in (("ours_matched", spent), ("ours_default", OUR_DEFAULT_BUDGET)):
                if budget <= 0:
                    rows[name].append(_row([], evidence, ""))
                    continue
                result = await context.recall(
                    rt, chat=chat, message=question, budget_tokens=budget, now=pool.now
                )
                covers = [pool.covers[pool.by_memory_id[m.memory.id]] for m in result.items]
                rows[name].append(_row(covers, evidence, result.block))
            # diagnostic: our ranking's top 8 without the relevance bands, as many items as
            # Open WebUI's search returns (what the ranking finds, before the gate drops any)
            top = await context.retrieve(
                rt,
                scope=privacy.read_scope(chat),
                query=question,
                now=pool.now,
                limit=OWUI_TOP_K,
                apply_gate=False,
                query_vector=question_vectors[question],
            )
            picked = [pool.by_memory_id[r.memory.id] for r in top]
            text = ranking.render_block(profile=None, core=[], items=top)
            rows["ours_top8_ungated"].append(_row([pool.covers[i] for i in picked], evidence, text))
    return rows


METRICS: tuple[str, ...] = ("evidence", "chars", "tokens", "unrelated_share")
COMPARISONS: tuple[tuple[str, str], ...] = (
    ("ours_matched", "owui_context"),
    ("ours_default", "owui_context"),
    ("ours_default", "owui_user"),
    ("ours_top8_ungated", "owui_context"),
)


def _summary(rows: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    out: dict[str, Any] = {"systems": {}, "differences": {}}
    for name, values in rows.items():
        out["systems"][name] = {
            "evidence_pct": round(100 * float(np.mean([r["evidence"] for r in values])), 1),
            "chars_mean": round(float(np.mean([r["chars"] for r in values])), 1),
            "tokens_mean": round(float(np.mean([r["tokens"] for r in values])), 1),
            "items_mean": round(float(np.mean([r["items"] for r in values])), 2),
            "unrelated_pct": round(
                100
                * float(np.mean([r["unrelated_share"] for r in values if not r["empty"]] or [0])),
                1,
            ),
            "nothing_injected_pct": round(100 * float(np.mean([r["empty"] for r in values])), 1),
            "cut_lines_mean": round(float(np.mean([r.get("cut", 0) for r in values])), 2),
        }
    for ours, theirs in COMPARISONS:
        entry = {}
        for metric in METRICS:
            a = [float(r[metric]) for r in rows[ours]]
            b = [float(r[metric]) for r in rows[theirs]]
            if metric in ("chars", "tokens"):  # bootstrap_difference reports ×100 (points)
                a, b = [x / 100 for x in a], [x / 100 for x in b]
            entry[metric] = bootstrap_difference(a, b)
        out["differences"][f"{ours} - {theirs}"] = entry
    out["n"] = len(next(iter(rows.values())))
    return out


async def run(data: Path, prefeval: Path, cache_dir: Path | None) -> dict[str, Any]:
    """The whole benchmark; returns the JSON document."""
    _scrubbed_environment()
    import service.api.app  # noqa: F401  (fail before minutes of embedding)
    from service.embeddings.encoder import Encoder
    from service.storage import migrate
    from service.storage.db import start_embedded

    started = time.perf_counter()
    samples = [load_conversations(data)[i] for i in HELD_OUT]
    corpora: dict[str, tuple[list[Pool], dict[str, list[tuple[str, tuple[str, ...]]]]]] = {}
    loco_q = {str(s["sample_id"]): [(q.question, q.evidence) for q in load_qa(s)] for s in samples}
    corpora["locomo_turns"] = ([turn_pool(s) for s in samples], loco_q)
    corpora["locomo_facts"] = ([observation_pool(s) for s in samples], loco_q)
    pref_pools, pref_q = prefeval_pools(prefeval)
    corpora["prefeval_explicit"] = (
        pref_pools,
        {k: [(q, (e,)) for q, e in v] for k, v in pref_q.items()},
    )
    _progress("loading the embedding model")
    encoder = Encoder()
    texts = [t for pools, _ in corpora.values() for p in pools for t in p.texts]
    _progress(f"embedding {len(texts)} memory texts")
    vectors = _embed_with_cache(encoder, texts, cache_dir)
    offset = 0
    for pools, _ in corpora.values():
        for pool in pools:
            pool.vectors = vectors[offset : offset + len(pool.texts)]
            offset += len(pool.texts)
    asked = sorted({q for _, qs in corpora.values() for v in qs.values() for q, _ in v})
    _progress(f"embedding {len(asked)} questions")
    question_vectors = dict(zip(asked, _embed_with_cache(encoder, asked, cache_dir), strict=True))
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="builtin-memory-bench-") as tmp:
        url, server = start_embedded(Path(tmp))
        try:
            migrate.upgrade(url)
            async with service_runtime(url, Path(tmp) / "state", encoder) as rt:
                for name, (pools, questions) in corpora.items():
                    for pool in pools:
                        await insert_pool(rt, pool)
                    _progress(f"{name}: injecting")
                    rows = await _measure(rt, pools, questions, question_vectors)
                    results[name] = _summary(rows) | {"memories": sum(len(p.texts) for p in pools)}
        finally:
            server.cleanup()
    results["meta"] = {
        "locomo": str(data),
        "locomo_conversations": list(HELD_OUT),
        "prefeval": str(prefeval),
        "prefeval_users": PREFEVAL_USERS,
        "prefeval_seed": PREFEVAL_SEED,
        "owui": {
            "version": "0.12.4",
            "top_k": OWUI_TOP_K,
            "user_char_limit": OWUI_USER_CHAR_LIMIT,
            "context_char_limit": OWUI_CONTEXT_CHAR_LIMIT,
            "embedding": "all-MiniLM-L6-v2 (this project's encoder), exact cosine",
        },
        "our_default_budget": OUR_DEFAULT_BUDGET,
        "tokens": "service.core.tokens.estimate_tokens for both",
        "bootstrap": "paired by question, 2,000 resamples, seed 0; chars/tokens in units",
        "cpu_count": os.cpu_count(),
        "runtime_s": round(time.perf_counter() - started, 1),
        "finished": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    return results


LABELS = {
    "owui_context": "Open WebUI 0.12.4, memories of type `context` (API / settings default)",
    "owui_user": "Open WebUI 0.12.4, memories of type `user` (its review's type for user facts)",
    "ours_matched": "ours, budget = tokens Open WebUI spent on the question",
    "ours_default": f"ours, default budget ({OUR_DEFAULT_BUDGET} tokens)",
    "ours_top8_ungated": "diagnostic: our ranking's top 8 without the relevance bands",
}
TITLES = {
    "locomo_turns": "LoCoMo dialogue turns, conversations 5–9",
    "locomo_facts": "LoCoMo observation facts, conversations 5–9",
    "prefeval_explicit": "PrefEval explicit preferences "
    f"(1,000, dealt to {PREFEVAL_USERS} users, seed {PREFEVAL_SEED})",
}


def _interval(d: Mapping[str, float], unit: str) -> str:
    return f"{d['diff']:+.1f}{unit} [{d['low']:+.1f}, {d['high']:+.1f}]"


def render_markdown(results: Mapping[str, Any]) -> str:
    meta = results["meta"]
    lines = [
        "# What reaches the model: Open WebUI's built-in memory against this product's inlet",
        "",
        f"`python -m bench.builtin_memory`, finished {meta['finished']} in "
        f"{meta['runtime_s']} s on {meta['cpu_count']} CPUs. No LLM. Open WebUI's injection "
        "reproduced from "
        "`open_webui/utils/memory.py::add_memory_context` (equality with its own code: "
        "`tests/integration/test_builtin_memory_equality.py`); top 8 by exact cosine with "
        "all-MiniLM-L6-v2 (Open WebUI's default embedding model, the one this project ships), "
        "2,000 + 2,000 characters. Tokens by `estimate_tokens` for both. Evidence: LoCoMo "
        "evidence turns covered / PrefEval's preference injected. Unrelated: share of injected "
        "items covering no evidence (questions with something injected).",
        "",
    ]
    for key, title in TITLES.items():
        block = results[key]
        lines += [
            f"## {title} (n = {block['n']} questions, {block['memories']} memories)",
            "",
            "| system | evidence injected | chars | tokens | items | unrelated items "
            "| nothing injected |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for name, s in block["systems"].items():
            lines.append(
                f"| {LABELS[name]} | {s['evidence_pct']} % | {s['chars_mean']:.0f} | "
                f"{s['tokens_mean']:.0f} | {s['items_mean']} | {s['unrelated_pct']} % | "
                f"{s['nothing_injected_pct']} % |"
            )
        lines += [
            "",
            "Paired differences, bootstrap 95 % interval (evidence and unrelated in points; "
            "chars and tokens per question):",
            "",
            "| comparison | evidence | chars | tokens | unrelated |",
            "|---|---:|---:|---:|---:|",
        ]
        for name, d in block["differences"].items():
            lines.append(
                f"| {name} | {_interval(d['evidence'], '')} | {_interval(d['chars'], '')} | "
                f"{_interval(d['tokens'], '')} | {_interval(d['unrelated_share'], '')} |"
            )
        lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA_PATH, help="locomo10.json")
    parser.add_argument(
        "--prefeval", type=Path, default=DEFAULT_PREFEVAL, help="explicit_preference/"
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT_DIR)
    parser.add_argument(
        "--cache-dir", type=Path, default=REPO_ROOT / "bench" / ".work", help="vector cache"
    )
    args = parser.parse_args(argv)
    for path in (args.data, args.prefeval):
        if not path.exists():
            print(f"not found: {path}", file=sys.stderr)
            return 2
    results = asyncio.run(run(args.data, args.prefeval, args.cache_dir))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "builtin_memory.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.out / "builtin_memory.md").write_text(render_markdown(results))
    _progress(f"wrote {args.out / 'builtin_memory.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
