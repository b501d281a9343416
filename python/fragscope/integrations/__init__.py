"""Callbacks for training frameworks. Each module imports its framework only when it is imported:
`fragscope.integrations.hf` (transformers), `fragscope.integrations.lightning` (Lightning)."""
