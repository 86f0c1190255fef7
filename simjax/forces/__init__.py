"""forces."""
