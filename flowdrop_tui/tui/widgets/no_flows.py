"""What the flow list shows in a workspace without flows: how to write the first one."""

from __future__ import annotations

from textual.widgets import Static

FIRST_FLOW = """\
No flows here yet. A flow is a folder flows/<name>/ holding flow.py:

    # flows/nightly/flow.py
    from flowdrop_tui import flow

    @flow(resumable=True, description="Review the repo once a night")
    def main(run):
        for round in run.rounds():
            run.state["last_round"] = round   # saved the moment it is set

Save it and it appears here; enter runs it."""


class NoFlows(Static):
    """Shown in place of the flow table while ``flows/`` holds no flow."""

    def __init__(self, flows_dir: str) -> None:
        super().__init__(
            FIRST_FLOW.replace("flows/<name>/", f"{flows_dir}/<name>/", 1),
            markup=False,
            id="no-flows",
        )
