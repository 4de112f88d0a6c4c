"""robo over ROS 2: small adapters over one node owner, composed by :class:`~pyrua_ros.robo.ros_backend.RosBackend`.

- ``link``: :class:`RosLink`, the nodes, their executors, the deadline and every bounded wait;
- ``state``: :class:`RobotState`, the driver's per-step state (pose, joints, episode status, safety events, TF);
- ``episode``: :class:`EpisodeControl`, episode parameters, reset, the driver's ``osc_action_scale``;
- ``motion``: :class:`Motion`, servo twists and Cartesian goals (lockstep);
- ``gripper``: :class:`Gripper`, the GripperCommand action and the finger-gap target;
- ``capture``: :class:`Captures`, camera views and segmentation on request.
"""
