"""Statistics: pure functions over numpy arrays and pandas frames."""
