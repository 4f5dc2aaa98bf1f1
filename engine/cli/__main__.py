from engine.cli.app import main

main()
