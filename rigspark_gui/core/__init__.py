"""The pure planning engine: no Qt, no I/O, no clock. Every function is deterministic."""
