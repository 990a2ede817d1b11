"""Calibration server (and, from the suite helper, engine) for testing the measuring client."""
