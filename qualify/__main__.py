from qualify.cli import main

raise SystemExit(main())
