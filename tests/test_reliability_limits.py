"""Reliability: reproducible numbers whatever the cache holds, one memory
check, no lost output, combine only of what it can verify, the small one-line errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rmtbase.errors import InputError

ROOT = Path(__file__).resolve().parents[1]

# ---------------------------------------------------------------- 1: draws a run's rule asks for


def test_a_longer_cached_table_is_read_as_the_requested_draws(tmp_path, monkeypatch):
    """A 300-draw request gets the 300 draws a fresh cache would generate, even where an
    earlier run left a 700-draw table of the cell (before: all 700 were used, and p-values
    moved with what the cache held)."""
    from rmtbase.baseline.cache import null_table

    def table(cache, n):
        monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / cache))
        return null_table(24, 4, stats="spectral", min_draws=n, seed=3)

    fresh = table("fresh", 300)
    table("extended", 700)  # an earlier run (--max-draws, a sweep) extended the cell's table
    again = table("extended", 300)
    assert fresh.sizes["draw"] == again.sizes["draw"] == 300
    assert int(again.attrs["draws"]) == 300
    for v in ("npr", "lambda_max", "q_rms"):
        # exact: draw i is a pure function of (seed, d, d_h, i) (tables.py's key derivation)
        np.testing.assert_array_equal(fresh[v].values, again[v].values)


def test_a_shipped_table_keeps_serving_whole():
    """The rule depends on the installation only: a shipped table that has the draws is used
    whole (its ordinary table, not the 100,000-draw extension)."""
    from rmtbase.baseline.cache import lookup_table

    t = lookup_table(384, 32, stats="spectral", min_draws=1000, seed=0)
    assert t.sizes["draw"] == 4000


@pytest.mark.slow  # two pytest runs of the collection test: ~2 min on the shared machine
def test_collection_test_passes_alone_and_in_its_file(tmp_path):
    """tests/test_entries.py::test_combine_assembles_the_collection failed run alone (p-values
    282/301 against 0.883: the singles read a table the first score had extended) and passed
    inside its file; now both, each in a fresh process with its own cache."""
    test = "tests/test_entries.py::test_combine_assembles_the_collection"
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    for i, args in enumerate(([test], ["tests/test_entries.py", "-m", "not slow"])):
        r = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                            "--basetemp", str(tmp_path / f"b{i}"), *args],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, r.stdout[-3000:]


# ---------------------------------------------------------------- 2: one memory check


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory):
    from _checkpoints import gpt2 as saved_gpt2

    return saved_gpt2(tmp_path_factory.mktemp("reliability") / "tiny-gpt2", seed=0, n_layer=2,
                      n_embd=64, n_head=4, vocab_size=64)


@pytest.fixture
def little_free(monkeypatch):
    """A machine whose MemFree (``SC_AVPHYS_PAGES``) is 64 pages: what composition read."""
    real = os.sysconf

    def sysconf(name):
        return 64 if name == "SC_AVPHYS_PAGES" else real(name)

    monkeypatch.setattr(os, "sysconf", sysconf)


def test_composition_memory_limit_is_honoured_both_ways(gpt2_dir, little_free, monkeypatch):
    """RMTBASE_MEMORY_LIMIT=64G lets a composition run go ahead that MemFree would refuse, and
    =100M stops its ~0.59 GiB plan (before: the variable was not read at all)."""
    from rmtbase.scoring.composition.run import check_model

    monkeypatch.setenv("RMTBASE_MEMORY_LIMIT", "64G")
    plan = check_model(gpt2_dir)
    assert 0.55 * 2**30 < plan["bytes"] < 0.65 * 2**30
    monkeypatch.setenv("RMTBASE_MEMORY_LIMIT", "100M")
    with pytest.raises(InputError, match=r"composition .* needs about .*\(RMTBASE_MEMORY_LIMIT\)"):
        check_model(gpt2_dir)


def test_composition_counts_the_running_process_once(gpt2_dir, little_free, monkeypatch):
    """MemAvailable leaves out what this process already holds, so the plan's 600 MiB runtime
    is not asked for again: a run whose plan exceeds MemAvailable by less than the resident
    runtime goes ahead (e.g. 12.8 GiB available, 0.6 GiB over)."""
    import rmtbase.files.memory as memory
    from rmtbase.scoring.composition.run import RUNTIME_BYTES, check_model, plan

    monkeypatch.delenv("RMTBASE_MEMORY_LIMIT", raising=False)
    monkeypatch.setattr(memory, "resident_bytes", lambda: 2 * RUNTIME_BYTES, raising=False)
    need = plan(2, 4, 4, 64, 16)["bytes"]
    avail = need - RUNTIME_BYTES // 2
    monkeypatch.setattr(memory, "available_memory", lambda backend=None: (avail, "MemAvailable"))
    assert check_model(gpt2_dir)["bytes"] == need
    monkeypatch.setattr(memory, "available_memory",
                        lambda backend=None: (need - 2 * RUNTIME_BYTES, "MemAvailable"))
    with pytest.raises(InputError, match="set RMTBASE_MEMORY_LIMIT"):
        check_model(gpt2_dir)


# ---------------------------------------------------------------- 3: one writer per --out

_HOLD = """import sys
from rmtbase.files.output import check_output_dir
check_output_dir(sys.argv[1], "rmtbase score", overwrite=False)
print("held", flush=True)
sys.stdin.read()
"""


def test_a_second_writer_into_the_same_out_is_refused(tmp_path, capsys):
    """Two runs into one new --out: the second is refused at once, with one line naming the
    first's process, instead of both working and the second replacing the first's output
    (both saying "wrote 6 files"). Once the first ends, the folder is free again."""
    from rmtbase.cli import main
    from rmtbase.files.output import check_output_dir
    from rmtbase.files.output_lock import lock_path, release

    out = tmp_path / "runs" / "new-out"
    other = tmp_path / "other"
    assert main(["combine", "x", "y", "--out", str(other)]) == 2  # fails after its check
    assert list(tmp_path.iterdir()) == []  # its lock given back, no file left
    first = subprocess.Popen([sys.executable, "-c", _HOLD, str(out)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert first.stdout.readline().strip() == "held"
        with pytest.raises(InputError, match=f"being written by process {first.pid}"):
            check_output_dir(out, "rmtbase score", overwrite=False)
        capsys.readouterr()
        assert main(["combine", str(tmp_path / "a"), str(tmp_path / "b"), "--out",
                     str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "another rmtbase run" in err[0]
        assert lock_path(out).is_file()  # the first's, kept by the refused second
    finally:
        first.stdin.close()
        first.wait(timeout=60)
        first.stdout.close()
    assert not lock_path(out).exists()  # the first process ended without writing: no litter
    assert check_output_dir(out, "rmtbase score", overwrite=False) == out
    release(out)
    assert not (tmp_path / "runs").exists()  # the check makes no folder


def test_the_lock_goes_with_the_output_folder(tmp_path):
    """An OutputFolder gives its lock back when it ends (written or failed), and removes the
    lock file: a later run into the same place is not refused, and nothing is left beside."""
    from rmtbase.files import output_lock
    from rmtbase.files.output import OutputFolder

    out = tmp_path / "o"
    with OutputFolder(out, kind="rmtbase test") as f:
        f.write_text("a.txt", "x\n")
        assert output_lock.lock_path(out).is_file()
    assert not output_lock.lock_path(out).exists()
    with pytest.raises(RuntimeError), OutputFolder(out, kind="rmtbase test"):
        raise RuntimeError
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o"]


# ---------------------------------------------------------------- 3: combine verifies what it takes


def _single(p_value: float):
    import xarray as xr

    return xr.Dataset({"head_flag": (("layer", "head"), np.zeros((2, 3), np.int8)),
                       "head_p_value": (("layer", "head"), np.full((2, 3), p_value))},
                      attrs={"model": "m", "d": 64, "d_h": 16})


def _score_folder(path, p_value=0.5):
    from rmtbase.files.output import OutputFolder

    with OutputFolder(path, kind="rmtbase score") as out:
        out.write_netcdf("scores.nc", _single(p_value))
    return path


def _edit(path, **attrs):
    """Rewrite netCDF ``path`` with head_p_value set to 1e-9 (and ``attrs`` set; None drops)."""
    import xarray as xr

    with xr.open_dataset(path) as ds:
        ds = ds.load()
    ds["head_p_value"][:] = 1e-9
    for k, v in attrs.items():
        ds.attrs.pop(k) if v is None else ds.attrs.__setitem__(k, v)
    path.unlink()
    ds.to_netcdf(path)


def test_combine_refuses_an_edited_score_folder(tmp_path, capsys):
    """An edited scores.nc of a score folder no longer matches the SHA-256 its manifest lists:
    refused with one line (not combined, "1 of 8 heads differ" when truly 0)."""
    from rmtbase.cli import main
    from rmtbase.scoring.collection.entries import load_entries

    a, b = _score_folder(tmp_path / "a"), _score_folder(tmp_path / "b")
    assert [lab for lab, _ in load_entries([a, b])] == ["m", "m"]  # as written: verified
    _edit(b / "scores.nc")
    with pytest.raises(InputError, match="changed after it was written .*manifest.json"):
        load_entries([a, b], unverified=True)  # edited content: refused even so
    capsys.readouterr()
    assert main(["combine", str(a), str(b), "--out", str(tmp_path / "c")]) == 2
    assert capsys.readouterr().err.count("\n") == 1 and not (tmp_path / "c").exists()


def test_combine_refuses_an_entry_without_its_hash(tmp_path):
    """An entry whose entry_sha256 was deleted after its head_p_value was edited cannot be
    verified: refused (not combined with p = 1e-9, exit 0), unless --unverified, which
    warns; a score folder's scores.nc without its manifest likewise."""
    from rmtbase.scoring.collection.entries import CONTENT_ATTR, load_entries, save

    store = tmp_path / "run.entries"
    store.mkdir()
    save(store, "step0", "k0", _single(0.5))
    save(store, "step1", "k1", _single(0.5))
    assert [lab for lab, _ in load_entries([store])] == ["step0", "step1"]
    _edit(store / "step1.nc", **{CONTENT_ATTR: None})
    with pytest.raises(InputError, match=f"step1.nc cannot be verified .*no {CONTENT_ATTR}"):
        load_entries([store])
    told = []
    got = load_entries([store], unverified=True, warn=told.append)
    assert [lab for lab, _ in got] == ["step0", "step1"] and len(told) == 1
    assert "step1.nc" in told[0]
    folder = _score_folder(tmp_path / "a")
    (folder / "manifest.json").unlink()
    with pytest.raises(InputError, match="scores.nc cannot be verified"):
        load_entries([folder])


# ---------------------------------------------------------------- 5: the test command


def _run_test_sh(tmp_path, env_extra):
    """scripts/test.sh as root with apt-get and no chromium, in a copy whose .venv setup and
    pytest are stubs: which system installs it makes, and what it says."""
    import shutil

    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "test.sh", repo / "scripts" / "test.sh")
    (repo / "scripts" / "_venv.sh").write_text("cd \"$(dirname \"${BASH_SOURCE[0]}\")/..\"\n")
    (repo / ".venv" / "bin").mkdir(parents=True)
    fake = tmp_path / "bin"
    fake.mkdir()
    log = tmp_path / "apt.log"
    stubs = {repo / ".venv" / "bin" / "python": "exit 0",
             fake / "id": "echo 0", fake / "apt-get": f'echo "$*" >> {log}'}
    for path, body in stubs.items():
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
    for tool in ("dirname", "timeout"):
        (fake / tool).symlink_to(shutil.which(tool))
    env = {"PATH": str(fake), "HOME": str(tmp_path), **env_extra}
    r = subprocess.run(["/bin/bash", str(repo / "scripts" / "test.sh")], env=env,
                       capture_output=True, text=True, timeout=60)
    return r, (log.read_text() if log.exists() else "")


def test_test_sh_installs_system_packages_only_when_asked(tmp_path):
    """scripts/test.sh run as root installed chromium (and 25 packages) with apt-get without
    asking; now only with RMTBASE_APT=1, and otherwise it says what it skips."""
    r, apt = _run_test_sh(tmp_path / "plain", {})
    assert r.returncode == 0, r.stderr
    assert apt == "" and "RMTBASE_APT=1" in r.stderr and "browser test" in r.stderr
    r, apt = _run_test_sh(tmp_path / "asked", {"RMTBASE_APT": "1"})
    assert r.returncode == 0, r.stderr
    assert "install -y -q --no-install-recommends chromium" in apt


# ---------------------------------------------------------------- 6: docs true to the code


def test_null_and_storage_lists_every_quantized_null_choice():
    """docs/null-and-storage.md listed 10 of the 15 --quantized-null choices."""
    import re

    text = (ROOT / "docs" / "null-and-storage.md").read_text(encoding="utf-8")
    m = re.search(r"`--quantized-null\s+([a-z0-9_|\s]+)`", text)
    from rmtbase.cli.score import shipped_quant_formats

    listed = re.sub(r"\s+", "", m.group(1)).split("|")
    # the option's choices are the live names, checked when given (help loads no plugin)
    assert listed == ["auto", "none", *shipped_quant_formats()]
    assert len(listed) == 15


# ---------------------------------------------------------------- 4: the small one-line errors


@pytest.mark.parametrize("gains, match", [
    (lambda: np.full((2, 64), np.nan), "layer 0 holds NaN or infinity .2 of 2 layers"),
    (lambda: np.ones((3, 64)), r"shape \(3, 64\), expected \(2, 64\)"),
    (lambda: [np.ones(64)], r"shape \(1, 64\), expected \(2, 64\)"),
    (lambda: [np.ones(64), np.zeros(64)], "layer 1 is all zero"),
    (lambda: [np.ones(64), np.ones(3)], "one per layer"),
])
def test_composition_refuses_bad_ln_gains(gpt2_dir, monkeypatch, gains, match):
    """composition(ln_gains=...) accepted all-NaN gains (all-NaN scores) and raised a bare
    IndexError for a wrong count; now one InputError each, before any weight is read."""
    import rmtbase.scoring.composition.run as comp

    def no_weights(*a, **k):
        raise AssertionError("weights read before the gains were checked")

    monkeypatch.setattr(comp, "_layers", no_weights)
    with pytest.raises(InputError, match=match):
        comp.composition(gpt2_dir, fold_ln=True, ln_gains=gains(), draws=20)


@pytest.mark.parametrize("seed", ["100000000000000000000000", "4294967296", "-1"])
def test_study_seed_out_of_range_is_one_line(tmp_path, capsys, seed):
    """`study circuits --seed 1e23` (as an integer) ended in a 43-line traceback from torch's
    manual_seed after the study had started; now one line, exit 2, nothing written."""
    from rmtbase.cli import main

    capsys.readouterr()
    assert main(["study", "circuits", "--quick", "--seed", seed, "--out",
                 str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--seed must be an integer in [0, 2**32)" in err
    assert not (tmp_path / "o").exists()


def test_a_full_disk_is_found_before_the_work_and_named(tmp_path, monkeypatch, capsys):
    """A full disk under --out said "No space left on device" without the path, after the
    whole score: the output folder's check now refuses it up front, naming the folder; a
    write that fails for room anyway names the file it was writing."""
    import errno

    from rmtbase.cli import main
    from rmtbase.files import atomic

    target = tmp_path / "t.txt"

    def fill(tmp):
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError, match="No space left on device") as got:
        atomic.write_atomic(target, fill)
    assert got.value.filename == str(target) and not list(tmp_path.iterdir())

    class Full:
        f_bavail, f_frsize = 3, 4096

    monkeypatch.setattr(os, "statvfs", lambda path: Full())
    out = tmp_path / "o"
    capsys.readouterr()
    assert main(["combine", "a", "b", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{out}: its file system has 12 KiB free" in err


def test_an_unreachable_hub_is_one_line_at_once(tmp_path, monkeypatch, capsys, caplog):
    """Offline, `rmtbase score gpt2` printed 11 huggingface_hub retry lines over 30 s before
    rmtbase's one-line error; now the hub's host is tried once and the error is one line,
    without a retry (a refused port stands in for the missing network)."""
    import huggingface_hub.constants as hub_constants

    from rmtbase.cli import main
    from rmtbase.models import hub

    for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "HTTP_PROXY",
              "http_proxy", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.setattr(hub_constants, "ENDPOINT", "http://127.0.0.1:1")
    clear = getattr(getattr(hub, "unreachable", None), "cache_clear", lambda: None)
    clear()  # the answer is remembered per endpoint for the process
    capsys.readouterr()
    try:
        assert main(["score", "nobody/tiny-model", "--out", str(tmp_path / "o")]) == 2
    finally:
        clear()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "hub cannot be reached (127.0.0.1" in err, err
    assert "Retry" not in caplog.text and "Retry" not in err


# ---------------------------------------------------------------- 2: a study keeps what it finished


@pytest.mark.slow  # two quick studies and a resumed one: ~20 CPU-s, 75 s on the shared machine
def test_circuits_keeps_its_training_when_a_late_step_fails(tmp_path, monkeypatch, capsys):
    """`study circuits` trained, then exited 2 at the composition with nothing written (17 and
    12 minutes lost). Now a late failure keeps the checkpoints beside the output
    and says so; the same command resumes from them without training, and the resumed
    output holds the same numbers as an uninterrupted run."""
    import xarray as xr

    import rmtbase.studies._induction_train as training
    import rmtbase.studies.circuits as circuits
    from rmtbase.cli import main

    cmd = ["study", "circuits", "--quick", "--seed", "3"]
    real = circuits._composition_last

    def late_failure(*a, **k):
        raise InputError("composition refused (a stand-in for the memory check)")

    monkeypatch.setattr(circuits, "_composition_last", late_failure)
    capsys.readouterr()
    assert main([*cmd, "--out", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    kept = tmp_path / "a" / "circuits-resume-seed3-quick"
    assert f"kept in {kept}" in err and "resumes from them" in err and "stand-in" in err
    assert (kept / "training.json").is_file() and (kept / "checkpoints").is_dir()
    assert not (tmp_path / "a" / "circuits").exists()

    monkeypatch.setattr(circuits, "_composition_last", real)
    real_train = training.train
    monkeypatch.setattr(training, "train", lambda *a, **k: pytest.fail("trained again"))
    assert main([*cmd, "--out", str(tmp_path / "a")]) == 0
    assert "taken from" in capsys.readouterr().err and not kept.exists()
    monkeypatch.setattr(training, "train", real_train)
    assert main([*cmd, "--out", str(tmp_path / "b")]) == 0  # uninterrupted
    with xr.open_dataset(tmp_path / "a" / "circuits" / "circuits.nc") as a, \
            xr.open_dataset(tmp_path / "b" / "circuits" / "circuits.nc") as b:
        for v in ("loss", "repeat_loss", "k_composition", "k_composition_p", "profile"):
            # exact: the same checkpoint files (copied) read by the same programs
            np.testing.assert_array_equal(a[v].values, b[v].values, err_msg=v)


def test_circuits_memory_is_checked_before_training(tmp_path, monkeypatch, capsys):
    """The composition's memory check ran after training; now the plan for the recipe's
    shape is checked first (RMTBASE_MEMORY_LIMIT=100M: one line, exit 2, no training)."""
    import rmtbase.studies._induction_train as training
    from rmtbase.cli import main

    monkeypatch.setattr(training, "train", lambda *a, **k: pytest.fail("trained first"))
    monkeypatch.setenv("RMTBASE_MEMORY_LIMIT", "100M")
    capsys.readouterr()
    assert main(["study", "circuits", "--quick", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "composition of the trained model needs about" in err


def test_circuits_resume_folder_serves_only_its_own_training(tmp_path):
    """What keep_finished keeps, load gives back for the same seed and recipe only, and not
    once a checkpoint folder is missing; nothing is kept before training has finished."""
    import dataclasses
    import json

    from rmtbase.studies._circuit_resume import TRAINING, keep_finished, load
    from rmtbase.studies._induction_train import Recipe

    out, resume, recipe = tmp_path / ".circuits.tmp-1-ab", tmp_path / "keep", Recipe(steps=7)
    (out / "checkpoints" / "step_00000").mkdir(parents=True)
    assert keep_finished(out, resume) is None and not resume.exists()
    (out / "checkpoints" / "step_00000" / "config.json").write_text("{}")
    doc = {"seed": 2, "recipe": json.loads(json.dumps(dataclasses.asdict(recipe))),
           "curve": {"step": [0], "loss": [3.5]}, "cpu_s": 1.5, "steps": [0]}
    (out / TRAINING).write_text(json.dumps(doc))
    assert keep_finished(out, resume) == resume
    got = load(resume, 2, recipe)
    assert got == {"curve": {"step": [0], "loss": [3.5]}, "cpu_s": 1.5, "steps": [0]}
    assert load(resume, 3, recipe) is None and load(resume, 2, Recipe(steps=8)) is None
    (resume / "checkpoints" / "step_00000" / "config.json").unlink()
    assert load(resume, 2, recipe) is None


def test_study_training_records_write_a_nan_as_null_and_read_it_back(tmp_path, monkeypatch):
    """A diverged loss (NaN) in the circuits study's training.json and in a trained folder's
    train_info.json is written as null (strict JSON: the autouse check reads every file
    here); the resume reads the curve's null back as NaN."""
    import math

    from rmtbase.studies import _induction_train, _mlp_induction
    from rmtbase.studies._circuit_resume import TRAINING, load, train_or_resume
    from rmtbase.studies._induction_train import Recipe

    def train(recipe, seed, on_checkpoint):
        (tmp_path / "checkpoints" / "step_00000").mkdir(parents=True)
        (tmp_path / "checkpoints" / "step_00000" / "config.json").write_text("{}")
        on_checkpoint(0, None)
        return {"curve": {"step": [0], "loss": [math.nan]}, "cpu_s": 1.0}

    monkeypatch.setattr(_induction_train, "train", train)
    train_or_resume(tmp_path, Recipe(steps=7), 2, lambda step, net: None, None)
    assert '"loss": [null]' in (tmp_path / TRAINING).read_text()
    assert math.isnan(load(tmp_path, 2, Recipe(steps=7))["curve"]["loss"][0])

    class Model:
        def save_pretrained(self, folder):
            (folder / "config.json").write_text("{}")

    folder = _mlp_induction.write_whole(tmp_path / "m", Model(), {"repeat_loss_end": math.nan})
    assert "null" in (folder / "train_info.json").read_text()


def test_score_seed_out_of_range_is_refused_before_the_work(gpt2_dir, tmp_path, capsys,
                                                            monkeypatch):
    """`score --seed` beyond 2**32 was refused only when the null table was drawn, after the
    weights were read; now with the other argument checks, before any work."""
    import rmtbase.scoring.score as score
    from rmtbase.cli import main

    monkeypatch.setattr(score, "score_model", lambda *a, **k: pytest.fail("scored first"))
    capsys.readouterr()
    assert main(["score", str(gpt2_dir), "--seed", str(2**70), "--out",
                 str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--seed must be an integer in [0, 2**32)" in err
