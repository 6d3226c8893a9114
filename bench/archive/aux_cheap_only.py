"""An auxiliary task at the cheapest level only: would it cost the tuned tasks less than the layout of
gptask (an auxiliary task runs its design at every level, the target's included, within
LOW_DESIGN_SHARE of the cost budget)? Method ``mf_sources_aux_cheap`` of bench/aux_sources.py's setting:
``mf_sources_aux`` with FidelityProposer's plan wrapped so that every auxiliary task keeps one design
point at each level but the cheapest (the LCM needs a point of every task). It wraps a method of
gptask.tuning.fidelity.FidelityProposer, hence bench/archive/. Rows go to the same JSON as
bench/aux_sources.py, whose report lists the method when present.

    nice -n 5 python bench/archive/aux_cheap_only.py --families currin,park --seeds 0-4 --out bench/results/aux_sources.json
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import aux_sources as aux  # noqa: E402
from row_files import parse_seeds  # noqa: E402

METHOD = "mf_sources_aux_cheap"


def _cheap_only(plan):
    def wrapped(self):
        out = plan(self)
        for i in list(out):
            b, level = self.base_of(i)
            if b >= self.n_tuned and level < self.n_levels - 1:
                out[i] = out[i][:1]
        return out
    return wrapped


def main(argv: list[str] | None = None) -> int:
    from gptask.tuning.fidelity import FidelityProposer

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", default="currin,park")
    ap.add_argument("--seeds", type=parse_seeds, default=parse_seeds("0-4"))
    ap.add_argument("--budget", type=float, default=aux.fs.DEFAULT_BUDGET)
    ap.add_argument("--out", default="bench/results/aux_sources.json")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("gptask").setLevel(logging.ERROR)
    FidelityProposer._plan = _cheap_only(FidelityProposer._plan)
    aux.run_rows(args.out, "python bench/archive/aux_cheap_only.py " + " ".join(sys.argv[1:]), args.families,
                 args.seeds, args.budget, [(METHOD, "mf_sources_aux")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
