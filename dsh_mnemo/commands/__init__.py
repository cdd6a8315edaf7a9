"""What each `mnemo` command does, as reports the CLI renders (one module per group)."""
