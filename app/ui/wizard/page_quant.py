"""The quantization page: the target repository's files with their memory fit."""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QPushButton, QVBoxLayout

from app.models.downloads import human_bytes
from app.models.fit import assess, best_fit, estimate_pair, gib
from app.ui.wizard.common import (
    FIT_COLOURS,
    Page,
    cap_context,
    cell,
    error_html,
    make_table,
    status_label,
)
from app.ui.wizard.words import head_text
from app.workers.hub_messages import HubFailure, InspectRepo, RepoInspected

if TYPE_CHECKING:
    from app.ui.wizard.wizard import PairWizard


class QuantPage(Page):
    def __init__(self, wizard: PairWizard) -> None:
        super().__init__(
            wizard,
            "Quantization",
            "Smaller files run faster and fit more easily; larger ones are more "
            "accurate. The best quantization that fits is preselected.",
        )
        self.status = status_label()
        self.retry = QPushButton("Retry")
        self.retry.clicked.connect(self.initializePage)
        self.retry.setVisible(False)
        self.table = make_table(["Quantization", "File", "Size", "Memory (target)", "Fit"])
        self.table.itemSelectionChanged.connect(self.completeChanged)
        layout = QVBoxLayout(self)
        layout.addWidget(self.status)
        layout.addWidget(self.retry, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.table)

    def initializePage(self) -> None:  # noqa: N802 - Qt name
        self.forget_requests()
        self.retry.setVisible(False)
        self.table.setRowCount(0)
        if (
            self.state.inspected is not None
            and self.state.inspected.repo_id == self.state.target_repo
        ):
            self._fill()
            return
        self.status.setText(
            f"Reading {escape(self.state.target_repo or '')} (file list and model header)…"
        )
        self.submit(InspectRepo(self.state.target_repo or ""))

    def on_result(self, reply: object) -> None:
        if isinstance(reply, RepoInspected):
            self.state.inspected = reply
            self._fill()

    def on_failure(self, failure: HubFailure) -> None:
        self.retry.setVisible(True)
        self.status.setText(self.failure_text(failure))

    def _fill(self) -> None:
        inspected, hw = self.state.inspected, self.state.hardware
        assert inspected is not None and hw is not None
        f = inspected.facts
        if f.drafting.is_head:  # an assistant or a head: explained, not offered as a target
            self.table.setRowCount(0)
            self.status.setText(
                error_html(f"{inspected.repo_id}: {head_text(f.drafting)}")
                + (f"<br>{escape(self._heads_text())}" if inspected.heads else "")
            )
            return
        capped = cap_context(self.owner, f.context_length)
        self.state.context_note = capped
        mtp = f.drafting.method == "mtp"
        memory = (
            f"Memory is for the target drafting for itself ({escape(f.drafting.name)}: its MTP "
            f"context included) at {self.state.n_ctx:,} tokens of context."
            if mtp
            else f"Memory is for the target alone at {self.state.n_ctx:,} tokens of context; a "
            "draft adds a little (see Review)."
        )
        self.status.setText(
            f"<b>{escape(inspected.repo_id)}</b>: {escape(f.architecture)}, {f.n_layer} layers, "
            f"trained context {f.context_length:,} tokens. {memory}"
            + (f"<br>{capped}" if capped else "")
            + (f"<br>{escape(self._heads_text())}" if inspected.heads else "")
        )
        options = []
        self.table.setRowCount(len(inspected.groups))
        for row, group in enumerate(inspected.groups):
            est = estimate_pair(
                f, group.size, None, 0, self.state.n_ctx, self.state.kv_type, mtp=mtp
            )
            fit = assess(est, hw)
            options.append((group.quant, fit))
            self.table.setItem(row, 0, cell(group.quant))
            self.table.setItem(row, 1, cell(group.label))
            self.table.setItem(row, 2, cell(human_bytes(group.size)))
            self.table.setItem(row, 3, cell(gib(est.needed)))
            self.table.setItem(
                row, 4, cell(fit.label.value, colour=FIT_COLOURS[fit.label], tooltip=fit.message)
            )
        self.table.resizeColumnsToContents()
        preferred = self.state.target_entry.quant if self.state.target_entry else None
        previous = self.state.target_group.quant if self.state.target_group else None
        choice = previous or best_fit(options, preferred)
        for row, group in enumerate(inspected.groups):
            if group.quant == choice:
                self.table.selectRow(row)

    def _heads_text(self) -> str:
        inspected = self.state.inspected
        assert inspected is not None
        names = ", ".join(g.label for g in inspected.heads[:3])
        more = f" and {len(inspected.heads) - 3} more" if len(inspected.heads) > 3 else ""
        return (
            f"The repository also holds {len(inspected.heads)} drafting head file(s) ({names}"
            f"{more}): heads, not target files, so they are not listed here."
        )

    def isComplete(self) -> bool:  # noqa: N802 - Qt name
        return self.state.inspected is not None and bool(self.table.selectedItems())

    def validatePage(self) -> bool:  # noqa: N802 - Qt name
        assert self.state.inspected is not None
        group = self.state.inspected.groups[self.table.currentRow()]
        if group != self.state.target_group:
            self.state.draft = None
        self.state.target_group = group
        return True
