"""Tests of the distribution: what the wheel holds and what installing it does to an
environment that already has its own torch."""
