"""Screens and modals of the terminal UI."""
