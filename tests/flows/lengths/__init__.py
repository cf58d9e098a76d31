"""A new stage's package, as a contributor writes it: ``test_adding_a_stage`` copies this folder to
``eagle3_core/stages/lengths/`` in a copy of the tree (nothing here is imported where it lies)."""
