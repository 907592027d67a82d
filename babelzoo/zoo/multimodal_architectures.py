"""Registered vision–text and speech–text architectures."""
