"""Tests of the pools app."""
