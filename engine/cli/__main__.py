from engine.cli.main import main

main()
