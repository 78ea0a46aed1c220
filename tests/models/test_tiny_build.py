"""`resolve_model("tiny…")` builds the tiny judge once per machine: each machine's local main process builds it into
its own folder (no shared file system needed), a folder built from the same spec, texts and seed is kept, and a
folder from other texts is rebuilt."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from patarm.models import TINY_STAMP, resolve_model

SPEC = "tiny:hidden_size=32,num_layers=1,vocab_size=300"
TEXTS = ["the judge reads one response", "score 7 of 10", "<eval> correct :: pass </eval>"] * 20

TWO_MACHINES = """
import json, sys
from pathlib import Path
from accelerate import PartialState
from patarm.models import resolve_model
from transformers import AutoTokenizer
state = PartialState(cpu=True)  # as the trainer sets it up on a CPU; a GPU machine's PartialState() is distributed too
assert state.num_processes == 2, state
root = Path(sys.argv[1]) / f"machine-{state.process_index}"     # one disk per machine: nothing shared
texts = json.loads(sys.argv[2])
path = resolve_model(sys.argv[3], texts=texts, output_dir=root)
vocab = AutoTokenizer.from_pretrained(path, local_files_only=True).get_vocab()
(root / "seen.json").write_text(json.dumps({"path": path, "vocab": len(vocab)}))
state.wait_for_everyone()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_machines_without_a_shared_folder_each_build_the_tiny_judge(tmp_path):
    """Two processes as two machines of one process each (RANK 0 and 1, LOCAL_RANK 0 on both), each with its own
    folder: before, only the global main process built it and the other machine found no model."""
    script = tmp_path / "two_machines.py"
    script.write_text(TWO_MACHINES)
    port = str(_free_port())
    procs = [subprocess.Popen([sys.executable, str(script), str(tmp_path), json.dumps(TEXTS), SPEC],
                              env={**os.environ, "RANK": str(r), "WORLD_SIZE": "2", "LOCAL_RANK": "0",
                                   "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port,
                                   "OMP_NUM_THREADS": "1", "ACCELERATE_USE_CPU": "true"},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), "\n".join(o[1][-3000:] for o in outs)
    seen = [json.loads((tmp_path / f"machine-{r}" / "seen.json").read_text()) for r in (0, 1)]
    assert seen[0]["vocab"] == seen[1]["vocab"] > 0
    a, b = (Path(s["path"]) for s in seen)
    assert a != b and (a / TINY_STAMP).is_file() and (b / TINY_STAMP).is_file()
    assert (a / "tokenizer.json").read_bytes() == (b / "tokenizer.json").read_bytes()  # the same judge on both


def test_a_built_folder_is_kept_and_another_texts_folder_rebuilt(tmp_path):
    path = Path(resolve_model(SPEC, texts=TEXTS, output_dir=tmp_path))
    weights = next(path.glob("*.safetensors"))
    first = weights.stat().st_mtime_ns
    assert Path(resolve_model(SPEC, texts=TEXTS, output_dir=tmp_path)) == path
    assert weights.stat().st_mtime_ns == first  # the same spec, texts and seed: not built again
    resolve_model(SPEC, texts=TEXTS + ["another text entirely"], output_dir=tmp_path)
    assert json.loads((path / TINY_STAMP).read_text())["texts_sha256"] != ""
    assert next(path.glob("*.safetensors")).stat().st_mtime_ns != first  # other texts: rebuilt in place
    assert [p.name for p in tmp_path.iterdir()] == ["tiny-base"]  # no build folder left behind
