"""The one lifecycle of every stage folder: lock, skip, running, complete or failed, shards.

A stage supplies its keys (config hash, input fingerprints) and its work; this module does the
rest the same way for all six stages::

    life = StageLifecycle("vocab", out_dir, config_hash, inputs, shards=("vocab.safetensors",),
                          versions=("safetensors",), reporter=reporter)
    done = life.open()        # takes the folder's lock; the complete manifest when the stage is
                              # done for these keys and its shards hold (then: return it), else None
    manifest = life.begin()   # `running` on disk
    ...                       # the work: write shards with fsio.atomic_path(path, record=True)
    life.complete(manifest, rejects=rejects)   # shard records, `complete` written last, unlocked
    # around the work: `with life.guard():`  # an error -> `failed` (+ the error), unlocked;
                                              # an interrupt -> still `running` (a kill), unlocked

    run_stage(life, work)     # all of the above for a stage whose work is one call

Guarantees:
- **One writer per folder.** ``open`` takes ``<out>/.lock`` (``eagle3_core.lock``); a second run
  into the same folder fails at once with ``FolderBusyError`` naming the holder's pid and host.
  ``complete`` and ``fail`` release it; a killed holder releases it by dying.
- **Skip** only when the manifest is ``complete`` for the same config hash and inputs *and*
  every shard it lists is there with its recorded size (full blake2b with ``verify``, or
  ``EAGLE3_VERIFY=1``). A missing shard means "redo": the stage runs and its resume redoes
  what is gone. A damaged one raises ``ShardError`` naming it ("delete it and rerun").
- **Shards.** ``shards`` are globs relative to the stage folder; at ``complete`` every match goes
  into ``manifest.shards`` with its size and checksum (``eagle3_core.checksums``).
- **Rejects.** ``complete(rejects=...)`` records ``counts.rejected`` and
  ``details.reject_reasons`` the same way for every stage (``eagle3_core.rejects``).
- ``timings.total`` is the wall time from ``open`` to ``complete``; ``complete`` is written last.

Readers check an upstream folder's shards against its manifest with ``contracts.folder.check_listed``
(the same ``checksums.shard_problem``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from eagle3_core import lock
from eagle3_core.checksums import ShardError, check_shards, shard_records, verify_requested
from eagle3_core.fsio import no_space_as_error
from eagle3_core.manifest import StageManifest, read_manifest, runtime_versions, write_manifest
from eagle3_core.progress import NullReporter, Reporter
from eagle3_core.rejects import Rejects

__all__ = ["StageLifecycle", "run_stage", "ShardError"]


class StageLifecycle:
    """One run of one stage into ``out_dir``; see the module docstring for the order of calls."""

    def __init__(
        self,
        stage: str,
        out_dir: str | Path,
        config_hash: str,
        inputs: dict[str, str],
        *,
        shards: Iterable[str] = (),
        versions: Iterable[str] = (),
        reporter: Reporter | None = None,
        verify: bool | None = None,
    ) -> None:
        self.stage, self.out_dir = stage, Path(out_dir)
        self.config_hash, self.inputs = config_hash, dict(inputs)
        self.shard_globs, self.packages = tuple(shards), tuple(versions)
        self.reporter = reporter or NullReporter()
        self.verify = verify_requested() if verify is None else verify
        self.previous: StageManifest | None = None
        self.manifest: StageManifest | None = None
        self._started = time.monotonic()

    def open(self) -> StageManifest | None:
        """Take the lock; the complete manifest when nothing is left to do (the lock is then let go)."""
        lock.acquire(self.out_dir)
        try:
            done = self._done()
        except BaseException:
            lock.release(self.out_dir)
            raise
        if done is not None:
            lock.release(self.out_dir)
        return done

    def would_skip(self) -> bool:
        """``open``'s verdict without taking the lock or logging (a pipeline asks before starting
        a service the stage would need)."""
        return self._done(log=False) is not None

    def release(self) -> None:
        """Let the folder go without writing anything (a failure before ``begin``)."""
        lock.release(self.out_dir)

    def _done(self, log: bool = True) -> StageManifest | None:
        self.previous = read_manifest(self.out_dir)
        previous = self.previous
        if previous is None or not previous.is_complete_for(self.config_hash, self.inputs):
            return None
        missing = check_shards(self.out_dir, previous.shards, self.verify)
        if missing:
            if log:
                self.reporter.log(
                    f"{self.stage}: {len(missing)} shard(s) missing ({', '.join(missing[:3])}): redoing them"
                )
            return None
        if log:
            self.reporter.log(f"{self.stage}: complete in {self.out_dir} for these inputs and config; skipped")
        return previous

    @property
    def keys_changed(self) -> bool:
        """True when an earlier run here used another config or other inputs (its outputs must go)."""
        return self.previous is not None and (
            self.previous.config_hash != self.config_hash or self.previous.inputs != self.inputs
        )

    def begin(self) -> StageManifest:
        """Write the manifest ``running`` (the lock is held since ``open``)."""
        self.manifest = StageManifest(
            stage=self.stage,
            status="running",
            config_hash=self.config_hash,
            inputs=self.inputs,
            versions=runtime_versions(*self.packages),
        )
        write_manifest(self.out_dir, self.manifest)
        return self.manifest

    @contextlib.contextmanager
    def guard(self) -> Iterator[None]:
        """Around the work after ``open``: an error marks the run ``failed`` (with the manifest
        ``begin`` returned, as the work left it); an interrupt (Ctrl-C, SIGTERM, a test's
        KeyboardInterrupt) leaves it ``running``, as a kill would, for the next run to resume.
        Either way the folder is let go; a full disk met by the work is one ``DiskFullError``."""
        try:
            with no_space_as_error(self.out_dir):
                yield
        except Exception as exc:
            self.fail(exc)
            raise
        except BaseException:
            self.release()
            raise

    def complete(self, manifest: StageManifest, rejects: Rejects | None = None) -> StageManifest:
        """Record shards (and rejects), write ``complete`` last, release the lock."""
        try:
            if rejects is not None:
                manifest.counts["rejected"] = rejects.total
                manifest.details["reject_reasons"] = rejects.as_dict()
            manifest.shards = shard_records(self.out_dir, self.shard_files())
            manifest.timings.setdefault("total", round(time.monotonic() - self._started, 3))
        except BaseException as exc:
            self.fail(exc, manifest)
            raise
        manifest.status = "complete"
        try:
            write_manifest(self.out_dir, manifest)
        finally:
            lock.release(self.out_dir)
        return manifest

    def fail(self, error: BaseException | str, manifest: StageManifest | None = None) -> None:
        """Record ``failed`` with the error's first line (best effort: a full disk may refuse it)."""
        try:
            manifest = manifest or self.manifest or read_manifest(self.out_dir)
            if manifest is not None and manifest.status != "complete":
                text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
                manifest.status = "failed"
                manifest.details["error"] = (text.splitlines() or [""])[0]
                write_manifest(self.out_dir, manifest)
        except Exception:
            pass
        finally:
            lock.release(self.out_dir)

    def shard_files(self) -> list[Path]:
        found = {
            p
            for pattern in self.shard_globs
            for p in self.out_dir.glob(pattern)
            if p.is_file() and not p.name.startswith(".") and not p.name.endswith(".tmp")
        }
        return sorted(found)


def run_stage(life: StageLifecycle, work: Callable[[StageManifest], Any]) -> StageManifest:
    """open -> begin -> ``work(manifest)`` (fills counts and details; may return ``Rejects``) ->
    complete; an error marks the manifest ``failed`` and goes on (see ``StageLifecycle.guard``)."""
    done = life.open()
    if done is not None:
        return done
    with life.guard():
        manifest = life.begin()
        rejects = work(manifest)
    return life.complete(manifest, rejects if isinstance(rejects, Rejects) else None)
