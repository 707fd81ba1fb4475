"""Request and response message classes for every opcode of WIRE.md §7-8.

One module per family of operations; :mod:`brain.wire.registry` maps each
opcode to its request and response classes.
"""
