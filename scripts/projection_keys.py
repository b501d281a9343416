"""The evidence keys that name a rule about a step projected from the trace (docs/json-schemas.md, evidence[].key),
shared by the scripts that count why the doctor decided a projected step or not."""

PROJECTION_KEYS = ("projection_vs_capacity", "too_close", "next_step", "longest_batch", "batches_grow",
                   "unseen_batches", "run_grows", "several_scales", "fit_rejected", "prefix_misfit",
                   "workspaces_hidden")


def projection_rule(report):
    """The last projection rule a `doctor --json` report's evidence names (the one its verdict rests on), or "-"."""
    keys = [e.get("key") for e in report.get("evidence", []) if e.get("key") in PROJECTION_KEYS]
    return keys[-1] if keys else "-"
