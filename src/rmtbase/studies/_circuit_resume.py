"""Study ``circuits`` keeps what it trained when a later step fails, and resumes from it.

Once training has finished, any failure copies its checkpoints and ``training.json`` (seed,
recipe, curve, CPU seconds) to ``OUT/circuits-resume-seed<S>`` (``-quick`` for ``--quick``) and
says so; the same command then checks seed and recipe and skips training, so every number is
that of an uninterrupted run. The folder is removed when a run finishes."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
from pathlib import Path

from ..files.strict_json import dumps

TRAINING = "training.json"


def place(out: Path, seed: int, quick: bool) -> Path:
    """The resume folder, beside the final ``OUT/circuits`` of the study written into ``out``."""
    return Path(out).parent / f"circuits-resume-seed{int(seed)}{'-quick' if quick else ''}"


def _record(seed: int, recipe) -> dict:
    return {"seed": int(seed), "recipe": dataclasses.asdict(recipe)}


def load(resume: Path, seed: int, recipe) -> dict | None:
    """The training of ``resume`` (``{"curve", "cpu_s", "steps"}``) if it was made with this
    seed and recipe and every checkpoint folder is there, else None."""
    try:
        doc = json.loads((resume / TRAINING).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if {k: doc.get(k) for k in ("seed", "recipe")} != json.loads(dumps(_record(seed, recipe))):
        return None
    steps = [int(s) for s in doc.get("steps", [])]
    if not steps or not all((resume / "checkpoints" / f"step_{s:05d}" / "config.json").is_file()
                            for s in steps):
        return None
    curve = {k: [math.nan if x is None else x for x in v] for k, v in doc["curve"].items()}
    return {"curve": curve, "cpu_s": float(doc["cpu_s"]), "steps": steps}


def train_or_resume(out: Path, recipe, seed: int, keep, resume: Path | None) -> tuple[dict, dict]:
    """``(training result, {step: checkpoint folder})``, from ``resume`` when it holds this
    training, else trained now with ``keep(step, net)`` saving each checkpoint."""
    from ..progress import message
    from ._induction_train import train

    ckpts = Path(out) / "checkpoints"
    found = load(resume, seed, recipe) if resume is not None else None
    if found is not None:
        message(f"rmtbase: study circuits: training of seed {seed} taken from {resume}")
        shutil.copytree(resume / "checkpoints", ckpts, dirs_exist_ok=True)
        shutil.copy2(resume / TRAINING, Path(out) / TRAINING)
        res = {"curve": found["curve"], "cpu_s": found["cpu_s"]}
        return res, {s: ckpts / f"step_{s:05d}" for s in found["steps"]}
    folders: dict[int, Path] = {}

    def saving(step, net):
        keep(step, net)
        folders[step] = ckpts / f"step_{step:05d}"

    res = train(recipe, seed, on_checkpoint=saving)
    doc = {**_record(seed, recipe), "curve": {k: [float(x) if k != "step" else int(x)
                                                 for x in v] for k, v in res["curve"].items()},
           "cpu_s": float(res["cpu_s"]), "steps": sorted(folders)}
    (Path(out) / TRAINING).write_text(dumps(doc) + "\n", encoding="utf-8")  # NaN: null
    return res, folders


def keep_finished(out: Path, resume: Path) -> Path | None:
    """After a failure, copy ``out``'s finished training to ``resume`` (all or nothing) and say
    how to resume; None where training had not finished."""
    from ..progress import message

    ckpts = Path(out) / "checkpoints"
    if not (Path(out) / TRAINING).is_file():
        return None
    tmp = resume.parent / f".{resume.name}.tmp-{os.getpid()}"
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(ckpts, tmp / "checkpoints")
        shutil.copy2(Path(out) / TRAINING, tmp / TRAINING)
        shutil.rmtree(resume, ignore_errors=True)
        os.rename(tmp, resume)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        message(f"rmtbase: study circuits: could not keep the trained checkpoints ({exc})")
        return None
    message(f"rmtbase: study circuits: the trained checkpoints are kept in {resume}; the same "
            "command (same --seed) resumes from them without training")
    return resume


def check_before_training(recipe) -> None:
    """InputError if the composition of the model ``recipe`` trains cannot fit in memory
    (:func:`rmtbase.files.memory.check_memory`): before training, not after it."""
    from ..files.memory import check_memory
    from ..scoring.composition.run import RUNTIME_BYTES, plan

    r = recipe
    need = plan(r.n_layer, r.n_head, r.n_head, r.n_embd, r.n_embd // r.n_head)["bytes"]
    check_memory(need, "the composition of the trained model", running=RUNTIME_BYTES)


def done(resume: Path) -> None:
    """A finished run: its resume folder is no longer needed."""
    shutil.rmtree(resume, ignore_errors=True)


__all__ = ["check_before_training", "done", "keep_finished", "load", "place",
           "train_or_resume"]
