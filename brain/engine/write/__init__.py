"""The write pipeline: the writer thread, plans, idempotency, budgets, transactions,
the change log, the record clock and the contexts planners and readers are given."""
