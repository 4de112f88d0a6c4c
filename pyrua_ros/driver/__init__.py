"""The driver surface: interface names, QoS, frames and message conversions shared by every driver
(the LIBERO sim node, the kinematic fake arm, a real arm's remapped drivers) and by the agent side."""
