"""The shared mixed-precision trainer."""
