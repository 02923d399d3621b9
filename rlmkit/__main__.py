from rlmkit.cli import main

main()
