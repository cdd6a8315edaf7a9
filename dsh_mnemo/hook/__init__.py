"""`mnemo hook …`: the commands every harness runs on prompt, turn end and session end.

This package is on the latency-critical path of every prompt: its modules
import only the standard library at module level, and everything heavier
(settings, context resolution, storage, Mnemosyne) is imported inside the
function that needs it.
"""
