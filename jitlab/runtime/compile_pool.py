"""Compiling independent kernels side by side in forked processes; the disk cache brings them back.

numba holds the GIL while it types and lowers a function, so threads would take turns: processes
compile in parallel. Workers are forked from this process once a first kernel has compiled here
(numba imported and its contexts ready: nothing to import or set up again), under numba's
compiler lock (no other thread is inside numba when the fork copies its state). Each worker and
this process take the next task from a shared counter; a worker compiles its task with the
backend, which writes the kernel's module and numba's compiled code into the cache folder, and
this process later loads it from there as a cache hit. A task a worker did not finish (it failed,
died or stalled) is simply compiled here afterwards, as without workers; where processes cannot
be forked (no `fork` start method, or starting one fails) everything compiles here.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable, Sequence
from multiprocessing.connection import wait
from typing import Any, TypeVar

from ..errors import JitlabError

ENV_VAR = "JITLAB_COMPILE_WORKERS"
STALL_SECONDS = 300.0          # no worker has finished a task for this long: stop waiting for them

T = TypeVar("T")


def processes() -> int:
    """How many processes may compile at once, this one included: $JITLAB_COMPILE_WORKERS ("auto":
    one per core this process may run on), else 1; 1 where processes cannot be forked.

    Off unless asked for: on the shared 2-core development machine, where the scheduler gives each
    session one share of the CPU however many processes it runs, workers did not shorten ResNet-50's
    cold compile (docs/performance.md)."""
    value = os.environ.get(ENV_VAR, "").strip().lower()
    if value == "auto":
        count = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    elif value:
        try:
            count = int(value)
        except ValueError:
            raise JitlabError(f"${ENV_VAR} is a number of processes or 'auto', got {value!r}") from None
    else:
        count = 1
    forkable = sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()
    return max(count, 1) if forkable else 1


def run(tasks: Sequence[T], here: Callable[[T], Any], there: Callable[[T], Any], workers: int,
        done: Callable[[int], None]) -> dict[int, Any]:
    """Runs `here` on some tasks in this process and `there` on the others in up to `workers` forked
    processes; returns `here`'s results by task index (tasks run elsewhere are not in it). `done(i)`
    is called here as task i finishes, wherever it ran."""
    from numba.core.compiler_lock import global_compiler_lock

    ctx = multiprocessing.get_context("fork")
    counter = ctx.Value("i", 0)

    def take() -> int | None:
        with counter.get_lock():
            i, counter.value = counter.value, counter.value + 1
        return i if i < len(tasks) else None

    readers = []
    with global_compiler_lock:
        for _ in range(workers):
            reader, writer = ctx.Pipe(duplex=False)
            try:
                ctx.Process(target=_work, args=(take, there, tasks, writer), daemon=True).start()
            except OSError:
                reader.close()
                break
            finally:
                writer.close()
            readers.append(reader)
    results = {}
    while (i := take()) is not None:
        results[i] = here(tasks[i])
        done(i)
        _collect(readers, done, 0)
    while readers:
        if not _collect(readers, done, STALL_SECONDS):
            break
    for reader in readers:
        reader.close()
    return results


def _collect(readers: list, done: Callable[[int], None], timeout: float) -> bool:
    """Reports the tasks workers finished, waiting up to `timeout` for one; drops the readers of
    workers that have exited. False when nothing came in time."""
    ready = wait(readers, timeout)
    for reader in ready:
        try:
            done(reader.recv())
        except EOFError:
            readers.remove(reader)
            reader.close()
    return bool(ready)


def _work(take: Callable[[], int | None], there: Callable, tasks: Sequence, writer) -> None:
    """A worker: compiles tasks until none are left, sending each finished index."""
    while (i := take()) is not None:
        try:
            there(tasks[i])
        except Exception:  # compiled again in the parent, which reports the error properly
            continue
        writer.send(i)
    writer.close()
