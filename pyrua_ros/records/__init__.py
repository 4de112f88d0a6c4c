"""What a run writes: typed records, the bag recorder, the video, the ROS publisher."""
