"""Request and response message classes for every opcode of spec/01-wire.md §6 and §9.

One module per family of operations; :mod:`brain.wire.registry` maps each
opcode to its request and response classes.
"""
