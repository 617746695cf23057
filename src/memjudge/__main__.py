from memjudge.cli import main

raise SystemExit(main())
