"""The ``pyrualean`` / ``pyrua-ros`` command-line interface."""
