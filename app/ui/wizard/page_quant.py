"""The quantization page: the target repository's files with their memory fit."""

from __future__ import annotations

from html import escape

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QVBoxLayout

from app.models.fit import gib
from app.ui.wizard.common import (
    FIT_COLOURS,
    Page,
    WizardHost,
    cell,
    error_html,
    make_table,
    retry_button,
    status_label,
)
from app.ui.wizard.pair_selection import (
    choose_quant,
    heads_text,
    inspected_current,
    lower_context,
    preselected_quant,
    quant_rows,
)
from app.ui.wizard.words import head_text
from app.workers.hub_jobs import InspectRepo
from app.workers.hub_messages import HubFailure, RepoInspected


class QuantPage(Page):
    def __init__(self, wizard: WizardHost) -> None:
        super().__init__(
            wizard,
            "Quantization",
            "Smaller files run faster and fit more easily; larger ones are more "
            "accurate. The best quantization that fits is preselected.",
        )
        self.status = status_label()
        self.retry = retry_button(self)
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
        if inspected_current(self.state):
            self._fill()
            return
        self.status.setText(
            f"Reading {escape(self.state.target_repo or '')} (file list and model header)…"
        )
        self.submit(InspectRepo(self.state.target_repo or ""), self._inspected)

    def _inspected(self, reply: RepoInspected) -> None:
        self.state.inspected = reply
        self._fill()

    def on_failure(self, failure: HubFailure) -> None:
        self.retry.setVisible(True)
        self.status.setText(self.failure_text(failure))

    def _fill(self) -> None:
        inspected = self.state.inspected
        assert inspected is not None and self.state.hardware is not None
        f = inspected.facts
        if f.drafting.is_head:  # an assistant or a head: explained, not offered as a target
            self.table.setRowCount(0)
            self.status.setText(
                error_html(f"{inspected.repo_id}: {head_text(f.drafting)}")
                + (f"<br>{escape(heads_text(inspected))}" if inspected.heads else "")
            )
            return
        capped = lower_context(self.state, f.context_length)
        self.state.context_note = capped
        self.show_context()
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
            + (f"<br>{escape(heads_text(inspected))}" if inspected.heads else "")
        )
        rows = quant_rows(self.state)
        self.table.setRowCount(len(rows))
        for row, r in enumerate(rows):
            self.table.setItem(row, 0, cell(r.group.quant))
            self.table.setItem(row, 1, cell(r.group.label))
            self.table.setItem(row, 2, cell(gib(r.group.size)))
            self.table.setItem(row, 3, cell(gib(r.estimate.needed)))
            fit = r.fit
            self.table.setItem(
                row, 4, cell(fit.label.value, colour=FIT_COLOURS[fit.label], tooltip=fit.message)
            )
        self.table.resizeColumnsToContents()
        choice = preselected_quant(self.state, rows)
        for row, r in enumerate(rows):
            if r.group.quant == choice:
                self.table.selectRow(row)

    def isComplete(self) -> bool:  # noqa: N802 - Qt name
        return self.state.inspected is not None and bool(self.table.selectedItems())

    def validatePage(self) -> bool:  # noqa: N802 - Qt name
        assert self.state.inspected is not None
        choose_quant(self.state, self.state.inspected.groups[self.table.currentRow()])
        return True
