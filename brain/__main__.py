"""``python -m brain`` runs the ``brain`` command."""

from brain.cli.main import main

raise SystemExit(main())
