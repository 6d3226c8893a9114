"""The local probe of a stalled task's incumbent (issue 45, the listed trap; gptask.tuning.probe) at a given ``after``.

    python bench/suite.py run --families gen:837 --methods mla --seeds 0-11 --budgets 12 --proposer local_probe \\
        --proposer-options '{"after": 2}' --tag probe2 --out F

gptask's default proposer with ``local_probe_after=after`` (the default since issue 45 is
gptask.tuning.settings.LOCAL_PROBE_AFTER = 2; ``{"after": null}`` is the proposer without it, as before):
once a task's best has not improved over its last ``after`` searched runs, its next non-pick search chooses among
its incumbent's unrun one-step neighbours that the fewest tasks have run, never two probes in a row.
``{"offers": false}``: the line counts leave out what other tasks' probes offered in the same round.
Measured: bench/results/listed_trap.md.
"""

from __future__ import annotations

from gptask.tuning.proposer import Proposer, register_proposer


class LocalProbe(Proposer):
    """The default proposer with the local probe after ``after`` searched runs without improvement (None: off)."""

    name = "local_probe"

    def __init__(self, after: int | None = 2, offers: bool = True) -> None:
        super().__init__(local_probe_after=None if after is None else int(after))
        #: False: a probe's line counts leave out the other tasks' offers of the round (their runs only)
        self.offers = bool(offers)

    def _local_probe(self, i, mine, domain):
        if not self.offers:
            self._probe_round = {}
        return super()._local_probe(i, mine, domain)


register_proposer("local_probe", LocalProbe)
