"""What a run found: the result, recommendations and confirmation, fronts, tables, the baseline, plots."""
