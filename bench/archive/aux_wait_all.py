"""When an auxiliary task's design runs (gptask.tuning.fidelity.AUX_AFTER_TARGET, AUX_WAIT_CHEAPEST):
its whole design after the tuned tasks' first target runs (``--waits all``: method
``<base>_wait_all``), or its levels above the cheapest only (``--waits above``: ``<base>_wait_above``),
for the base methods of bench/aux_sources.py with an auxiliary task (``--base mf_sources_aux`` or
``mf_aux``). Rows go to the JSON given, which bench/aux_sources.py's report and compare read.

    nice -n 5 python bench/archive/aux_wait_all.py --families currin,park --seeds 0-4 --out ROWS.json
    nice -n 5 python bench/archive/aux_wait_all.py --base mf_aux --waits above --seeds 10-29 --out ROWS.json
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

def main(argv: list[str] | None = None) -> int:
    from gptask.tuning import fidelity

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", default="currin,park")
    ap.add_argument("--seeds", type=parse_seeds, default=parse_seeds("0-4"))
    ap.add_argument("--budget", type=float, default=aux.fs.DEFAULT_BUDGET)
    ap.add_argument("--out", default="bench/results/aux_sources.json")
    ap.add_argument("--base", default="mf_sources_aux", choices=["mf_sources_aux", "mf_aux"])
    ap.add_argument("--waits", default="all", choices=["all", "above"])
    args = ap.parse_args(argv)
    method = f"{args.base}_wait_{args.waits}"
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("gptask").setLevel(logging.ERROR)
    if not hasattr(fidelity, "AUX_WAIT_CHEAPEST"):
        print("aux_wait_all: this gptask has no AUX_WAIT_CHEAPEST", file=sys.stderr)
        return 2
    fidelity.AUX_AFTER_TARGET, fidelity.AUX_WAIT_CHEAPEST = True, args.waits == "all"
    aux.run_rows(args.out, "python bench/archive/aux_wait_all.py " + " ".join(sys.argv[1:]), args.families,
                 args.seeds, args.budget, [(method, args.base)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
