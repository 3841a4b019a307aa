"""How every Spindle process talks to Temporal: the data converter and its claim check."""
