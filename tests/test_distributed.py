"""fg.distributed, DistributedDataParallel and DistributedSampler.

The multi-process checks run as ``mpiexec -n 2 python tests/distributed/worker.py``
in a subprocess with a timeout (a hang fails instead of stalling); one launch
covers every collective against NumPy and the DDP equivalence runs. They need
the ``mpi`` extra (mpi4py and the mpich wheel, whose ``mpiexec`` sits next to
the Python executable): without it they are skipped with the reason, except
under ``CI=true``, where a missing MPI fails.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import ferrograd as fg
import pytest

HERE = Path(__file__).resolve().parent / "distributed"


def mpiexec() -> str:
    """The launcher next to this Python (the mpich wheel's), else on PATH; skip or fail without one."""
    candidates = [Path(sys.executable).parent / "mpiexec", shutil.which("mpiexec")]
    found = next((str(c) for c in candidates if c and Path(c).exists()), None)
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        found = None
    if found is None:
        reason = "MPI is not installed (pip install 'ferrograd[mpi]': mpi4py and mpich)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{reason}; CI must run the distributed tests")
        print(f"skipping: {reason}")
        pytest.skip(reason)
    return found


def launch(script: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [mpiexec(), "-n", "2", sys.executable, str(HERE / script)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_collectives_and_ddp_on_two_ranks() -> None:
    proc = launch("worker.py", timeout=240)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "ALL OK" in proc.stdout, out
    for check in (
        "all_reduce dtypes",
        "non-contiguous",
        "in flight",
        "DDP cnn adam no_sync",
        "DDP determinism",
        "every rank raises, naming them",
        "find_unused_parameters: unreached parameters are ready at once",
        "backward(inputs=...) under DDP",
        "naming the first difference",
        "DistributedSampler",
    ):
        assert check in proc.stdout, out


def test_exception_on_one_rank_aborts_the_job_with_its_traceback() -> None:
    start = time.monotonic()
    proc = launch("fail_one_rank.py", timeout=60)
    took = time.monotonic() - start
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "[rank 1] uncaught exception" in out and "ValueError: boom on rank one" in out, out
    assert "should not get here" not in out
    assert took < 20, f"the job took {took:.1f} s to end"


@pytest.mark.parametrize("target", ["one rank", "the whole job"])
def test_ctrl_c_during_training_ends_every_rank_promptly(tmp_path: Path, target: str) -> None:
    # "one rank": SIGINT to rank 1 alone; "the whole job": SIGINT to the launcher's process group,
    # as Ctrl-C in a terminal does. Either way every rank must end within seconds, with the
    # interrupted rank's KeyboardInterrupt printed, and none may train on or hang.
    proc = subprocess.Popen(
        [mpiexec(), "-n", "2", sys.executable, str(HERE / "interrupt_training.py"), str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        pids = [tmp_path / f"rank{r}.pid" for r in range(2)]
        while not all(p.exists() and p.read_text() for p in pids):
            assert proc.poll() is None, proc.communicate()[0]
            assert time.monotonic() < deadline, "training did not start within 60 s"
            time.sleep(0.05)
        time.sleep(0.3)  # well into training
        sent = time.monotonic()
        if target == "one rank":
            os.kill(int(pids[1].read_text()), signal.SIGINT)
        else:
            os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode != 0, out
    assert "trained until the time limit" not in out, out
    assert "KeyboardInterrupt" in out, out
    if target == "one rank":
        assert "[rank 1] uncaught exception; aborting all ranks" in out, out
    print(f"SIGINT to {target}: every rank ended {took:.2f} s later")
    assert took < 10, f"the job took {took:.1f} s to end after SIGINT"


def test_init_outside_a_launcher_says_how_to_launch() -> None:
    mpiexec()
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "OMPI_", "PMIX_", "MPI_", "SLURM_"))
    }
    code = (
        "import ferrograd as fg\n"
        "try:\n    fg.distributed.init_process_group()\n"
        "except RuntimeError as e:\n    print(e)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert "mpiexec -n 2 python" in proc.stdout, proc.stdout + proc.stderr


def test_missing_mpi4py_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # import mpi4py raises ImportError
    assert not fg.distributed.is_available()
    with pytest.raises(ImportError, match=r"pip install 'ferrograd\[mpi\]'"):
        fg.distributed.init_process_group()


def test_collectives_before_init_raise() -> None:
    assert not fg.distributed.is_initialized()
    with pytest.raises(RuntimeError, match="init_process_group"):
        fg.distributed.all_reduce(fg.ones(2))
    with pytest.raises(RuntimeError, match="init_process_group"):
        fg.nn.parallel.DistributedDataParallel(fg.nn.Linear(2, 2))


@pytest.mark.parametrize(
    "n,replicas,drop_last", [(10, 3, False), (10, 3, True), (9, 3, False), (2, 4, False)]
)
def test_distributed_sampler_shards(n: int, replicas: int, drop_last: bool) -> None:
    shards = [
        list(fg.data.DistributedSampler(range(n), replicas, r, seed=1, drop_last=drop_last))
        for r in range(replicas)
    ]
    sizes = {len(s) for s in shards}
    assert len(sizes) == 1
    size = sizes.pop()
    assert size == (n // replicas if drop_last else -(-n // replicas))
    flat = [i for s in shards for i in s]
    if drop_last:
        assert len(set(flat)) == len(flat)  # disjoint
    else:
        assert set(flat) == set(range(n))  # padded by repeats, covers everything


def test_distributed_sampler_set_epoch_reshuffles_the_same_on_all_ranks() -> None:
    a0 = fg.data.DistributedSampler(range(50), 2, 0)
    a1 = fg.data.DistributedSampler(range(50), 2, 1)
    first = list(a0)
    a0.set_epoch(1)
    a1.set_epoch(1)
    assert list(a0) != first
    assert sorted(list(a0) + list(a1)) == list(range(50))
    assert list(fg.data.DistributedSampler(range(5), 2, 0, shuffle=False)) == [0, 2, 4]
    with pytest.raises(ValueError, match="rank 2"):
        fg.data.DistributedSampler(range(5), 2, 2)


def test_digits_ddp_example_learns_and_rank0_writes_one_checkpoint(tmp_path: Path) -> None:
    pytest.importorskip("sklearn", reason="digits_ddp.py needs the demo extra (scikit-learn)")
    script = Path(__file__).resolve().parent.parent / "examples" / "digits_ddp.py"
    proc = subprocess.run(
        [
            mpiexec(),
            "-n",
            "2",
            sys.executable,
            str(script),
            "--epochs",
            "3",
            "--models",
            "mlp",
            "--out-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert out.count("test accuracy") == 1, out  # printed by rank 0 only
    acc = float(out.split("test accuracy")[1].split("%")[0]) / 100
    assert acc > 0.9, out
    assert [p.name for p in tmp_path.iterdir()] == ["digits_ddp_mlp.safetensors"]
