"""Pure contracts shared by every side: pydantic models, Temporal names, the error tree.

No I/O and no clock: the workflow sandbox passes this package through."""
