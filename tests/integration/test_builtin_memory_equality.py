"""`bench.builtin_memory.owui_inject` gives the text Open WebUI 0.12.4's own code injects.

Open WebUI's `open_webui.utils.memory.add_memory_context` is run in its own virtualenv
(by default the `.e2e/owui` that `make e2e` installs; `OWUI_VENV` changes it; skipped when it
is absent) on a seeded sample of memories with types, paths, long texts and queries naming
path segments.
Only its two storage reads are replaced — the user's rows (`Memories.get_memories_by_user_id`)
and the vector search (`routers.memories.query_memory`, answering the ids the test gives) —
and the two character limits (`Config.get_many`); selection, path neighbourhood, ordering,
truncation and formatting are Open WebUI's. The same cases go through `owui_inject`.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bench.builtin_memory import OwuiMemory, owui_inject

OWUI_VENV = Path(os.environ.get("OWUI_VENV", Path(__file__).resolve().parents[2] / ".e2e" / "owui"))
OWUI_PYTHON = OWUI_VENV / "bin" / "python"

#: Runs inside Open WebUI's venv: reads the cases on stdin, prints the system messages.
PROBE = r"""
import asyncio, json, sys, types
from types import SimpleNamespace as NS
import open_webui.utils.memory as memory

cases = json.load(sys.stdin)
state = {}

async def rows(user_id):
    return [NS(**m) for m in state["memories"]]

async def limits(*keys):
    return {"memories.user_char_limit": state["user_limit"],
            "memories.context_char_limit": state["context_limit"]}

class QueryMemoryForm:
    def __init__(self, content, k):
        self.content, self.k = content, k

async def query_memory(request, form, user):
    by_id = {m["id"]: m for m in state["memories"]}
    chosen = [by_id[i] for i in state["ranked"][: form.k]]
    return NS(
        ids=[[m["id"] for m in chosen]],
        documents=[[memory.memory_vector_text(m["content"], m["path"]) for m in chosen]],
        metadatas=[[{"type": m["type"], "path": m["path"]} for m in chosen]],
        distances=[[0.5 for _ in chosen]],
    )

fake = types.ModuleType("open_webui.routers.memories")
fake.QueryMemoryForm, fake.query_memory = QueryMemoryForm, query_memory
sys.modules["open_webui.routers.memories"] = fake
memory.Memories.get_memories_by_user_id = rows
memory.Config.get_many = limits

out = []
for case in cases:
    state.update(case)
    form = {"messages": [{"role": "user", "content": case["query"]}]}
    result = asyncio.run(memory.add_memory_context(None, form, NS(id="u1", role="user")))
    first = result["messages"][0]
    out.append(first["content"] if first["role"] == "system" else "")
print(json.dumps(out))
"""

WORDS = "travel diet music work family health garden books coffee running python".split()


def _cases(n: int = 40, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    cases = []
    for c in range(n):
        memories = []
        for i in range(rng.randint(0, 30)):
            depth = rng.choice([0, 0, 1, 2, 3])
            path = "/".join(rng.choice(WORDS) for _ in range(depth)) or None
            length = rng.choice([3, 8, 20, 60])
            content = " ".join(
                rng.choice([*WORDS, "Likes", "Zebra", "apple"]) for _ in range(length)
            )
            memories.append(
                {
                    "id": f"m{c}-{i:02d}",
                    "content": content,
                    "type": rng.choice(["user", "context", "context"]),
                    "path": path,
                    "updated_at": rng.randint(0, 5),
                }
            )
        ids = [m["id"] for m in memories]
        rng.shuffle(ids)
        cases.append(
            {
                "memories": memories,
                "query": " ".join(rng.choice([*WORDS, "what", "is"]) for _ in range(5)),
                "ranked": ids[:8],
                "user_limit": rng.choice([100, 250, 600, 2000]),
                "context_limit": rng.choice([100, 300, 900, 2000]),
            }
        )
    return cases


@pytest.mark.skipif(
    not OWUI_PYTHON.exists(),
    reason=f"Open WebUI 0.12.4's virtualenv is not at {OWUI_VENV} (set OWUI_VENV to compare)",
)
def test_owui_inject_matches_open_webuis_add_memory_context(tmp_path: Path) -> None:
    cases = _cases()
    (tmp_path / "build" / "static").mkdir(parents=True)
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "DATA_DIR": str(tmp_path / "data"),
        "FRONTEND_BUILD_DIR": str(tmp_path / "build"),
        "WEBUI_SECRET_KEY": "test-only-not-a-secret",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    (tmp_path / "data").mkdir()
    done = subprocess.run(
        [str(OWUI_PYTHON), "-c", PROBE],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    ours = [
        owui_inject(
            [OwuiMemory(**m) for m in case["memories"]],
            case["query"],
            case["ranked"],
            user_limit=case["user_limit"],
            context_limit=case["context_limit"],
        ).text
        for case in cases
    ]
    assert len(theirs) == len(cases)
    # the sample exercises every part of the block, not only the vector search
    joined = "\n".join(theirs)
    for section in ("[User Memory]", "[Memory Neighborhood]", "[Relevant Context]"):
        assert section in joined
    assert any(t == "" for t in theirs) and any(len(t) > 2000 for t in theirs)
    for index, (mine, real) in enumerate(zip(ours, theirs, strict=True)):
        assert mine == real, f"case {index} differs"
