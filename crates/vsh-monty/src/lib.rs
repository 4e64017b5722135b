//! Run Monty programs against a VirtualFs with execution budgets.
