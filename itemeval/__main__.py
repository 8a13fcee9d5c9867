from itemeval.cli.main import main

raise SystemExit(main())
