"""The one lifecycle of every stage folder: lock, skip, running, complete or failed, shards.

Every stage has one shape, ``Stage`` (keys, ``plan() -> units``, ``run(unit) -> rejects``,
``finish(manifest)``), and one driver runs it, ``StageRun`` (or ``drive`` for a whole run in one
process)::

    @dataclass
    class VocabStage(Stage):           # its parameters: cfg, target, sequences_dir, out_dir, reporter
        name, shards = "vocab", ("vocab.safetensors",)
        def keys(self): ...            # (config hash, input fingerprints), inputs checked first
        def run(self, unit): ...       # the work; write shards with fsio.atomic_path(path, record=True)
        def finish(self, manifest): ...  # counts and details

    drive(VocabStage(cfg, target, sequences_dir, out_dir, reporter))

``StageLifecycle`` holds the folder's steps the driver calls (open, begin, guard, complete, fail);
only the driver calls them.

Guarantees:
- **One writer per folder.** ``open`` takes ``<out>/.lock`` (``eagle3_core.run.lock``); a second run
  into the same folder fails at once with ``FolderBusyError`` naming the holder's pid and host.
  ``complete`` and ``fail`` release it; a killed holder releases it by dying.
- **Skip** only when the manifest is ``complete`` for the same config hash and inputs *and*
  every shard it lists is there with its recorded size (full blake2b with ``verify``, or
  ``EAGLE3_VERIFY=1``). A missing shard means "redo": the stage runs and its resume redoes
  what is gone. A damaged one raises ``ShardError`` naming it ("delete it and rerun").
- **Shards.** ``shards`` are globs relative to the stage folder; at ``complete`` every match goes
  into ``manifest.shards`` with its size and checksum (``eagle3_core.run.checksums``).
- **Rejects.** ``complete(rejects=...)`` records ``counts.rejected`` and
  ``details.reject_reasons`` the same way for every stage (``eagle3_core.run.rejects``).
- ``timings.total`` is the wall time from ``open`` to ``complete``; ``complete`` is written last.

Readers check an upstream folder's shards against its manifest with ``contracts.folder.check_listed``
(the same ``checksums.shard_problem``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from eagle3_core.run import lock
from eagle3_core.run.checksums import ShardError, check_shards, shard_records, verify_requested
from eagle3_core.run.fsio import no_space_as_error, remove_tree
from eagle3_core.run.keys import stage_key
from eagle3_core.run.manifest import StageManifest, read_manifest, runtime_versions, write_manifest
from eagle3_core.run.progress import NullReporter, Reporter
from eagle3_core.run.rejects import Rejects

__all__ = ["Stage", "StageRun", "drive", "StageLifecycle", "ShardError"]


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


class Stage:
    """The one shape of a stage, in the manner of datatrove's pipeline step.

    A stage is built from its config, its input folders (``{argument: upstream stage}`` in its
    declaration, ``eagle3_core.stages``), ``out_dir`` and a reporter, and states:

    - ``name``, ``shards`` (globs recorded at ``complete``), ``outputs`` (globs, files or folders,
      removed when the keys changed; ``None``: ``shards``; ``()``: nothing, for a stage whose rows
      carry their own keys, as generate's do) and ``versions`` (packages recorded in the manifest);
    - ``keys()``: (config hash, input fingerprints). It checks the inputs first: an error raised
      here touches nothing, not even the folder's lock. The config hash is ``key(**parts)``, the one
      key every stage has (``run.keys.stage_key``: its name, ``key_version``, its config parts without
      their speed-only and location fields);
    - ``plan() -> units``: after the lock and the clearing, before ``running`` is written when the
      folder is fresh (a refusal there leaves no manifest); the units left to do;
    - ``run(unit) -> Rejects | None``: one unit of work, its outputs written with
      ``fsio.atomic_path(path, record=True)``;
    - ``finish(manifest) -> Rejects | None``: fills ``counts`` and ``details`` once every unit is
      durable; ``close()``: frees what the units held (an engine), error or not;
    - ``stopped(manifest)``: where a unit that fails has figures worth keeping (the rows done, the
      endpoints' states), puts them into the manifest the driver then writes ``failed``;
    - where it asks a server: ``endpoint_field``, the field of its config listing the endpoints it
      asks for this config (a pipeline that starts a server for it puts the URL there), and
      ``endpoints()``, each with the most requests the run keeps in flight there. Whoever runs it
      may then give it ``shared``, the endpoints' limits other runs hold slots of too
      (``generate.slots.SharedLimits``: the Prefect tasks give every such stage Prefect's); the
      driver's ``close`` closes it.

    ``StageRun`` drives it; nothing else writes its manifest.
    """

    name: str = ""
    key_version: int = 1  # bumped when the stage changes on purpose what its outputs are (run.keys)
    shards: tuple[str, ...] = ()
    outputs: tuple[str, ...] | None = None
    versions: tuple[str, ...] = ()
    changed: str = "its outputs are discarded"  # the log line's end when the keys changed
    endpoint_field: str | None = None  # the field of its config listing the endpoints it asks; None: no server
    shared: Any = None  # the endpoints' limits shared with other runs, given by whoever runs it
    out_dir: Path
    reporter: Reporter

    def __post_init__(self) -> None:
        """A stage is a dataclass of its parameters: the flow and the CLI read them from it."""
        self.out_dir = Path(self.out_dir)
        self.reporter = self.reporter or NullReporter()

    def keys(self) -> tuple[str, dict[str, str]]:
        raise NotImplementedError

    def key(self, **parts: Any) -> str:
        """This stage's config hash over ``parts`` (``run.keys.stage_key``)."""
        return stage_key(self.name, self.key_version, **parts)

    def plan(self) -> list[Any]:
        return [None]

    def run(self, unit: Any) -> Rejects | None:
        raise NotImplementedError

    def finish(self, manifest: StageManifest) -> Rejects | None:
        return None

    def close(self) -> None:
        return None

    def stopped(self, manifest: StageManifest) -> None:
        return None

    def endpoints(self) -> dict[str, int]:
        """Each endpoint this run sends requests to, with the most it keeps in flight there."""
        return {}


class StageRun:
    """The one driver: lock, skip, clearing on changed keys, ``running``, ``complete`` or ``failed``,
    rejects and timings, for any ``Stage``. A flow may call the steps from separate tasks::

        run = StageRun(stage)
        done = run.open()          # the complete manifest (skip), else None and ``run.units``
        for unit in run.units:
            run.run(unit)
        manifest = run.finish()    # ``complete`` written last

    ``drive(stage)`` does all of it. An error in any step records ``failed`` (a fresh folder stays
    empty); an interrupt leaves ``running`` for the next run to resume; either way the lock goes.
    """

    def __init__(self, stage: Stage, verify: bool | None = None) -> None:
        self.stage = stage
        config_hash, inputs = stage.keys()
        self.life = StageLifecycle(
            stage.name,
            stage.out_dir,
            config_hash,
            inputs,
            shards=stage.shards,
            versions=stage.versions,
            reporter=stage.reporter,
            verify=verify,
        )
        self.units: list[Any] = []
        self.rejects: Rejects | None = None  # recorded only for a stage that rejects rows
        self.manifest: StageManifest | None = None
        self.timings: dict[str, float] = {}  # seconds per step, beside the stage's own in the manifest
        self._done = 0

    def report_to(self, reporter: Reporter) -> None:
        """Report through ``reporter`` from now on (a Prefect task's own logger, per task)."""
        self.stage.reporter = self.life.reporter = reporter

    def open(self) -> StageManifest | None:
        done = self.life.open()
        if done is not None:
            return done
        with self.life.guard(), self._timed("plan"):
            if self.life.keys_changed:
                self._clear()
            self.units = list(self.stage.plan())
            self.manifest = self.life.begin()
        return None

    def _clear(self) -> None:
        """Outputs of another config or other inputs must never mix with this run's; ``running``
        is written at once, so a refusal in ``plan`` never leaves the cleared run's ``complete``."""
        stage = self.stage
        stage.reporter.log(f"{stage.name} config or inputs changed since the last run: {stage.changed}")
        for pattern in stage.shards if stage.outputs is None else stage.outputs:
            for path in stage.out_dir.glob(pattern):
                remove_tree(path)  # for real, a symlink as a link, or one error: never mix what was discarded
        self.life.begin()

    def run(self, unit: Any) -> None:
        with self.life.guard(), self._timed("run"), self._stopped():
            rejects = self.stage.run(unit)
        self._count(rejects)
        self._done += 1
        if len(self.units) > 1:  # one unit reports its own progress (the trainer's steps, a pool's shards)
            self.stage.reporter.progress(self.stage.name, self._done, len(self.units), unit="units")

    def close(self) -> None:
        try:
            self.stage.close()
        finally:
            if self.stage.shared is not None:
                self.stage.shared.close()

    def finish(self) -> StageManifest:
        assert self.manifest is not None, "finish before open"
        with self.life.guard(), self._timed("finish"):
            rejects = self.stage.finish(self.manifest)
        self._count(rejects)
        self.manifest.timings = {**self.timings, **self.manifest.timings}
        return self.life.complete(self.manifest, self.rejects)

    def _count(self, rejects: Rejects | None) -> None:
        if rejects is not None:
            self.rejects = (self.rejects or Rejects()).merge(rejects)

    @contextlib.contextmanager
    def _stopped(self) -> Iterator[None]:
        """An error in a unit: the stage's figures so far go into the manifest ``failed`` records."""
        try:
            yield
        except Exception:
            with contextlib.suppress(Exception):  # best effort: the unit's own error is the one to raise
                self.stage.stopped(self.manifest)
            raise

    @contextlib.contextmanager
    def _timed(self, step: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.timings[step] = round(self.timings.get(step, 0.0) + time.monotonic() - started, 3)


def drive(stage: Stage, verify: bool | None = None) -> StageManifest:
    """Run ``stage`` whole in this process (the stage commands' and the tests' way)."""
    run = StageRun(stage, verify)
    done = run.open()
    if done is not None:
        return done
    try:
        for unit in run.units:
            run.run(unit)
    finally:
        run.close()
    return run.finish()
