"""The shared ROS vocabulary every side speaks: interface names, QoS, message conversions, frames and TF,
loopback rules and the ROS environment, clocks, the spin thread, goal clients and publishers. The drivers,
robo and the agent's records stand on it; it imports nothing of pyrua_ros but the root."""
