"""The driver conformance kit: ``pyrua-ros check-driver`` runs :mod:`pyrua_ros.conformance.checks` against
whatever serves the driver surface (our sim, the fake arm, a vendor's stack remapped as docs/BRINGUP.md shows) and
prints a table per interface. The pytest suite test/test_driver_conformance.py runs the same checks on every driver
registered in :data:`pyrua_ros.sim_interfaces.drivers.DRIVERS`."""
