"""The Lab tab's run thread, and what a run starts from: the configurations of the loaded
pair, and repeats enough for the held-out runs a recommendation needs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QThread, Signal

from app.engine.process.host import CancelFlag
from app.errors import SpecDeckError
from app.lab.plan import LabPlan
from app.lab.runner import LabRunner
from app.lab.stats import MIN_HELD_OUT_RUNS, repeats_for
from app.lab.suites import Prompt, split
from app.models.drafting import self_drafting_problem
from app.store.settings import Settings


@dataclass(frozen=True)
class LabFinished:
    path: str
    finished: bool  # False: cancelled or failed part-way
    error: str | None = None


class LabThread(QThread):
    """Runs (or resumes) one lab plan; ``plan`` None resumes the file at ``path``."""

    progressed = Signal(object)  # Progress
    ended = Signal(object)  # LabFinished

    def __init__(self, path: Path, plan: LabPlan | None) -> None:
        super().__init__()
        self.setObjectName("LabThread")
        self.path = path
        self.plan = plan
        self.cancel = CancelFlag()  # shared with the run's engine processes
        self.runner: LabRunner | None = None

    def kill(self) -> None:
        """Cancel and end the run's engine processes now (any thread)."""
        self.cancel.set()
        runner = self.runner
        if runner is not None:
            runner.kill()

    def run(self) -> None:
        try:
            runner = self.runner = (
                LabRunner.start(self.plan, self.path, self.cancel)
                if self.plan is not None
                else LabRunner.resume(self.path, self.cancel)
            )
            finished = runner.run(self.progressed.emit)
            self.ended.emit(LabFinished(str(self.path), finished))
        except (SpecDeckError, ValueError, OSError) as exc:
            self.ended.emit(LabFinished(str(self.path), False, str(exc)))
        except Exception as exc:  # noqa: BLE001 - a worker must report, never die silently
            self.ended.emit(LabFinished(str(self.path), False, f"{type(exc).__name__}: {exc}"))


def default_configs(settings: Settings) -> str:
    """The configurations a run starts from: the pair's draft (adaptive and fixed), the
    target's own heads where it has them, and prompt lookup."""
    lines = []
    if settings.draft_path:
        lines.append(f"adaptive:draft={settings.draft_path}")
        lines.append(f"fixed8:draft={settings.draft_path},n=8")
    if settings.target_path and self_drafting_problem(settings.target_path) is None:
        lines.append("mtp:mtp")
    lines.append("ngram:ngram")
    return "\n".join(lines)


def held_out(prompts: Sequence[Prompt]) -> Counter[str]:
    """Held-out prompts per category, as a plan with these prompts splits them."""
    return Counter(p.category for p in split(prompts).confirmation) if prompts else Counter()


def runs_note(held: Counter[str], repeats: int) -> str:
    """Whether every category can reach the held-out runs a recommendation needs with these
    repeats, and what to raise when one cannot ("" when nothing is held out)."""
    if not held:
        return ""
    category, fewest = min(held.items(), key=lambda item: (item[1], item[0]))
    runs = fewest * repeats
    prompts = f"{fewest} held-out prompt{'s' if fewest != 1 else ''}"
    made = f"{category} gets {prompts} × {repeats} repeat{'s' if repeats != 1 else ''}"
    if runs >= MIN_HELD_OUT_RUNS:
        return (
            f"Every category can be recommended: a recommendation needs {MIN_HELD_OUT_RUNS} "
            f"held-out runs, and the fewest, {made} = {runs}."
        )
    return (
        f"Too few runs for a recommendation: {made} = {runs} held-out "
        f"run{'s' if runs != 1 else ''}, and a recommendation needs {MIN_HELD_OUT_RUNS}. "
        f"Raise repeats to {repeats_for(fewest)}."
    )
