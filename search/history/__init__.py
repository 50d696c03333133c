"""The history path: saved answers listed, searched, exported, imported and deleted."""
