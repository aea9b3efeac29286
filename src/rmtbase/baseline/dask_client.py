"""The Dask client a driver runs its tasks on, and the one wait of every Dask driver.

:func:`cluster_client`: the client given, one for a scheduler address (nothing listening is one
line at once), or a loopback cluster. :func:`completed` polls futures, so Ctrl-C is raised at
once and pending tasks are cancelled; :func:`result` turns a lost scheduler or a task whose
workers kept dying into one :class:`ClusterError`. Without Dask :func:`require_distributed`
raises :class:`MissingDependency`."""

from __future__ import annotations

import contextlib
import logging

import numpy as np

from ..errors import InputError, RmtbaseError

#: Scheduler options of the loopback cluster: no dashboard, and its HTTP server on a free port
#: (by default it takes 8787 and warns when another Dask or Jupyter process holds that port).
NO_DASHBOARD = {"dashboard": False, "dashboard_address": "127.0.0.1:0"}


class MissingDependency(RmtbaseError, ImportError):
    """An optional dependency (dask.distributed) is not installed."""


class ClusterError(RmtbaseError):
    """The Dask cluster went away under a run: its scheduler, or the workers of one task (which
    Dask gave up on after they died ``distributed.scheduler.allowed-failures`` + 1 times)."""


#: What to install for the optional extras, as it works in a clone of the repository (rmtbase
#: is not on the public package index).
INSTALL_DISTRIBUTED = "pip install -e '.[distributed]' in the rmtbase clone (or pip install 'dask[distributed]')"


def require_distributed(what: str = "rmtbase sweep"):
    """The ``distributed`` module, or :class:`MissingDependency` naming ``what`` needs it."""
    try:
        import distributed
    except ImportError as exc:
        raise MissingDependency(f"{what} needs dask.distributed: {INSTALL_DISTRIBUTED}") from exc
    return distributed


#: Seconds between looks at the futures while none has completed (an interrupt is noticed
#: within this, also one a library swallowed: :func:`rmtbase.files.interrupts.check`).
POLL_S = 0.1


def completed(futures, client=None, *, poll_s: float | None = None):
    """The Dask ``futures`` (an iterable or a dict keyed by them) as they complete.

    Polls ``done()`` every ``poll_s`` s, so Ctrl-C is raised at once; when the generator ends early
    pending tasks are cancelled through ``client`` (default: the futures' own); wrap it in
    :func:`contextlib.closing` where the loop may ``break``."""
    import time

    from ..files.interrupts import check

    pending = list(dict.fromkeys(futures))
    poll_s = POLL_S if poll_s is None else float(poll_s)
    try:
        while pending:
            done = [f for f in pending if f.done()]
            if not done:
                check()
                time.sleep(poll_s)
                continue
            for f in done:
                pending.remove(f)
                yield f
    finally:
        if pending:
            _cancel(pending, client)


def result(future):
    """``future.result()`` of a finished Dask future; :class:`ClusterError` (one line) where the
    client lost its scheduler or the task's workers kept dying. A task's own exception is
    raised as it is."""
    from distributed import KilledWorker
    from distributed.client import FutureCancelledError
    from distributed.comm.core import CommClosedError

    client = getattr(future, "client", None)
    where = getattr(getattr(client, "scheduler", None), "address", None)
    at = f" at {where}" if where else ""
    try:
        return future.result()
    except FutureCancelledError as exc:
        if exc.reason == "scheduler-connection-lost":
            raise ClusterError(f"lost the Dask scheduler{at} (the connection was lost)") from None
        raise ClusterError(f"a task was cancelled on the Dask scheduler{at} ({exc.reason})"
                           ) from None
    except CommClosedError:  # gone while the result was gathered
        raise ClusterError(f"lost the Dask scheduler{at} (the connection was lost)") from None
    except KilledWorker as exc:
        args = (*exc.args, None, None, None)  # (task, last worker, allowed failures)
        task, tries = args[0], args[2]
        times = f"{tries + 1} " if isinstance(tries, int) else ""
        raise ClusterError(f"Dask gave up on task {task} after {times}workers died running it "
                           "(Dask's workers' logs say why: often memory)") from None


def _cancel(futures, client) -> None:
    """Cancel ``futures`` (best effort: a closed client has nothing left to cancel)."""
    client = client if client is not None else getattr(futures[0], "client", None)
    if client is None:
        return
    try:
        client.cancel(list(futures), force=True)
    except Exception:  # noqa: BLE001 - the scheduler may be gone already; nothing to stop
        pass


def worker_env(workers: int, cores: int | None = None) -> dict:
    """Environment of a loopback worker process: BLAS/OpenMP pools of its share of the cores. XLA's
    CPU pool is left alone (disabling it changes float32 results in the last bits)."""
    import os

    share = max(1, (cores or os.cpu_count() or 1) // max(1, int(workers)))
    return {k: str(share) for k in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                                    "OMP_NUM_THREADS")}


#: Seconds :func:`_reachable` waits for a scheduler's port to answer.
PROBE_S = 5.0


def _reachable(scheduler) -> None:
    """InputError unless something accepts a connection at a ``tcp://`` scheduler address
    (other schemes are left to Dask): a refused or unroutable address is said at once instead
    of after Dask's connection retries."""
    import socket

    from distributed.comm.addressing import parse_address, parse_host_port

    proto, loc = parse_address(str(scheduler))
    if proto != "tcp":
        return
    host, port = parse_host_port(loc)
    try:
        with socket.create_connection((host, int(port)), timeout=PROBE_S):
            pass
    except OSError as exc:
        why = "nothing listens there (connection refused)" \
            if isinstance(exc, ConnectionRefusedError) else \
            (exc.strerror or str(exc) or type(exc).__name__).lower()
        raise InputError(f"cannot connect to the Dask scheduler at {scheduler}: {why}") from None


def _check_address(scheduler) -> None:
    """InputError unless ``scheduler`` parses as a Dask address of a known scheme (a ``Client`` that
    fails on one stays registered as the default client)."""
    from distributed.comm.addressing import parse_address, parse_host_port
    from distributed.comm.registry import get_backend

    try:
        proto, loc = parse_address(str(scheduler))
        get_backend(proto)
        if proto in ("tcp", "tls"):
            parse_host_port(loc)
    except (ValueError, TypeError) as exc:
        why = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InputError(f"{scheduler!r} is not a Dask scheduler address such as "
                         f"tcp://host:8786 ({why})") from None


def check_scheduler(scheduler) -> None:
    """InputError (one line) unless ``scheduler`` is a Dask address something answers at, for
    the checks made before any work; None passes."""
    if scheduler is None:
        return
    require_distributed()
    _check_address(scheduler)
    _reachable(scheduler)


@contextlib.contextmanager
def cluster_client(scheduler=None, workers=None, client=None):
    """A Client: the one given, one connected to ``scheduler``, or a loopback cluster of ``workers``
    single-threaded processes (closed on exit)."""
    if client is not None:
        yield client
        return
    if (scheduler is None) == (workers is None):
        raise InputError("give exactly one of a scheduler address or a number of workers")
    dist = require_distributed()
    if scheduler is not None:
        _check_address(scheduler)
        _reachable(scheduler)
        try:
            c = dist.Client(scheduler, timeout="20s")
        except (OSError, TimeoutError, ValueError, TypeError) as exc:  # ValueError: not an address
            why = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise InputError(f"cannot connect to the Dask scheduler at {scheduler}: {why}") from exc
        with c:
            yield c
        return
    if isinstance(workers, bool) or not isinstance(workers, int | np.integer) or workers < 1:
        raise InputError(f"workers must be a positive integer, got {workers!r}")
    from .loopback import gpu_cluster, gpu_ids, quiet_start, worker_envs

    gpus = gpu_ids()
    cluster = None
    try:
        with quiet_start():  # workers in their own session; a Ctrl-C meanwhile is held
            cluster = gpu_cluster(dist, worker_envs(int(workers), worker_env(workers), gpus),
                                  NO_DASHBOARD, logging.CRITICAL) if gpus else \
                dist.LocalCluster(n_workers=int(workers), threads_per_worker=1,
                                  processes=True, host="127.0.0.1", dashboard_address=None,
                                  scheduler_kwargs=NO_DASHBOARD,
                                  silence_logs=logging.CRITICAL, env=worker_env(workers))
    except KeyboardInterrupt:  # held through the start: the cluster is whole, close it
        if cluster is not None:
            cluster.close()
        raise
    with cluster, dist.Client(cluster) as c:
        yield c


__all__ = ["INSTALL_DISTRIBUTED", "NO_DASHBOARD", "POLL_S", "ClusterError", "MissingDependency",
           "check_scheduler", "cluster_client", "completed", "require_distributed", "result",
           "worker_env"]
