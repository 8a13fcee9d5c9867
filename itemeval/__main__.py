from itemeval.cli.main import entry

entry()
