"""Compiler passes, one per module; hlo_lowering/pipeline.py lists them in order."""
